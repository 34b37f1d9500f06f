package foundrytest

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
)

// agent is an agent of the fake project with its versions.
type agent struct {
	name     string
	seq      int             // creation order
	versions []*agentVersion // live versions, oldest first
	next     int             // number of the next version
	// endpoint is the agent's endpoint configuration, nil when none is
	// configured (see SetAgentEndpoint).
	endpoint *agentEndpoint
	// state is "enabled" ("" too) or "disabled"; stateSource says where a
	// disabled state comes from (see SetAgentState).
	state, stateSource string
}

type agentVersion struct {
	Metadata    map[string]string `json:"metadata"`
	Object      string            `json:"object"`
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Version     string            `json:"version"`
	Description string            `json:"description,omitempty"`
	CreatedAt   int64             `json:"created_at"`
	Definition  json.RawMessage   `json:"definition"`
	Status      string            `json:"status"`
}

var agentName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// AddAgent creates a version of the agent name (and the agent, if it does
// not exist) with a prompt definition using model, as a program that
// references an existing agent expects to find. It returns the version.
func (s *Server) AddAgent(name, model string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	def, _ := json.Marshal(map[string]any{"kind": "prompt", "model": model})
	return s.addVersion(name, versionRequest{Definition: def}).Version
}

// AgentVersions returns the live versions of the agent name, oldest
// first, or nil if there is no such agent.
func (s *Server) AgentVersions(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[name]
	if a == nil {
		return nil
	}
	vs := []string{}
	for _, v := range a.versions {
		vs = append(vs, v.Version)
	}
	return vs
}

