package foundrytest

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
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

// Options configure a Server. nil is usable.
type Options struct {
	// Project names the project in the URL path; "" means "test-project".
	Project string
	// Plain serves the plain Responses API as well: requests without an
	// agent reference are accepted when they name a model, and may carry
	// tools. Without Plain every response must reference an agent.
	Plain bool
	// Token, if set, is the only bearer token accepted. Otherwise any
	// non-empty bearer token (or api-key header) is.
	Token string
	// APIKey, if set, is the only value accepted in the api-key header.
	APIKey string
	// DeltaSize splits the text of each message (and the arguments of each
	// function call) of a streamed response into delta events of at most
	// DeltaSize runes, as the service streams them; zero sends each in one
	// delta.
	DeltaSize int
	// Usage is the token usage every response reports; zero means
	// DefaultUsage.
	Usage Usage
	// Fault, if set, is asked for each request that InjectFault queued no
	// fault for, as in package openaitest: a non-nil *Fault is injected
	// into that request's handling. It is called without the server's
	// lock held, and may be called concurrently.
	Fault func(r *Request) *Fault
	// Reasoning puts a reasoning item (a server-side item clients must not
	// send back) before the output of every response.
	Reasoning bool
	// Listener, if set, is where the server listens (to serve on a fixed
	// address); otherwise it listens on a free loopback port.
	Listener net.Listener
}

// Server is a fake Azure AI Foundry project: a real HTTPS server on
// loopback that serves, under /api/projects/<project>, the agents API
// (agents and agent versions), and the OpenAI-compatible conversations
// and responses API, with a [coretest.Model] playing the script as the
// model: one per conversation, and one per chain of responses linked by
// previous_response_id.
//
// It enforces what the service enforces (see the package doc), records
// every request (see [Server.Requests]) and what it accepted in neutral
// terms (see [Server.Received]), and injects faults on demand (see
// [Server.InjectFault]). It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL, as in https://127.0.0.1:port.
	URL string

	srv    *httptest.Server
	script *coretest.Script
	opts   Options

	mu            sync.Mutex
	ids           map[string]int
	agents        map[string]*agent
	agentSeq      int // agents made so far
	conversations map[string]*conversation
	responses     map[string]*response
	models        map[string]*coretest.Model // live model after a chain's response
	faults        map[Op][]Fault
	received      []coretest.Received
	requests      []Request
	ncall         int
	hosted        []*hostedSession // hosted agent sessions, in the order they began
}

// Request is a request the fake received, as it arrived.
type Request struct {
	// Op is the operation it named ("" for an unknown route).
	Op Op
	// Method and Path are the request's method and URL path (without the
	// project prefix); Query holds its query parameters.
	Method, Path string
	Query        url.Values
	// Header holds the request's headers.
	Header http.Header
	// Body is the request's body.
	Body []byte
	// Status is the HTTP status the fake answered with (0 for a dropped
	// answer).
	Status int
	// Error is the error message of an error answer.
	Error string
	// Duplicated says the answer's events were each written twice (a
	// Duplicate fault).
	Duplicated bool
}

// NewServer starts a fake Foundry project playing script and returns it.
// The caller must Close it. opts may be nil.
func NewServer(script *coretest.Script, opts *Options) *Server {
	s := &Server{
		script:        script,
		ids:           map[string]int{},
		agents:        map[string]*agent{},
		conversations: map[string]*conversation{},
		responses:     map[string]*response{},
		models:        map[string]*coretest.Model{},
		faults:        map[Op][]Fault{},
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
	if s.opts.Project == "" {
		s.opts.Project = "test-project"
	}
	s.srv = fakeapi.NewUnstartedServer(http.HandlerFunc(s.serveHTTP), s.opts.Listener)
	s.srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{tlsCertificate()},
		// Classical key exchanges only: the post-quantum hybrid Go prefers
		// costs more than the rest of a request.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521},
	}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	return s
}

// ProjectEndpoint returns the project endpoint clients are configured
// with: URL + "/api/projects/<project>".
func (s *Server) ProjectEndpoint() string {
	return s.URL + "/api/projects/" + s.opts.Project
}

// OpenAIBaseURL returns the base URL of the OpenAI-compatible routes:
// ProjectEndpoint() + "/openai/v1/".
func (s *Server) OpenAIBaseURL() string { return s.ProjectEndpoint() + "/openai/v1/" }

// CertificatePEM returns the server's TLS certificate, PEM-encoded, for
// clients outside this process to trust.
func (s *Server) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Client returns an HTTP client that trusts the server's certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// InjectFault queues faults for the next requests of op, one request each,
// in order. Requests that meet no queued fault are served normally.
func (s *Server) InjectFault(op Op, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], faults...)
}

