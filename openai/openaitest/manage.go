package openaitest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// listAgents answers GET agents: the saved agents, newest first unless
// order=asc, in cursor pages.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]*agentDef, 0, len(s.agents))
	for _, a := range s.agents {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *agentDef) int { return a.seq - b.seq })
	all := make([]entry, len(list))
	for i, a := range list {
		all[i] = entry{id: a.id, v: mustJSON(a.json())}
	}
	s.mu.Unlock()
	s.writePage(w, r, all)
}

// listSessions answers GET agents/sessions: the sessions (of one agent,
// with agent_id), newest first unless order=asc, in cursor pages.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	agent := r.URL.Query().Get("agent_id")
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if agent == "" || sess.agent.id == agent {
			list = append(list, sess)
		}
	}
	slices.SortFunc(list, func(a, b *session) int { return a.seq - b.seq })
	all := make([]entry, len(list))
	for i, sess := range list {
		all[i] = entry{id: sess.id, v: mustJSON(sess.json())}
	}
	s.mu.Unlock()
	s.writePage(w, r, all)
}

func (s *Server) writePage(w http.ResponseWriter, r *http.Request, all []entry) {
	page, more, ok := paginate(all, r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid pagination parameters.")
		return
	}
	writeJSON(w, http.StatusOK, cursorPage(page, more))
}

// updateAgent answers POST agents/{id}: the fields given replace the
// agent's (metadata whole: {} or null clears it); sessions made before keep
// the agent they were made with.
func (s *Server) updateAgent(w http.ResponseWriter, req *Request, id string) {
	var body struct {
		Model        *string         `json:"model"`
		Instructions *string         `json:"instructions"`
		Name         *string         `json:"name"`
		Tools        json.RawMessage `json:"tools"`
		Metadata     json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request.")
		return
	}
	metadata, newMetadata, refusal := fakeapi.Metadata(body.Metadata)
	if refusal != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", refusal)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[id]
	if a == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "resource_not_found", "No agent found with id '"+id+"'.")
		return
	}
	updated := *a
	if t := bytes.TrimSpace(body.Tools); len(t) > 0 && string(t) != "null" {
		tools, infos, err := parseTools(t)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
			return
		}
		updated.tools, updated.infos = tools, infos
	}
	if body.Model != nil {
		if *body.Model == "" {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid 'model': empty string.")
			return
		}
		updated.model = *body.Model
	}
	if body.Instructions != nil {
		updated.instructions = *body.Instructions
	}
	if body.Name != nil {
		updated.name = body.Name
	}
	if newMetadata {
		updated.metadata = metadata
	}
	updated.updated = s.now()
	s.agents[id] = &updated
	writeJSON(w, http.StatusOK, updated.json())
}

// updateSession answers POST agents/sessions/{id}: its metadata (up to 16
// pairs; {} or null clears it) replaces the session's, and its
// agent.tools the tools the session's model may call from its next step.
func (s *Server) updateSession(w http.ResponseWriter, req *Request, id string) {
	var body struct {
		Metadata json.RawMessage `json:"metadata"`
		Agent    *struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request.")
		return
	}
	metadata, newMetadata, refusal := fakeapi.Metadata(body.Metadata)
	if refusal != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", refusal)
		return
	}
	sess := s.lockSession(w, id)
	if sess == nil {
		return
	}
	defer s.mu.Unlock()
	if body.Agent != nil {
		if t := bytes.TrimSpace(body.Agent.Tools); len(t) > 0 && string(t) != "null" {
			tools, infos, err := parseTools(t)
			if err != nil {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
				return
			}
			a := *sess.agent
			a.tools, a.infos = tools, infos
			sess.agent, sess.agentJSON = &a, mustJSON(a.sessionJSON())
			sess.model.SetTools(infos)
		}
	}
	if newMetadata {
		sess.metadata = metadata
	}
	writeJSON(w, http.StatusOK, sess.json())
}
