package foundrytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds the 2026 agent object (agent endpoints, their version
// selectors, the agent's state), the definition kinds other than prompt,
// the per-agent endpoint route and hosted agent sessions. Sources: Learn's
// @azure/ai-projects reference (Agent, AgentEndpointConfig, VersionSelector,
// FixedRatioVersionSelectionRule, HostedAgentDefinition,
// WorkflowAgentDefinition, ExternalAgentDefinition, ProtocolVersionRecord);
// Azure.AI.AgentServer's CreateResponse.AgentSessionId and
// ResponseObject.AgentSessionId; Learn "Manage hosted agent sessions";
// agent-framework-go provider/foundryprovider/hostedsession.go (the
// agent_session_id body field, the x-agent-session-id header).

// VersionRule is a rule of an agent endpoint's version selector: a
// FixedRatio rule that routes Percent percent of the endpoint's traffic to
// Version.
type VersionRule struct {
	Version string
	Percent int
}

// agentEndpoint is an agent's endpoint configuration.
type agentEndpoint struct {
	rules []VersionRule
}

// json returns the endpoint configuration as the agent object carries it
// (AgentEndpointConfig: version_selector, protocol_configuration).
func (e *agentEndpoint) json() map[string]any {
	rules := []map[string]any{}
	for _, r := range e.rules {
		rules = append(rules, map[string]any{"type": "FixedRatio", "agent_version": r.Version, "traffic_percentage": r.Percent})
	}
	return map[string]any{
		"version_selector":       map[string]any{"version_selection_rules": rules},
		"protocol_configuration": map[string]any{"responses": map[string]any{}},
	}
}

// SetAgentEndpoint configures the endpoint of the agent name, whose
// version selector routes the endpoint's traffic by rules; with no rules
// the endpoint serves the latest version. The endpoint is served at
// /agents/{name}/endpoint/protocols/openai/. A request on it runs the
// version of the rule with the largest share (the first of equals): the
// fake does not split traffic, so that a test knows which version
// answers; a hosted agent's session keeps the version it began with. It
// reports whether the agent exists.
func (s *Server) SetAgentEndpoint(name string, rules ...VersionRule) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[name]
	if a == nil {
		return false
	}
	a.endpoint = &agentEndpoint{rules: slices.Clone(rules)}
	return true
}

// SetAgentState sets the operational state of the agent name ("enabled"
// or "disabled") and, for a disabled one, where that state comes from
// (its state_source, "" for none). A disabled agent's requests are
// refused with 403 agent_disabled, on its endpoint and on the project's
// responses route alike. It reports whether the agent exists.
func (s *Server) SetAgentState(name, state, source string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[name]
	if a == nil {
		return false
	}
	a.state, a.stateSource = state, source
	return true
}

// AddAgentVersion creates a version of the agent name (and the agent, if
// it does not exist) with the definition def, of any kind the service
// knows: prompt, hosted (container_protocol_versions, cpu and memory
// required), workflow or external. It returns the version, or "" if def
// is refused as a create-version request would be.
func (s *Server) AddAgentVersion(name string, def json.RawMessage) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, e := decodeVersion(mustJSON(map[string]any{"definition": def}))
	if e != nil {
		return ""
	}
	return s.addVersion(name, req).Version
}

// checkKind checks the members a definition of kind (hosted, workflow,
// external) requires.
func checkKind(kind string, raw json.RawMessage) *apiError {
	var def struct {
		Protocols []struct {
			Protocol string `json:"protocol"`
			Version  string `json:"version"`
		} `json:"container_protocol_versions"`
		CPU      string          `json:"cpu"`
		Memory   string          `json:"memory"`
		Tools    json.RawMessage `json:"tools"`
		Workflow *string         `json:"workflow"`
	}
	if json.Unmarshal(raw, &def) != nil {
		return schemaError("definition")
	}
	switch kind {
	case "hosted":
		if def.Protocols == nil || def.CPU == "" || def.Memory == "" {
			return badRequest("invalid_payload", "definition", "A hosted agent definition requires container_protocol_versions, cpu and memory.")
		}
		for i, p := range def.Protocols {
			if p.Protocol == "" || p.Version == "" {
				return schemaError("definition.container_protocol_versions[" + strconv.Itoa(i) + "]")
			}
		}
		return checkDeferred(def.Tools, "definition.tools")
	}
	return nil
}

// kindOf returns the kind of a version's definition.
func kindOf(v *agentVersion) string {
	var def struct {
		Kind string `json:"kind"`
	}
	json.Unmarshal(v.Definition, &def)
	return def.Kind
}