// Received returns what the fake accepted so far, in neutral terms: user
// inputs ("input") and submitted function outputs ("results"). Thread is
// the conversation id, or in a chain of responses the previous response id
// (the id of the response created, for a chain's first request). Foundry
// outputs carry no failure flag: Failed is always false and Output holds
// the output as sent (content arrays as JSON).
func (s *Server) Received() []coretest.Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// Requests returns every request received so far, in order, including
// those the fake refused.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Query = cloneValues(r.Query)
		out[i] = r
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// Conversations returns the ids of the conversations that exist (were
// created and not deleted), in creation order.
func (s *Server) Conversations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, c := range s.conversations {
		if !c.deleted {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return s.conversations[a].seq - s.conversations[b].seq })
	return ids
}

// newID returns a new id with the given prefix, such as "conv_" + 16 hex
// digits.
func (s *Server) newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newCallID returns the next call id.
func (s *Server) newCallID() string {
	s.ncall++
	return "call_" + strconv.Itoa(s.ncall) + "_" + s.newID("")[:8]
}

// exchange is one request being served.
type exchange struct {
	w         http.ResponseWriter
	r         *http.Request
	op        Op
	path      string // after the project prefix
	body      []byte
	requestID string
	rec       int // index in s.requests
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	prefix := "/api/projects/" + s.opts.Project
	path, ok := strings.CutPrefix(r.URL.Path, prefix)
	ex := &exchange{w: w, r: r, body: body, path: path, requestID: s.newID("")[:16] + s.newID("")[:16]}
	route := s.route(r.Method, path)
	if !ok {
		route = routeInfo{}
	}
	ex.op = route.op
	s.mu.Lock()
	ex.rec = len(s.requests)
	s.requests = append(s.requests, Request{Op: ex.op, Method: r.Method, Path: path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()

	w.Header().Set("x-request-id", ex.requestID)
	w.Header().Set("apim-request-id", ex.requestID)
	if route.handle == nil {
		s.fail(ex, notFound("Resource not found"))
		return
	}
	if e := s.authenticate(r); e != nil {
		s.fail(ex, e)
		return
	}
	if e := s.checkAPIVersion(ex); e != nil {
		s.fail(ex, e)
		return
	}
	f := s.takeFault(ex.op)
	if f == nil && s.opts.Fault != nil {
		f = s.opts.Fault(&Request{Op: ex.op, Method: r.Method, Path: ex.path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: ex.body})
	}
	if f != nil {
		// A request whose client gave up is handled all the same.
		fakeapi.Hold(r.Context(), f.Delay)
	}
	if f != nil && f.Status != 0 {
		f.setRetryAfter(w.Header())
		s.fail(ex, f.apiError())
		return
	}
	s.mu.Lock()
	v, e := route.handle(ex, route.args, f)
	s.mu.Unlock()
	switch {
	case e != nil:
		var ae *apiError
		if !errors.As(e, &ae) {
			ae = &apiError{Status: http.StatusInternalServerError, Code: "server_error", Message: e.Error(), Type: "server_error"}
		}
		s.fail(ex, ae)
	case f != nil && f.Drop:
		s.setStatus(ex, 0, "")
		panic(http.ErrAbortHandler)
	case v != nil:
		if a, ok := v.(*sseAnswer); ok {
			if f != nil {
				a.cut, a.dup = f.CutText, f.Duplicate
				if f.Duplicate {
					s.markDuplicated(ex)
				}
			}
			s.writeSSE(ex, a)
			return
		}
		s.writeJSON(ex, http.StatusOK, v)
	}
}

func (s *Server) takeFault(op Op) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[op]
	if len(q) == 0 {
		return nil
	}
	f := q[0]
	s.faults[op] = q[1:]
	return &f
}

func (s *Server) authenticate(r *http.Request) *apiError {
	if key := r.Header.Get("api-key"); key != "" {
		if s.opts.APIKey != "" && key != s.opts.APIKey {
			return unauthorized("Access denied due to invalid subscription key or wrong API endpoint.")
		}
		return nil
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return unauthorized("Access token is missing, invalid, audience is incorrect (https://ai.azure.com), or have expired.")
	}
	if s.opts.Token != "" && tok != s.opts.Token {
		return unauthorized("Access token is missing, invalid, audience is incorrect (https://ai.azure.com), or have expired.")
	}
	return nil
}

// checkAPIVersion requires api-version=v1 on the agents routes and refuses
// it on the OpenAI-compatible ones.
func (s *Server) checkAPIVersion(ex *exchange) *apiError {
	v, has := ex.r.URL.Query()["api-version"]
	if strings.HasPrefix(ex.path, "/openai/") {
		if has {
			return badRequest("invalid_request", "api-version", "The /openai/v1 routes take no api-version parameter.")
		}
		return nil
	}
	if !has || len(v) != 1 || v[0] != "v1" {
		return badRequest("invalid_request", "api-version", "Missing or unsupported api-version: use api-version=v1.")
	}
	return nil
}

func (s *Server) setStatus(ex *exchange, status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[ex.rec].Status = status
	s.requests[ex.rec].Error = msg
}

// markDuplicated records that the answer of ex repeats its events.
func (s *Server) markDuplicated(ex *exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[ex.rec].Duplicated = true
}

func (s *Server) fail(ex *exchange, e *apiError) {
	s.setStatus(ex, e.Status, e.Message)
	ex.w.Header().Set("Content-Type", "application/json")
	if e.Code != "" && e.Status != http.StatusBadRequest {
		ex.w.Header().Set("x-ms-error-code", e.Code)
	}
	ex.w.WriteHeader(e.Status)
	ex.w.Write(e.body(ex.requestID))
}

func (s *Server) writeJSON(ex *exchange, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.fail(ex, &apiError{Status: 500, Code: "server_error", Message: err.Error()})
		return
	}
	s.setStatus(ex, status, "")
	ex.w.Header().Set("Content-Type", "application/json")
	ex.w.WriteHeader(status)
	ex.w.Write(buf.Bytes())
}

