package openaitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// Server is a fake OpenAI Agents API server on loopback. Make one with
// [NewServer] and give URL to the SDK as its base URL. It is safe for
// concurrent use.
type Server struct {
	// URL is the base URL to give the SDK (option.WithBaseURL), ending in
	// "/v1". Requests without the "/v1" prefix are served too.
	URL string

	hs     *httptest.Server
	script *coretest.Script
	opts   Options

	mu       sync.Mutex
	requests []*Request
	received []coretest.Received
	agents   map[string]*agentDef
	// deletedAgents counts the agents deleted, so that a new agent's
	// creation order follows every earlier one's.
	deletedAgents int
	sessions      map[string]*session
	idem          map[string]*idemEntry
	counters      map[string]int
	nstream       int
	clock         int64
	hooks         *hookSender // nil unless Options.Webhooks
}

// Options configure a [Server]. nil is usable.
type Options struct {
	// APIKey is the key the server expects in "Authorization: Bearer <key>".
	// Empty accepts any non-empty bearer token. A request without one, or
	// with another key, is answered 401.
	APIKey string
	// Fault, if set, is called for every request before it is handled, with
	// the request as recorded (its N counts requests from 1). A non-nil
	// *Fault is injected into that request's handling. It is called without
	// the server's lock held and may call the server's accessors.
	Fault func(r *Request) *Fault
	// DuplicateEvents writes every event twice (with the same event_id).
	DuplicateEvents bool
	// StrayCalls announces, with every step of calls, one extra
	// function_call item (a copy of the step's first call under a new call
	// id) that required_actions does not list, as a service might show a
	// call that needs no result. A client that runs it is wrong; a result
	// for it is refused like any call that is not pending.
	StrayCalls bool
	// SignIn makes every computer-use request (a call scripted with
	// coretest.Call.Origin) one to sign in to the origin
	// (browser_authentication, with a username and a password field)
	// instead of one for access to it. Its answer is an
	// agent.session.input.computer_use_approval_request_result whose
	// response is browser_authentication submit (with a value for each
	// field; the model reads "signed in") or cancel (a failed result,
	// "cancelled").
	SignIn bool
	// Commentary, if set, precedes every answer with an assistant message
	// of phase "commentary" holding this text, which is not part of the
	// answer.
	Commentary string
	// Subagents, if set, has the agent delegate to subagents before every
	// answer, as a multi-agent session does: their events, their items
	// and their turns (see [Subagents]).
	Subagents *Subagents
	// DeltaSize splits the text of each message into
	// agent.session.turn.output_text.delta events of at most DeltaSize
	// runes, as the service streams it; zero sends it in one delta.
	DeltaSize int
	// Usage is the token usage each model step adds to its turn; zero
	// means DefaultUsage.
	Usage Usage
	// Webhooks, if set, makes the server send signed webhooks of session
	// events to the URLs it names (see [Webhooks]).
	Webhooks *Webhooks
	// Listener, if set, is where the server listens (to serve on a fixed
	// address); otherwise it listens on a free loopback port.
	Listener net.Listener
}

// Usage counts tokens, as the fake reports them.
type Usage struct {
	InputTokens, OutputTokens int64
}

// DefaultUsage is the usage of each model step when Options.Usage is
// zero, as in package foundrytest.
var DefaultUsage = Usage{InputTokens: 10, OutputTokens: 5}

// A Fault is what the server does wrong with one request (see
// [Options].Fault). Its fields combine: Delay first, then Status or
// Drop or CloseAfter.
type Fault struct {
	// Delay holds the request this long before handling it (the client's
	// canceling the request ends the wait).
	Delay time.Duration
	// Status, if set, answers the request with this status instead of
	// handling it, with Body (default: an OpenAI error object suited to
	// the status) and, when RetryAfter is set, a Retry-After-Ms header.
	Status     int
	Body       string
	RetryAfter time.Duration
	// Drop handles the request, then closes the connection without
	// sending the response, as when a response is lost on the way back.
	// It does not apply to event streams.
	Drop bool
	// CloseAfter, for a request that opens an event stream, closes the
	// stream once that many events were written (a negative value closes
	// it before the first event). Zero leaves the stream open.
	CloseAfter int
	// CutText, for a request that opens an event stream, closes the stream
	// once that many text deltas (agent.session.turn.output_text.delta)
	// were written: the stream drops in the middle of a message.
	CutText int
	// Refuse, for a POST .../events carrying tool results that would be
	// applied, answers 202 as on acceptance, then refuses the results
	// ("HTTP 202 confirms acceptance, not durable completion", openai-go
	// betaagentsessionevent.go): nothing in the request is applied, the
	// calls stay pending, and the session says so as Refuse tells (see
	// [Refusal]). The 202 is stored under the request's Idempotency-Key
	// as any other: the same request sent again is answered from the
	// store, and not applied.
	Refuse Refusal
}