// disabled returns the refusal of a request to the agent a when it is
// disabled: its state "controls whether the agent endpoint accepts or
// rejects requests"; the fake refuses it on the project's route too. The
// status and code are [INF].
func disabled(a *agent) *apiError {
	if a.state != "disabled" {
		return nil
	}
	msg := "Agent " + strconv.Quote(a.name) + " is disabled."
	if a.stateSource != "" {
		msg = "Agent " + strconv.Quote(a.name) + " is disabled (state_source " + strconv.Quote(a.stateSource) + ")."
	}
	return &apiError{Status: http.StatusForbidden, Code: "agent_disabled", Message: msg}
}

// kindRefusal returns the refusal of a request that runs version v of
// agent a on the project's route (endpoint false) or on the agent's
// endpoint, if it is refused for its kind: an external agent's
// (registration only: it runs outside Foundry); a hosted agent's on the
// project route (samples: hosted agents are reachable only on their own
// endpoint [INF]).
func kindRefusal(a *agent, v *agentVersion, endpoint bool) *apiError {
	switch kindOf(v) {
	case "external":
		return badRequest("invalid_request", "agent_reference", "Agent %q is an external agent: it runs outside Foundry, which keeps its registration only.", a.name)
	case "hosted":
		if !endpoint {
			return badRequest("invalid_request", "agent_reference", "Agent %q is a hosted agent: call it on its endpoint, /agents/%s/endpoint/protocols/openai/responses.", a.name, a.name)
		}
	}
	return nil
}

// createProjectResponse answers POST /openai/v1/responses: a request whose
// agent the project's route does not run is refused (see disabled and
// kindRefusal); the others are createResponse's.
func (s *Server) createProjectResponse(ex *exchange, args []string, f *Fault) (any, error) {
	var body struct {
		Ref *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agent_reference"`
	}
	json.Unmarshal(ex.body, &body)
	if body.Ref != nil {
		if a, v := s.agents[body.Ref.Name], s.version(body.Ref.Name, body.Ref.Version); a != nil && v != nil {
			if e := disabled(a); e != nil {
				return nil, e
			}
			if e := kindRefusal(a, v, false); e != nil {
				return nil, e
			}
		}
	}
	return s.createResponse(ex, args, f)
}

// endpointPrefix returns the path of the agent name's endpoint, after the
// project prefix.
func endpointPrefix(name string) string {
	return "/agents/" + url.PathEscape(name) + "/endpoint/protocols/openai/"
}

// endpointRoute maps a request on the endpoint of the agent name (rest:
// the path after /agents/{name}/endpoint/protocols/openai) to its
// operation: the project's OpenAI-compatible routes (responses and
// conversations, with api-version=v1), for that agent. A create-response
// request runs the version the endpoint serves, without an
// agent_reference.
func (s *Server) endpointRoute(method, name string, rest []string) routeInfo {
	esc := make([]string, len(rest))
	for i, p := range rest {
		esc[i] = url.PathEscape(p)
	}
	ri := s.route(method, "/openai/v1/"+strings.Join(esc, "/"))
	if ri.handle == nil || ri.op == OpListModels {
		return routeInfo{}
	}
	args := append([]string{name}, ri.args...)
	if ri.op == OpCreateResponse {
		return routeInfo{ri.op, s.createEndpointResponse, args}
	}
	h := ri.handle
	return routeInfo{ri.op, func(ex *exchange, args []string, f *Fault) (any, error) {
		if _, e := s.endpointAgent(args[0]); e != nil {
			return nil, e
		}
		return h(ex, args[1:], f)
	}, args}
}

// endpointAgent returns the agent an endpoint request names, refusing an
// unknown or disabled one.
func (s *Server) endpointAgent(name string) (*agent, *apiError) {
	a := s.agents[name]
	if a == nil || len(a.versions) == 0 {
		return nil, notFound("Agent %q not found.", name)
	}
	return a, disabled(a)
}

// served returns the version a request on a's endpoint runs: the rule
// with the largest share (the first of equals), or the latest version
// when the endpoint routes by no rule.
func (a *agent) served(s *Server) *agentVersion {
	best := -1
	var v *agentVersion
	if a.endpoint != nil {
		for _, r := range a.endpoint.rules {
			if x := s.version(a.name, r.Version); x != nil && r.Percent > 0 && r.Percent > best {
				best, v = r.Percent, x
			}
		}
	}
	if v == nil {
		v = a.versions[len(a.versions)-1]
	}
	return v
}

