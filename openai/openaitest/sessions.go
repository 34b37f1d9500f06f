package openaitest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// session is a session and the model playing the script for it.
type session struct {
	id    string
	seq   int
	agent *agentDef
	// agentJSON is the agent as sessions show it, rendered once.
	agentJSON json.RawMessage
	model     *coretest.Model
	status    string // idle, in_progress, requires_action, failed
	errMsg    string
	created   int64
	active    int64
	usage     Usage
	metadata  map[string]string
	// env is the session's environment: {"type":"none"}, or a self-hosted
	// one whose executor must connect before a turn runs (see
	// Server.ConnectEnvironment).
	env       environmentJSON
	connected bool // the self-hosted environment's executor is connected
	waitEnv   bool // the active turn waits for the environment to connect

	turns   []*turn
	cur     *turn          // the active turn, or nil
	pending []*pendingCall // calls waiting for results, in call order
	items   []json.RawMessage
	subs    map[*subscriber]bool
	events  []string // types of the events emitted, in order
}

type turn struct {
	id        string
	subagent  string // the subagent whose turn it is; "" for the root agent's
	status    string // in_progress, completed, failed, cancelled
	err       *turnErrorJSON
	usage     Usage
	items     []json.RawMessage
	created   int64
	completed int64
	index     int // next output_index
}

type pendingCall struct {
	turnID, callID, name string
	args                 json.RawMessage
	approval             bool                // an approval request (callID is its request_id)
	origin               string              // for a computer-use request for access to an origin
	signIn               bool                // the computer-use request is to sign in to origin (browser_authentication)
	result               *coretest.Delivered // set once its result arrived
	output               json.RawMessage     // the result's output, as sent
}

type createSessionBody struct {
	Environment *struct {
		Type               string `json:"type"`
		WorkspaceDirectory string `json:"workspace_directory"`
	} `json:"environment"`
	AgentID *string `json:"agent_id"`
	Agent   *struct {
		Model        *string         `json:"model"`
		Instructions *string         `json:"instructions"`
		Tools        json.RawMessage `json:"tools"`
		Text         json.RawMessage `json:"text"`
	} `json:"agent"`
	Input    json.RawMessage `json:"input"`
	Stream   bool            `json:"stream"`
	Metadata json.RawMessage `json:"metadata"`
}

// newSession validates a creation request and makes the session (not yet
// registered). It returns the user's input, and an error reply if the
// request is refused. The caller holds s.mu.
func (s *Server) newSession(body []byte) (*session, string, *reply) {
	var b createSessionBody
	if err := json.Unmarshal(body, &b); err != nil {
		r := errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request.")
		return nil, "", &r
	}
	bad := func(code, msg string) (*session, string, *reply) {
		r := errorReply(http.StatusBadRequest, "invalid_request_error", code, msg)
		return nil, "", &r
	}
	if b.Environment == nil {
		return bad("missing_required_parameter", "Missing required parameter: 'environment'.")
	}
	env := environmentJSON{Type: b.Environment.Type}
	switch b.Environment.Type {
	case "none":
	case "self_hosted":
		if !strings.HasPrefix(b.Environment.WorkspaceDirectory, "/") {
			return bad("invalid_value", "Invalid value for 'environment.workspace_directory': an absolute path is required.")
		}
		env.ID, env.WorkspaceDirectory = s.newID("env"), b.Environment.WorkspaceDirectory
		env.RemoteURL = "wss://fake-openai.invalid/v1/agents/environments/" + env.ID + "/connect"
	default:
		return bad("invalid_value", "This fake supports only environment types 'none' and 'self_hosted' (function tools run in the client).")
	}
	metadata, _, refusal := fakeapi.Metadata(b.Metadata)
	if refusal != "" {
		return bad("invalid_value", refusal)
	}
	input, ok := inputText(b.Input)
	if !ok {
		return bad("missing_required_parameter", "Missing required parameter: 'input' (required when environment.type is 'none').")
	}
	var a agentDef
	switch {
	case b.AgentID != nil:
		saved := s.agents[*b.AgentID]
		if saved == nil {
			r := errorReply(http.StatusNotFound, "invalid_request_error", "resource_not_found", "No agent found with id '"+*b.AgentID+"'.")
			return nil, "", &r
		}
		a = *saved
	case b.Agent == nil || b.Agent.Model == nil:
		return bad("missing_required_parameter", "Missing required parameter: 'agent.model' (required without 'agent_id').")
	default:
		a = agentDef{id: s.newID("agent_inline"), tools: json.RawMessage(`[]`)}
	}
	if b.Agent != nil {
		if b.Agent.Model != nil {
			a.model = *b.Agent.Model
		}
		if b.Agent.Instructions != nil {
			a.instructions = *b.Agent.Instructions
		}
		if b.Agent.Text != nil {
			// The session's format, over the saved agent's.
			if refusal := checkText(b.Agent.Text); refusal != "" {
				return bad("invalid_value", refusal)
			}
			a.text = b.Agent.Text
		}
		if t := bytes.TrimSpace(b.Agent.Tools); len(t) > 0 {
			tools, infos, err := parseTools(t)
			if err != nil {
				return bad("invalid_value", err.Error())
			}
			a.tools, a.infos = tools, infos
		}
	}
	now := s.now()
	sess := &session{
		id:        s.newID("sess"),
		seq:       len(s.sessions) + 1,
		agent:     &a,
		agentJSON: mustJSON(a.sessionJSON()),
		model:     s.script.NewModel(),
		status:    "idle",
		created:   now,
		active:    now,
		subs:      map[*subscriber]bool{},
		metadata:  metadata,
		env:       env,
	}
	if len(a.infos) > 0 {
		sess.model.SetTools(a.infos)
	}
	return sess, input, nil
}