// A Refusal is how the service tells that tool results it accepted (202)
// were not applied (see [Fault].Refuse).
type Refusal int

// The refusals.
const (
	// Relist emits agent.session.requires_action listing the calls
	// again.
	Relist Refusal = iota + 1
	// ErrorEvent emits, for each call, an "error" event whose message and
	// param name it (code invalid_request); the session's
	// required_actions (GET) still list the calls, and no other event
	// follows.
	ErrorEvent
)

// Request is a request the server received, as recorded.
type Request struct {
	// N numbers the requests from 1, in the order they arrived.
	N int
	// Method is the HTTP method.
	Method string
	// Path is the path relative to the base URL, as in
	// "agents/sessions/sess_1/events".
	Path string
	// Query is the URL query.
	Query url.Values
	// Header holds the request headers.
	Header http.Header
	// Body is the request body.
	Body []byte
	// Stream reports whether the request opens an event stream (GET
	// .../events, or POST agents/sessions with "stream": true).
	Stream bool
	// Status is the status the server answered with; 0 while the request
	// is in progress. A dropped response records the status it would have
	// had.
	Status int
	// Dropped reports whether the response was dropped (Fault.Drop).
	Dropped bool
}

// Events returns the types of the input events of a POST .../events
// request, in order, such as ["agent.session.input.tool_result"].
func (r *Request) Events() []string {
	var body struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	types := make([]string, len(body.Events))
	for i, e := range body.Events {
		types[i] = e.Type
	}
	return types
}

type idemEntry struct {
	digest [32]byte
	status int
	ctype  string
	body   []byte
}

// NewServer starts a fake Agents API server playing script: each session
// plays the script from its first turn, one turn per user input. opts may be
// nil. The caller must call Close when finished.
func NewServer(script *coretest.Script, opts *Options) *Server {
	s := &Server{
		script:   script,
		agents:   map[string]*agentDef{},
		sessions: map[string]*session{},
		idem:     map[string]*idemEntry{},
		counters: map[string]int{},
		clock:    time.Now().Unix(),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.DeltaSize == 0 && script != nil {
		s.opts.DeltaSize = script.DeltaSize
	}
	if s.opts.Usage == (Usage{}) {
		s.opts.Usage = DefaultUsage
	}
	if s.opts.Webhooks != nil {
		s.hooks = newHookSender(*s.opts.Webhooks)
	}
	s.hs = fakeapi.NewUnstartedServer(http.HandlerFunc(s.serveHTTP), s.opts.Listener)
	s.hs.Start()
	s.URL = s.hs.URL + "/v1"
	return s
}

// Close shuts the server down, ending open event streams.
func (s *Server) Close() {
	if s.hooks != nil {
		s.hooks.close()
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.endStreams()
	}
	s.mu.Unlock()
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Client returns an HTTP client for the server (the httptest server's).
func (s *Server) Client() *http.Client { return s.hs.Client() }

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// Received returns what the sessions received so far, in neutral terms:
// user inputs, applied batches of tool results and cancellations, in order.
// A request answered from the idempotency store is not received again.
func (s *Server) Received() []coretest.Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// ForgetIdempotencyKeys empties the idempotency store, as the service does
// once a key's retention window has passed: a request sent again after
// this is applied (or refused) anew.
func (s *Server) ForgetIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.idem)
}

// SessionStatus returns the status of a session ("idle", "in_progress",
// "requires_action", "failed"), or "" if there is no such session.
func (s *Server) SessionStatus(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[id]; sess != nil {
		return sess.status
	}
	return ""
}

// ConnectEnvironment connects the executor of session id's self-hosted
// environment, as a program's own executor does on the service: a turn
// that waited for it (required action environment_connection) goes on,
// and later turns do not wait. It returns an error if there is no such
// session, or if its environment is not self-hosted.
func (s *Server) ConnectEnvironment(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	switch {
	case sess == nil:
		return fmt.Errorf("openaitest: no session %q", id)
	case sess.env.Type != "self_hosted":
		return fmt.Errorf("openaitest: session %s has no self-hosted environment (its environment is %q)", id, sess.env.Type)
	}
	s.connectEnvironment(sess)
	return nil
}

// Events returns the types of the events the session emitted so far, in
// order (the initial idle of a subscription excepted), or nil if there is
// no such session. Tests use it to count the events of a turn.
func (s *Server) Events(session string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[session]; sess != nil {
		return slices.Clone(sess.events)
	}
	return nil
}

// Sessions returns the ids of the sessions that exist, in creation order.
func (s *Server) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return s.sessions[a].seq - s.sessions[b].seq })
	return ids
}