func now() int64 { return time.Now().Unix() }

// handler serves one operation: it returns the value to answer with (as
// JSON, or an *sseAnswer to stream), or an error (an *apiError). It runs
// with s.mu held. f is the fault queued for the request, if any (never a
// Status fault).
type handler func(ex *exchange, args []string, f *Fault) (any, error)

type routeInfo struct {
	op     Op
	handle handler
	args   []string
}

// route maps a method and path (after the project prefix) to its
// operation.
func (s *Server) route(method, path string) routeInfo {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range seg {
		if u, err := url.PathUnescape(p); err == nil {
			seg[i] = u
		}
	}
	n := len(seg)
	switch {
	case n >= 6 && seg[0] == "agents" && seg[2] == "endpoint" && seg[3] == "protocols" && seg[4] == "openai":
		return s.endpointRoute(method, seg[1], seg[5:])
	case n >= 1 && seg[0] == "agents":
		switch {
		case n == 1 && method == http.MethodPost:
			return routeInfo{OpCreateAgent, s.createAgent, nil}
		case n == 1 && method == http.MethodGet:
			return routeInfo{OpListAgents, s.listAgents, nil}
		case n == 2 && method == http.MethodPost:
			return routeInfo{OpUpdateAgent, s.updateAgent, seg[1:]}
		case n == 3 && seg[2] == "versions" && method == http.MethodGet:
			return routeInfo{OpListAgentVersions, s.listAgentVersions, seg[1:2]}
		case n == 2 && method == http.MethodGet:
			return routeInfo{OpGetAgent, s.getAgent, seg[1:]}
		case n == 2 && method == http.MethodDelete:
			return routeInfo{OpDeleteAgent, s.deleteAgent, seg[1:]}
		case n == 3 && seg[2] == "versions" && method == http.MethodPost:
			return routeInfo{OpCreateAgentVersion, s.createAgentVersion, seg[1:2]}
		case n == 4 && seg[2] == "versions" && method == http.MethodGet:
			return routeInfo{OpGetAgentVersion, s.getAgentVersion, []string{seg[1], seg[3]}}
		case n == 4 && seg[2] == "versions" && method == http.MethodDelete:
			return routeInfo{OpDeleteAgentVersion, s.deleteAgentVersion, []string{seg[1], seg[3]}}
		}
	case n >= 3 && seg[0] == "openai" && seg[1] == "v1" && seg[2] == "conversations":
		switch {
		case n == 3 && method == http.MethodPost:
			return routeInfo{OpCreateConversation, s.createConversation, nil}
		case n == 4 && method == http.MethodGet:
			return routeInfo{OpGetConversation, s.getConversation, seg[3:]}
		case n == 4 && method == http.MethodDelete:
			return routeInfo{OpDeleteConversation, s.deleteConversation, seg[3:]}
		case n == 4 && method == http.MethodPost:
			return routeInfo{OpUpdateConversation, s.updateConversation, seg[3:]}
		case n == 5 && seg[4] == "items" && method == http.MethodPost:
			return routeInfo{OpCreateItems, s.createItems, seg[3:4]}
		case n == 5 && seg[4] == "items" && method == http.MethodGet:
			return routeInfo{OpListItems, s.listItems, seg[3:4]}
		}
	case n >= 3 && seg[0] == "openai" && seg[1] == "v1" && seg[2] == "responses":
		switch {
		case n == 3 && method == http.MethodPost:
			return routeInfo{OpCreateResponse, s.createProjectResponse, nil}
		case n == 4 && method == http.MethodGet:
			return routeInfo{OpGetResponse, s.getResponse, seg[3:]}
		case n == 4 && method == http.MethodDelete:
			return routeInfo{OpDeleteResponse, s.deleteResponse, seg[3:]}
		case n == 5 && seg[4] == "input_items" && method == http.MethodGet:
			return routeInfo{OpListInputItems, s.listInputItems, seg[3:4]}
		}
	case n == 3 && seg[0] == "openai" && seg[1] == "v1" && seg[2] == "models" && method == http.MethodGet:
		return routeInfo{OpListModels, s.listModels, nil}
	}
	return routeInfo{}
}

// decodeObject decodes a request body that must be a JSON object.
func decodeObject(body []byte) (map[string]json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, badRequest("invalid_payload", "/", "The request body is not a JSON object.")
	}
	return m, nil
}