func (s *Server) createSession(req *Request) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, input, rep := s.newSession(req.Body)
	if rep != nil {
		return *rep
	}
	if err := sess.model.Begin(input); err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
	}
	s.sessions[sess.id] = sess
	s.webhook(sess, "agent.session.created", nil)
	s.startTurn(sess, input, inputParts(req.Body))
	return reply{status: http.StatusOK, body: sess.json()}
}

// createSessionStream creates a session and streams its first turn on the
// response: agent.session.created, then the turn's events, ending after
// the turn's final agent.session.idle.
func (s *Server) createSessionStream(w http.ResponseWriter, r *http.Request, req *Request, f *Fault) {
	s.mu.Lock()
	sess, input, rep := s.newSession(req.Body)
	if rep == nil {
		if err := sess.model.Begin(input); err != nil {
			r := errorReply(http.StatusBadRequest, "invalid_request_error", "invalid_value", err.Error())
			rep = &r
		}
	}
	if rep != nil {
		s.mu.Unlock()
		writeJSON(w, rep.status, rep.body)
		return
	}
	s.sessions[sess.id] = sess
	sub := s.newSubscriber(f)
	sub.creation = true
	sess.subs[sub] = true
	sess.status = "in_progress"
	s.emit(sess, eventJSON{Type: "agent.session.created", Session: sess.json()})
	s.startTurn(sess, input, inputParts(req.Body))
	s.mu.Unlock()
	s.serveStream(w, r, sess, sub)
}