// Agents returns the ids of the agents that exist, sorted.
func (s *Server) Agents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.agents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *Server) newID(prefix string) string {
	s.counters[prefix]++
	return prefix + "_" + strconv.Itoa(s.counters[prefix])
}

func (s *Server) now() int64 {
	s.clock++
	return s.clock
}

// statusWriter records the status written and passes flushes through.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	path := strings.Trim(r.URL.Path, "/")
	path = strings.TrimPrefix(strings.TrimPrefix(path, "v1"), "/")
	req := &Request{Method: r.Method, Path: path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	req.Stream = isStream(req)

	s.mu.Lock()
	req.N = len(s.requests) + 1
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	var f *Fault
	if s.opts.Fault != nil {
		cp := *req
		f = s.opts.Fault(&cp)
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		if req.Status == 0 {
			req.Status = sw.status
		}
		s.mu.Unlock()
	}()
	if f != nil && !fakeapi.Hold(r.Context(), f.Delay) {
		return
	}
	if f != nil && f.Status != 0 {
		writeFault(sw, f)
		return
	}
	if !s.authorized(r) {
		writeError(sw, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	if f != nil && f.Drop && !req.Stream {
		rec := httptest.NewRecorder()
		s.route(rec, r, req, nil)
		s.mu.Lock()
		req.Status, req.Dropped = rec.Code, true
		s.mu.Unlock()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	s.route(sw, r, req, f)
}

func isStream(r *Request) bool {
	if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/events") {
		return true
	}
	if r.Method == http.MethodPost && r.Path == "agents/sessions" {
		var b struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(r.Body, &b)
		return b.Stream
	}
	return false
}

func (s *Server) authorized(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return false
	}
	return s.opts.APIKey == "" || token == s.opts.APIKey
}

// route dispatches a request to its handler.
func (s *Server) route(w http.ResponseWriter, r *http.Request, req *Request, f *Fault) {
	seg := strings.Split(req.Path, "/")
	n := len(seg)
	switch {
	case n == 1 && seg[0] == "agents":
		s.methods(w, r, map[string]func(){
			http.MethodPost: func() { s.idempotent(w, r, req, s.createAgent) },
			http.MethodGet:  func() { s.listAgents(w, r) },
		})
	case n == 2 && seg[0] == "agents" && seg[1] == "sessions":
		s.methods(w, r, map[string]func(){http.MethodGet: func() { s.listSessions(w, r) }, http.MethodPost: func() {
			if req.Stream {
				s.createSessionStream(w, r, req, f)
				return
			}
			s.idempotent(w, r, req, s.createSession)
		}})
	case n == 2 && seg[0] == "agents":
		s.methods(w, r, map[string]func(){
			http.MethodGet:    func() { s.getAgent(w, seg[1]) },
			http.MethodPost:   func() { s.updateAgent(w, req, seg[1]) },
			http.MethodDelete: func() { s.deleteAgent(w, seg[1]) },
		})
	case n >= 3 && seg[0] == "agents" && seg[1] == "sessions":
		s.routeSession(w, r, req, f, seg[2], seg[3:])
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "Unknown request URL: "+r.Method+" /"+req.Path+".")
	}
}