// Versions returns the live versions of every agent of the project, as
// "name:version" ids, sorted: what exists on the service for tests that
// check what a program leaves behind.
func (s *Server) Versions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, a := range s.agents {
		for _, v := range a.versions {
			ids = append(ids, v.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// Agents returns the names of the agents of the project (those with a
// live version), sorted.
func (s *Server) Agents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, a := range s.agents {
		if len(a.versions) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// AgentDefinition returns the definition of a version of the agent name,
// as it was sent, or nil.
func (s *Server) AgentDefinition(name, version string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.version(name, version); v != nil {
		return slices.Clone(v.Definition)
	}
	return nil
}

type versionRequest struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	Definition  json.RawMessage   `json:"definition"`
}

func (s *Server) addVersion(name string, req versionRequest) *agentVersion {
	a := s.agents[name]
	if a == nil {
		s.agentSeq++
		a = &agent{name: name, next: 1, seq: s.agentSeq}
		s.agents[name] = a
	}
	n := strconv.Itoa(a.next)
	a.next++
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	v := &agentVersion{Metadata: req.Metadata, Object: "agent.version", ID: name + ":" + n, Name: name, Version: n,
		Description: req.Description, CreatedAt: now(), Definition: req.Definition, Status: "active"}
	a.versions = append(a.versions, v)
	return v
}

// version returns the version of agent name ("" for the latest), or nil.
func (s *Server) version(name, version string) *agentVersion {
	a := s.agents[name]
	if a == nil || len(a.versions) == 0 {
		return nil
	}
	if version == "" {
		return a.versions[len(a.versions)-1]
	}
	for _, v := range a.versions {
		if v.Version == version {
			return v
		}
	}
	return nil
}

// agentObject returns the agent object of a: its latest version, its
// state, and its endpoint configuration when one is configured (the
// 2026 Agent object: Learn, @azure/ai-projects Agent and
// AgentEndpointConfig).
func (s *Server) agentObject(a *agent) map[string]any {
	state := a.state
	if state == "" {
		state = "enabled"
	}
	o := map[string]any{"object": "agent", "id": a.name, "name": a.name, "state": state,
		"versions": map[string]any{"latest": a.versions[len(a.versions)-1]}}
	if a.stateSource != "" {
		o["state_source"] = a.stateSource
	}
	if a.endpoint != nil {
		o["agent_endpoint"] = a.endpoint.json()
	}
	return o
}

// decodeVersion decodes and checks a create-version (or create-agent) body.
func decodeVersion(body []byte) (versionRequest, *apiError) {
	var req versionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, schemaError("/")
	}
	var def struct {
		Kind  string            `json:"kind"`
		Model string            `json:"model"`
		Tools []json.RawMessage `json:"tools"`
		Text  json.RawMessage   `json:"text"`
	}
	if len(req.Definition) == 0 || json.Unmarshal(req.Definition, &def) != nil {
		return req, badRequest("invalid_payload", "definition", "Missing required parameter: 'definition'.")
	}
	switch def.Kind {
	case "prompt":
		if def.Model == "" {
			return req, badRequest("invalid_payload", "definition.model", "Missing required parameter: 'definition.model'.")
		}
	case "hosted", "workflow", "external":
		if e := checkKind(def.Kind, req.Definition); e != nil {
			return req, e
		}
	default:
		return req, badRequest("invalid_payload", "definition.kind", "Unsupported agent kind %q: want prompt, hosted, workflow or external.", def.Kind)
	}
	if def.Text != nil {
		// The agent's text.format, as a response's: a json_schema one
		// needs its name and an object schema.
		if _, e := parseTextFormat(def.Text); e != nil {
			e.Param = "definition." + e.Param
			return req, e
		}
	}
	if e := checkDeferred(mustJSON(def.Tools), "definition.tools"); e != nil {
		return req, e
	}
	for i, t := range def.Tools {
		var tool struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(t, &tool) != nil || tool.Type == "" {
			return req, schemaError("definition.tools[" + strconv.Itoa(i) + "]")
		}
		if tool.Type == "function" && (tool.Name == "" || len(tool.Parameters) == 0) {
			return req, schemaError("definition.tools[" + strconv.Itoa(i) + "]")
		}
	}
	if len(req.Description) > 512 {
		return req, badRequest("invalid_payload", "description", "'description' is longer than 512 characters.")
	}
	return req, nil
}

func checkAgentName(name string) *apiError {
	if !agentName.MatchString(name) {
		return badRequest("invalid_parameter", "agent_name", "Invalid agent name %q: use at most 63 letters, digits and hyphens, starting and ending with a letter or digit.", name)
	}
	return nil
}

func (s *Server) createAgent(ex *exchange, _ []string, _ *Fault) (any, error) {
	req, e := decodeVersion(ex.body)
	if e != nil {
		return nil, e
	}
	if e := checkAgentName(req.Name); e != nil {
		return nil, e
	}
	s.addVersion(req.Name, req)
	return s.agentObject(s.agents[req.Name]), nil
}

func (s *Server) createAgentVersion(ex *exchange, args []string, _ *Fault) (any, error) {
	if e := checkAgentName(args[0]); e != nil {
		return nil, e
	}
	req, e := decodeVersion(ex.body)
	if e != nil {
		return nil, e
	}
	return s.addVersion(args[0], req), nil
}

func (s *Server) getAgent(_ *exchange, args []string, _ *Fault) (any, error) {
	a := s.agents[args[0]]
	if a == nil || len(a.versions) == 0 {
		return nil, notFound("Agent %q not found.", args[0])
	}
	return s.agentObject(a), nil
}

func (s *Server) getAgentVersion(_ *exchange, args []string, _ *Fault) (any, error) {
	v := s.version(args[0], args[1])
	if v == nil {
		return nil, notFound("Agent %q has no version %q.", args[0], args[1])
	}
	return v, nil
}

func (s *Server) deleteAgent(_ *exchange, args []string, _ *Fault) (any, error) {
	if s.agents[args[0]] == nil {
		return nil, notFound("Agent %q not found.", args[0])
	}
	delete(s.agents, args[0])
	return map[string]any{"object": "agent.deleted", "name": args[0], "deleted": true}, nil
}

func (s *Server) deleteAgentVersion(_ *exchange, args []string, _ *Fault) (any, error) {
	a := s.agents[args[0]]
	v := s.version(args[0], args[1])
	if v == nil {
		return nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "Agent " + strconv.Quote(args[0]) + " has no version " + strconv.Quote(args[1]) + "."}
	}
	a.versions = slices.DeleteFunc(a.versions, func(x *agentVersion) bool { return x == v })
	if len(a.versions) == 0 {
		delete(s.agents, args[0])
	}
	return map[string]any{"object": "agent.version.deleted", "name": args[0], "version": args[1], "deleted": true}, nil
}
