package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// agentDef is an agent: saved (POST agents) or given inline with a session.
type agentDef struct {
	id           string
	name         *string
	model        string
	instructions string
	tools        json.RawMessage // as given; "[]" when none
	text         json.RawMessage // the text member as given (its format); nil: plain text
	infos        []coretest.ToolInfo
	metadata     map[string]string // never nil
	created      int64
	updated      int64
	seq          int // creation order
}

// toolJSON is the part of a tool definition the fake reads.
type toolJSON struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	DeferLoading bool            `json:"defer_loading"`
}

// parseTools checks a tools array and describes its function tools for the
// model. A deferred function needs a tool_search tool beside it.
func parseTools(raw json.RawMessage) (json.RawMessage, []coretest.ToolInfo, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`[]`), nil, nil
	}
	var tools []toolJSON
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, nil, fmt.Errorf("Invalid 'tools': %v.", err)
	}
	var infos []coretest.ToolInfo
	search, deferred := false, false
	seen := map[string]bool{}
	for i, t := range tools {
		switch t.Type {
		case "tool_search":
			search = true
		case "function":
			if t.Name == "" {
				return nil, nil, fmt.Errorf("Missing required parameter: 'tools[%d].name'.", i)
			}
			if len(bytes.TrimSpace(t.Parameters)) == 0 || t.Parameters[0] != '{' {
				return nil, nil, fmt.Errorf("Missing required parameter: 'tools[%d].parameters'.", i)
			}
			if seen[t.Name] {
				return nil, nil, fmt.Errorf("Duplicate tool name: '%s'.", t.Name)
			}
			seen[t.Name] = true
			deferred = deferred || t.DeferLoading
			infos = append(infos, coretest.ToolInfo{Name: t.Name, Description: t.Description, Deferred: t.DeferLoading})
		case "":
			return nil, nil, fmt.Errorf("Missing required parameter: 'tools[%d].type'.", i)
		}
	}
	if deferred && !search {
		return nil, nil, fmt.Errorf("Deferred function tools (defer_loading: true) require a tool_search tool.")
	}
	return echoTools(raw), infos, nil
}

// echoTools returns the tools as the service echoes them: a function tool
// has a description and defer_loading even when the request left them out.
func echoTools(raw json.RawMessage) json.RawMessage {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return raw
	}
	for _, t := range tools {
		if string(t["type"]) != `"function"` {
			continue
		}
		for k, v := range map[string]string{"defer_loading": "false", "description": `""`} {
			if _, ok := t[k]; !ok {
				t[k] = json.RawMessage(v)
			}
		}
	}
	return mustJSON(tools)
}

func (s *Server) createAgent(req *Request) reply {
	var body struct {
		Model        string          `json:"model"`
		Instructions *string         `json:"instructions"`
		Name         *string         `json:"name"`
		Tools        json.RawMessage `json:"tools"`
		Metadata     json.RawMessage `json:"metadata"`
		Text         json.RawMessage `json:"text"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request.")
	}
	if body.Model == "" {
		return errorReply(http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	metadata, _, refusal := fakeapi.Metadata(body.Metadata)
	if refusal != "" {
		return errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_value", refusal)
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	tools, infos, err := parseTools(body.Tools)
	if err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
	}
	if body.Text != nil {
		if refusal := checkText(body.Text); refusal != "" {
			return errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_value", refusal)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	a := &agentDef{id: s.newID("agent"), name: body.Name, model: body.Model, tools: tools, infos: infos, metadata: metadata, created: now, updated: now, seq: len(s.agents) + s.deletedAgents}
	if body.Instructions != nil {
		a.instructions = *body.Instructions
	}
	a.text = body.Text
	s.agents[a.id] = a
	return reply{status: http.StatusOK, body: a.json()}
}

func (s *Server) getAgent(w http.ResponseWriter, id string) {
	s.mu.Lock()
	a := s.agents[id]
	s.mu.Unlock()
	if a == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "resource_not_found", "No agent found with id '"+id+"'.")
		return
	}
	writeJSON(w, http.StatusOK, a.json())
}

func (s *Server) deleteAgent(w http.ResponseWriter, id string) {
	s.mu.Lock()
	a := s.agents[id]
	if a != nil {
		delete(s.agents, id)
		s.deletedAgents++
	}
	s.mu.Unlock()
	if a == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "resource_not_found", "No agent found with id '"+id+"'.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true, "object": "agent.deleted"})
}

// textJSON renders the agent's text member: its format, and the verbosity.
func (a *agentDef) textJSON() map[string]any {
	var t struct {
		Format    json.RawMessage `json:"format"`
		Verbosity string          `json:"verbosity"`
	}
	json.Unmarshal(a.text, &t)
	if t.Format == nil {
		t.Format = json.RawMessage(`{"type":"text"}`)
	}
	if t.Verbosity == "" {
		t.Verbosity = "medium"
	}
	return map[string]any{"format": t.Format, "verbosity": t.Verbosity}
}

// formatName names, for Received, the format the agent answers in: the
// sessions API names none, so a JSON schema one is "json_schema"; "" for
// plain text.
func (a *agentDef) formatName() string {
	var t struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	json.Unmarshal(a.text, &t)
	if t.Format.Type == "json_schema" {
		return "json_schema"
	}
	return ""
}

// checkText refuses a text member the service would refuse: a format of
// an unknown type, or a json_schema one without an object schema.
func checkText(raw json.RawMessage) string {
	var t struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
		Verbosity *string `json:"verbosity"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return "Invalid 'text': expected an object."
	}
	if t.Verbosity != nil && *t.Verbosity != "low" && *t.Verbosity != "medium" && *t.Verbosity != "high" {
		return "Invalid 'text.verbosity': expected one of 'low', 'medium', 'high'."
	}
	if t.Format == nil {
		return ""
	}
	switch t.Format.Type {
	case "text":
		return ""
	case "json_schema":
		var schema map[string]any
		if json.Unmarshal(t.Format.Schema, &schema) != nil || schema == nil {
			return "Missing required parameter: 'text.format.schema' (a JSON Schema object)."
		}
		return ""
	}
	return "Invalid 'text.format.type': expected 'text' or 'json_schema'."
}

// json renders the agent as GET agents/{id} returns it.
func (a *agentDef) json() map[string]any {
	m := a.sessionJSON()
	m["object"] = "agent"
	m["created_at"] = a.created
	m["updated_at"] = a.updated
	m["metadata"] = a.metadata
	return m
}

// sessionJSON renders the agent as a session's "agent" field holds it.
func (a *agentDef) sessionJSON() map[string]any {
	return map[string]any{
		"id":           a.id,
		"instructions": a.instructions,
		"model":        a.model,
		"multi_agent":  map[string]any{"enabled": false, "max_concurrent_subagents": nil},
		"name":         a.name,
		"reasoning":    map[string]any{"effort": "medium", "summary": nil},
		"service_tier": "auto",
		"text":         a.textJSON(),
		"tools":        a.tools,
		"compaction":   map[string]bool{"async": true},
		"experimental": map[string]bool{"time_awareness": false},
	}
}