// sessionIDPattern is what a hosted agent session id must match (the
// Microsoft Foundry skill's session-management reference).
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,128}$`)

// hostedSession is a hosted agent's session: a sandbox whose state
// ($HOME, /files) lasts across the turns that name it.
type hostedSession struct {
	id, agent, version string
	responses          []string
}

// Session is a hosted agent session of the fake: the sandbox the service
// keeps, across turns, for the requests that name it.
type Session struct {
	// ID is the session's agent_session_id; Agent and Version name the
	// agent and the version that backs the session (the one its first
	// request ran).
	ID, Agent, Version string
	// Responses are the responses made in the session, in order: the
	// turns its sandbox served.
	Responses []string
}

// Sessions returns the hosted agent sessions of the project, in the order
// they began.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.hosted))
	for _, h := range s.hosted {
		out = append(out, Session{ID: h.id, Agent: h.agent, Version: h.version, Responses: slices.Clone(h.responses)})
	}
	return out
}

// session returns the session of agent a that a request names (id), or a
// new one. A request that names none gets a new session: the service may
// derive one from the conversation or the previous response, but
// documents "or a new UUID is generated", and the fake takes that reading
// so that a client which drops its session is seen to lose its sandbox.
func (s *Server) session(a *agent, id string) *hostedSession {
	for _, h := range s.hosted {
		if h.agent == a.name && h.id == id {
			return h
		}
	}
	if id == "" {
		var b [16]byte
		rand.Read(b[:])
		x := hex.EncodeToString(b[:])
		id = x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
	}
	h := &hostedSession{id: id, agent: a.name, version: a.served(s).Version}
	s.hosted = append(s.hosted, h)
	return h
}

// createEndpointResponse answers POST
// /agents/{name}/endpoint/protocols/openai/responses: the request runs the
// version the agent's endpoint serves (for a hosted agent, the version of
// its session), and carries no agent_reference. For a hosted agent the
// request's agent_session_id names the session (a new one when absent),
// and the answer names it in the x-agent-session-id header and in the
// response's agent_session_id.
func (s *Server) createEndpointResponse(ex *exchange, args []string, f *Fault) (any, error) {
	a, e := s.endpointAgent(args[0])
	if e != nil {
		return nil, e
	}
	m, e := decodeObject(ex.body)
	if e != nil {
		return nil, e
	}
	if present(m, "agent_reference") {
		// [INF] The route names the agent; the samples send none.
		return nil, badRequest("invalid_payload", "agent_reference", "A request on an agent's endpoint names no agent_reference: the endpoint runs the version its version selector serves.")
	}
	v := a.served(s)
	var sess *hostedSession
	if kindOf(v) == "hosted" {
		var id string
		if present(m, "agent_session_id") && (json.Unmarshal(m["agent_session_id"], &id) != nil || !sessionIDPattern.MatchString(id)) {
			return nil, badRequest("invalid_value", "agent_session_id", "Invalid 'agent_session_id': use 8 to 128 letters, digits, '-' or '_'.")
		}
		sess = s.session(a, id)
		v = s.version(a.name, sess.version)
		if v == nil {
			return nil, notFound("Agent %q has no version %q (the version of session %q).", a.name, sess.version, sess.id)
		}
	}
	if e := kindRefusal(a, v, true); e != nil {
		return nil, e
	}
	m["agent_reference"] = mustJSON(map[string]any{"type": "agent_reference", "name": a.name, "version": v.Version})
	delete(m, "agent_session_id")
	ex.body = mustJSON(m)
	out, err := s.createResponse(ex, nil, f)
	if err != nil || sess == nil {
		return out, err
	}
	ex.w.Header().Set("x-agent-session-id", sess.id)
	switch o := out.(type) {
	case *responseWire:
		sess.responses = append(sess.responses, o.ID)
		return &sessionResponseWire{o, sess.id}, nil
	case *sseAnswer:
		for _, ev := range o.events {
			if r, ok := ev.data["response"].(map[string]any); ok {
				if id, _ := r["id"].(string); id != "" && !slices.Contains(sess.responses, id) {
					sess.responses = append(sess.responses, id)
				}
				r["agent_session_id"] = sess.id
			}
		}
	}
	return out, nil
}

// sessionResponseWire is a hosted agent's response as a JSON answer
// carries it: with its agent_session_id (ResponseObject.AgentSessionId,
// "always returned for hosted agents").
type sessionResponseWire struct {
	*responseWire
	AgentSessionID string `json:"agent_session_id"`
}

// AgentSessionID returns the agent_session_id a recorded request's body
// named, "" for none.
func (r Request) AgentSessionID() string {
	var b struct {
		ID string `json:"agent_session_id"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return ""
	}
	return b.ID
}