func (s *Server) routeSession(w http.ResponseWriter, r *http.Request, req *Request, f *Fault, id string, rest []string) {
	switch {
	case len(rest) == 0:
		s.methods(w, r, map[string]func(){
			http.MethodGet:    func() { s.getSession(w, id) },
			http.MethodPost:   func() { s.updateSession(w, req, id) },
			http.MethodDelete: func() { s.deleteSession(w, id) },
		})
	case len(rest) == 1 && rest[0] == "events":
		s.methods(w, r, map[string]func(){
			http.MethodGet:  func() { s.subscribe(w, r, id, f) },
			http.MethodPost: func() { s.idempotent(w, r, req, s.postEvents(id, f)) },
		})
	case len(rest) == 1 && rest[0] == "items":
		s.methods(w, r, map[string]func(){http.MethodGet: func() { s.listItems(w, r, id, "") }})
	case len(rest) == 1 && rest[0] == "turns":
		s.methods(w, r, map[string]func(){http.MethodGet: func() { s.listTurns(w, r, id) }})
	case len(rest) == 2 && rest[0] == "turns":
		s.methods(w, r, map[string]func(){http.MethodGet: func() { s.getTurn(w, id, rest[1]) }})
	case len(rest) == 3 && rest[0] == "turns" && rest[2] == "items":
		s.methods(w, r, map[string]func(){http.MethodGet: func() { s.listItems(w, r, id, rest[1]) }})
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "Unknown request URL: "+r.Method+" /"+req.Path+".")
	}
}

func (s *Server) methods(w http.ResponseWriter, r *http.Request, h map[string]func()) {
	if f := h[r.Method]; f != nil {
		f()
		return
	}
	writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "Method "+r.Method+" is not allowed here.")
}

// reply is a handler's answer, for the idempotency store.
type reply struct {
	status int
	body   any
}

// idempotent runs handle, unless the request's Idempotency-Key was seen
// with the same method, path and body: then the stored answer is replayed.
// Only successful answers are stored. The same key with another body is
// refused.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, req *Request, handle func(req *Request) reply) {
	key := r.Header.Get("Idempotency-Key")
	var digest [32]byte
	var skey string
	if key != "" {
		digest = sha256.Sum256(req.Body)
		skey = r.Method + " " + req.Path + " " + key
		s.mu.Lock()
		e := s.idem[skey]
		s.mu.Unlock()
		if e != nil {
			if e.digest != digest {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "idempotency_error",
					"Keys for idempotent requests can only be used with the same parameters they were first used with.")
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, e.status, e.ctype, e.body)
			return
		}
	}
	rep := handle(req)
	var b []byte
	ctype := ""
	if rep.body != nil {
		b, _ = json.Marshal(rep.body)
		ctype = "application/json"
	}
	if key != "" && rep.status < 300 {
		s.mu.Lock()
		s.idem[skey] = &idemEntry{digest: digest, status: rep.status, ctype: ctype, body: b}
		s.mu.Unlock()
	}
	writeRaw(w, rep.status, ctype, b)
}

func writeRaw(w http.ResponseWriter, status int, ctype string, body []byte) {
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody is the service's error envelope.
func errorBody(typ, code, msg string) json.RawMessage {
	return fakeapi.Envelope(typ, code, "", msg, nil)
}

func errorReply(status int, typ, code, msg string) reply {
	return reply{status: status, body: errorBody(typ, code, msg)}
}

// noSession is the service's answer to a request naming an unknown
// session; writeNoSession writes it.
func noSession(id string) reply {
	return errorReply(http.StatusNotFound, "invalid_request_error", "resource_not_found", "No session found with id '"+id+"'.")
}

func writeNoSession(w http.ResponseWriter, id string) {
	r := noSession(id)
	writeJSON(w, r.status, r.body)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	b, _ := json.Marshal(errorBody(typ, code, msg))
	writeRaw(w, status, "application/json", b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, "application/json", b)
}

func writeFault(w http.ResponseWriter, f *Fault) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(max(1, f.RetryAfter.Milliseconds()), 10))
	}
	if f.Body != "" {
		writeRaw(w, f.Status, "application/json", []byte(f.Body))
		return
	}
	var e json.RawMessage
	switch {
	case f.Status == http.StatusTooManyRequests:
		e = errorBody("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again shortly.")
	case f.Status >= 500:
		e = errorBody("server_error", "", "The server had an error while processing your request. Sorry about that!")
	case f.Status == http.StatusUnauthorized:
		e = errorBody("invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
	default:
		e = errorBody("invalid_request_error", "", fmt.Sprintf("Injected error %d.", f.Status))
	}
	writeJSON(w, f.Status, e)
}