func (s *Server) getSession(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sess := s.sessions[id]
	var body *sessionJSON
	if sess != nil {
		body = sess.json()
	}
	s.mu.Unlock()
	if sess == nil {
		writeNoSession(w, id)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) deleteSession(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sess := s.sessions[id]
	if sess != nil {
		delete(s.sessions, id)
		sess.endStreams()
	}
	s.mu.Unlock()
	if sess == nil {
		writeNoSession(w, id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true, "object": "agent.session.deleted"})
}

// json renders the session. The caller holds s.mu.
func (sess *session) json() *sessionJSON {
	j := &sessionJSON{
		ID:              sess.id,
		Object:          "agent.session",
		Status:          sess.status,
		RequiredActions: []requiredActionJSON{},
		Agent:           sess.agentJSON,
		Environment:     sess.env,
		CreatedAt:       sess.created,
		LastActiveAt:    sess.active,
		VaultIDs:        []string{},
		Metadata:        sess.metadata,
	}
	if sess.errMsg != "" {
		j.Error = &sess.errMsg
	}
	if sess.usage != (Usage{}) {
		j.Usage = sess.usage.json()
	}
	if sess.waitEnv {
		j.RequiredActions = append(j.RequiredActions, requiredActionJSON{Type: "environment_connection", EnvironmentID: sess.env.ID})
	}
	for _, p := range sess.pending {
		if p.result == nil {
			if p.signIn {
				req := mustJSON(map[string]any{"type": "browser_authentication", "credential_origin": p.origin, "reason": "The agent needs to sign in to " + p.origin + ".",
					"fields": signInFields, "options": []any{}})
				j.RequiredActions = append(j.RequiredActions, requiredActionJSON{Type: "computer_use_approval_request", TurnID: p.turnID, RequestID: p.callID, Request: req})
				continue
			}
			if p.origin != "" {
				req := mustJSON(map[string]any{"type": "browser_origin_access", "origin": p.origin, "reason": "The agent needs to open " + p.origin + "."})
				j.RequiredActions = append(j.RequiredActions, requiredActionJSON{Type: "computer_use_approval_request", TurnID: p.turnID, RequestID: p.callID, Request: req})
				continue
			}
			if p.approval {
				req := mustJSON(map[string]any{"type": "mcp_tool_call", "server_label": "fake-mcp", "name": p.name,
					"arguments": json.RawMessage(p.args), "message": "The agent wants to call " + p.name + "."})
				j.RequiredActions = append(j.RequiredActions, requiredActionJSON{Type: "mcp_approval_request", TurnID: p.turnID, RequestID: p.callID, Request: req})
				continue
			}
			j.RequiredActions = append(j.RequiredActions, requiredActionJSON{Type: "function_call", TurnID: p.turnID, CallID: p.callID, Name: p.name, Arguments: p.args})
		}
	}
	return j
}

// json renders the turn. The caller holds s.mu.
func (t *turn) json(sess *session) *turnJSON {
	j := &turnJSON{
		ID:        t.id,
		Object:    "agent.session.turn",
		AgentID:   sess.agent.id,
		SessionID: sess.id,
		Status:    t.status,
		CreatedAt: t.created,
		StartedAt: t.created,
		Error:     t.err,
	}
	if t.subagent != "" {
		j.AgentID, j.SubagentID = t.subagent, &t.subagent
	}
	if t.completed != 0 {
		j.CompletedAt = &t.completed
	}
	if t.usage != (Usage{}) {
		j.Usage = t.usage.json()
	}
	return j
}

func (sess *session) turn(id string) *turn {
	for _, t := range sess.turns {
		if t.id == id {
			return t
		}
	}
	return nil
}

// lockSession locks the server and returns the session id; if there is
// none, it unlocks the server, answers 404 (as the service does) and
// returns nil.
func (s *Server) lockSession(w http.ResponseWriter, id string) *session {
	s.mu.Lock()
	sess := s.sessions[id]
	if sess == nil {
		s.mu.Unlock()
		writeNoSession(w, id)
	}
	return sess
}

func (s *Server) getTurn(w http.ResponseWriter, id, turnID string) {
	sess := s.lockSession(w, id)
	if sess == nil {
		return
	}
	defer s.mu.Unlock()
	t := sess.turn(turnID)
	if t == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "resource_not_found", "No turn found with id '"+turnID+"' in session '"+id+"'.")
		return
	}
	writeJSON(w, http.StatusOK, t.json(sess))
}

func (s *Server) listTurns(w http.ResponseWriter, r *http.Request, id string) {
	sess := s.lockSession(w, id)
	if sess == nil {
		return
	}
	defer s.mu.Unlock()
	all := make([]entry, len(sess.turns))
	for i, t := range sess.turns {
		all[i] = entry{id: t.id, v: mustJSON(t.json(sess))}
	}
	page, more, ok := paginate(all, r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid pagination parameters.")
		return
	}
	writeJSON(w, http.StatusOK, cursorPage(page, more))
}

// listItems lists the session's items, or the items of one turn (as a
// conversation cursor page) when turnID is set.
func (s *Server) listItems(w http.ResponseWriter, r *http.Request, id, turnID string) {
	sess := s.lockSession(w, id)
	if sess == nil {
		return
	}
	defer s.mu.Unlock()
	items := sess.items
	if turnID != "" {
		t := sess.turn(turnID)
		if t == nil {
			writeError(w, http.StatusNotFound, "invalid_request_error", "resource_not_found", "No turn found with id '"+turnID+"' in session '"+id+"'.")
			return
		}
		items = t.items
	}
	all := make([]entry, len(items))
	for i, it := range items {
		var h struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(it, &h)
		all[i] = entry{id: h.ID, v: it}
	}
	page, more, ok := paginate(all, r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "Invalid pagination parameters.")
		return
	}
	if turnID == "" {
		writeJSON(w, http.StatusOK, cursorPage(page, more))
		return
	}
	last := ""
	if len(page) > 0 {
		last = page[len(page)-1].id
	}
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.v
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": more, "last_id": last})
}

// inputParts returns the image and file parts of a session's creation
// input.
func inputParts(body []byte) []driver.Part {
	var b struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	return fakeapi.InputParts(b.Input)
}

// signInFields are the fields of a sign-in request (browser_authentication),
// both required.
var signInFields = []map[string]any{
	{"id": "username", "label": "Username", "required": true, "type": "text"},
	{"id": "password", "label": "Password", "required": true, "type": "password"},
}
