package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/webhooks"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// hookSecret is a webhook endpoint's signing secret (32 bytes).
const hookSecret = "whsec_dGhlIGZha2UncyB0ZXN0IHNpZ25pbmcga2V5IDMyIGJ5dGVz"

// endpoint is a loopback server whose handler is set once the process
// behind it exists (the fake, which posts to it, is made first).
type endpoint struct {
	URL string
	h   atomic.Pointer[http.Handler]
}

func newEndpoint(t *testing.T) *endpoint {
	t.Helper()
	e := &endpoint{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := e.h.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hs.Close)
	e.URL = hs.URL
	return e
}

func (e *endpoint) serve(h http.Handler) { e.h.Store(&h) }

// hookLog collects what the handlers of a test saw: each event taken
// (OnEvent), by id, and each resume's end (OnResult), by session.
type hookLog struct {
	mu      sync.Mutex
	events  map[string]int
	types   map[string]string
	results map[string][]hookResult
	changed chan struct{}
	onEvent func(*webhooks.UnwrapWebhookEventUnion) error
}

type hookResult struct {
	text, turn string
	err        error
}

func newHookLog() *hookLog {
	return &hookLog{events: map[string]int{}, types: map[string]string{}, results: map[string][]hookResult{}, changed: make(chan struct{}, 1)}
}

func (l *hookLog) options(o openai.WebhookOptions) *openai.WebhookOptions {
	if o.Secret == "" {
		o.Secret = hookSecret
	}
	if o.Logger == nil {
		o.Logger = discard()
	}
	o.OnEvent = func(_ context.Context, ev *webhooks.UnwrapWebhookEventUnion) error {
		l.mu.Lock()
		l.events[ev.ID]++
		l.types[ev.ID] = ev.Type
		f := l.onEvent
		l.mu.Unlock()
		if f != nil {
			return f(ev)
		}
		return nil
	}
	o.OnResult = func(session string, res *core.Result, err error) {
		r := hookResult{err: err}
		if res != nil {
			r.text, r.turn = res.Text, res.Turn
		}
		l.mu.Lock()
		l.results[session] = append(l.results[session], r)
		l.mu.Unlock()
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
	return &o
}

// answered waits until each session has a resume that ended with the
// answer want, or fails the test after a minute (a run that never
// completes).
func (l *hookLog) answered(t *testing.T, want string, sessions ...string) {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		var missing []string
		for _, s := range sessions {
			if !slices.ContainsFunc(l.results[s], func(r hookResult) bool { return r.err == nil && r.text == want }) {
				missing = append(missing, s)
			}
		}
		l.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-l.changed:
		case <-timeout.C:
			t.Fatalf("no resume answered %q for %v; results: %v", want, missing, l.snapshot())
		}
	}
}

func (l *hookLog) snapshot() map[string][]hookResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]hookResult{}
	for k, v := range l.results {
		out[k] = slices.Clone(v)
	}
	return out
}

// oneToolAgent opens a backend on srv with tool, a tool without
// parameters, and makes, with the SDK, an agent whose one tool it is; it
// returns the toolbox, the backend (closed with the test) and the agent.
func oneToolAgent(t *testing.T, srv *openaitest.Server, tool *core.Tool) (*core.Toolbox, *openai.Backend, *oai.Agent) {
	t.Helper()
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openai.Open(t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err := b.Client().Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m", Tools: []oai.PersistedAgentToolParamUnion{
		oai.PersistedAgentToolParamOfParamFunction(tool.Description(), tool.Name(), map[string]any{"type": "object", "properties": map[string]any{}})}})
	if err != nil {
		t.Fatal(err)
	}
	return tools, b, a
}

// customerAgent makes, with the SDK, an agent whose tools are get_customer
// and get_plan_price (as the harness's toolbox implements them), and
// returns its id.
func customerAgent(t *testing.T, h *harness) string {
	t.Helper()
	fn := func(name, desc, param string) oai.PersistedAgentToolParamUnion {
		return oai.PersistedAgentToolParamOfParamFunction(desc, name, map[string]any{
			"type": "object", "properties": map[string]any{param: map[string]any{"type": "string"}},
			"required": []string{param}, "additionalProperties": false,
		})
	}
	agent, err := h.backend.Client().Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "gpt-test", Tools: []oai.PersistedAgentToolParamUnion{
		fn("get_customer", "Look up a customer by ID.", "customer_id"), fn("get_plan_price", "Monthly price of a plan.", "plan")}})
	if err != nil {
		t.Fatal(err)
	}
	return agent.ID
}

// newSession starts, with the SDK, a session of agent on input in env
// (nil: none), as a program does whose webhooks drive its runs, and
// returns its id.
func newSession(t *testing.T, b *openai.Backend, agent, input string, env *oai.EnvironmentParamUnion) string {
	t.Helper()
	e := oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}}
	if env != nil {
		e = *env
	}
	sess, err := b.Client().Beta.Agents.Sessions.New(t.Context(), oai.BetaAgentSessionNewParams{
		Environment: e, AgentID: oai.String(agent), Input: oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String(input)}})
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func openJournal(t *testing.T, url string) journaldriver.Journal {
	t.Helper()
	j, err := journal.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func shutdown(t *testing.T, hs ...*openai.WebhookHandler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, h := range hs {
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
}

// customerSteps look a customer up, then the price of their plan, and
// answer with it.
var customerSteps = []coretest.Step{
	calls(call("get_customer", `{"customer_id":"123"}`)),
	calls(call("get_plan_price", `{"plan":"pro"}`)),
	text(`{{output "get_plan_price"}}`),
}

const priceAnswer = "pro costs 20 USD a month"

// TestWebhookFleet (issue 37, item 2): two processes (two backends on one
// fake, two runners over one SQLite journal), each behind its own webhook
// handler; sessions started with the SDK and followed by no one; the fake
// sends every webhook to both processes, twice, shuffled, and sends again
// those a busy process refused. Every run completes, every call's handler
// runs once and its result reaches the service once, and every event is
// taken once in the fleet (the journal's record of it): each handler's
// OnEvent sees it at most once, and only one of them.
func TestWebhookFleet(t *testing.T) {
	ep1, ep2 := newEndpoint(t), newEndpoint(t)
	h := start(t, setup{
		script: &coretest.Script{Turns: []coretest.Turn{{Steps: customerSteps}}},
		server: &openaitest.Options{Webhooks: &openaitest.Webhooks{URLs: []string{ep1.URL, ep2.URL}, Secret: hookSecret,
			Duplicates: 1, Shuffle: true, Seed: 37}},
	})
	agent := customerAgent(t, h)
	url := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
	log := newHookLog()
	var handlers []*openai.WebhookHandler
	for i, ep := range []*endpoint{ep1, ep2} {
		b := h.open(openai.Options{Agent: agent})
		r := core.NewRunner(b, h.tools, &core.Options{Journal: openJournal(t, url), Owner: fmt.Sprintf("process-%d", i+1), Logger: discard()})
		hh, err := openai.NewWebhookHandler(r, log.options(openai.WebhookOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		ep.serve(hh)
		handlers = append(handlers, hh)
	}
	var sessions []string
	for i := range 6 {
		sessions = append(sessions, newSession(t, h.backend, agent, fmt.Sprintf("What does customer 123 pay? (%d)", i), nil))
	}
	log.answered(t, priceAnswer, sessions...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.srv.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	shutdown(t, handlers...)

	h.checkOnce()
	if got, want := len(h.runCounts()), 2*len(sessions); got != want {
		t.Errorf("%d calls ran, want %d", got, want)
	}
	for _, s := range sessions {
		if st := h.srv.SessionStatus(s); st != "idle" {
			t.Errorf("session %s is %s, want idle", s, st)
		}
	}
	for s, rs := range log.snapshot() {
		for _, r := range rs {
			if r.err != nil {
				t.Errorf("a resume of %s failed: %v", s, r.err)
			}
		}
	}
	// Every event reached both processes twice, and was taken once.
	delivered := map[string]int{}
	for _, d := range h.srv.WebhookDeliveries() {
		if d.Status == http.StatusOK {
			delivered[d.EventID]++
		}
	}
	if len(delivered) == 0 {
		t.Fatal("no webhook was delivered")
	}
	for id, n := range delivered {
		if n != 4 {
			t.Errorf("event %s was taken (200) by %d deliveries, want 4 (2 processes, 2 copies)", id, n)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id := range delivered {
		if n := log.events[id]; n != 1 {
			t.Errorf("event %s (%s) was handled %d times in the fleet, want once", id, log.types[id], n)
		}
	}
}

// deliver POSTs a webhook event of type typ with data (JSON) to url,
// signed with secret at t, and returns the answer's status and body.
func deliver(t *testing.T, url, secret, id, typ, data string, at time.Time) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"object":"event","created_at":%d,"type":%q,"data":%s}`, id, at.Unix(), typ, data)
	return post(t, url, secret, id, at, []byte(body), nil)
}

func post(t *testing.T, url, secret, id string, at time.Time, body []byte, edit func(http.Header)) (int, string) {
	t.Helper()
	hdr, err := openaitest.SignWebhook(secret, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(hdr)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWebhookRefusals (issue 37, item 2): a delivery that is not a POST,
// unsigned, signed over another body or with another secret, stale or
// from the future, or too large, is refused before anything happens; a
// signed body that is not an event is a 400; the same event delivered
// again (a replay, or the service's retry) is answered 200 and taken once.
// Neither answers nor log lines show the secret.
func TestWebhookRefusals(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log := newHookLog()
	hh, err := openai.NewWebhookHandler(h.runner, log.options(openai.WebhookOptions{MaxBodyBytes: 1024, Logger: logger}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hh)
	t.Cleanup(srv.Close)
	now := time.Now()
	idle := `{"id":"sess_9","environment_type":"none"}`
	event := func(id string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"object":"event","created_at":%d,"type":"agent.session.idle","data":%s}`, id, now.Unix(), idle)
	}
	tests := []struct {
		name   string
		send   func() (int, string)
		status int
		says   string
	}{
		{"GET", func() (int, string) {
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode, ""
		}, http.StatusMethodNotAllowed, ""},
		{"unsigned", func() (int, string) {
			return post(t, srv.URL, hookSecret, "evt_u", now, event("evt_u"), func(h http.Header) {
				h.Del("Webhook-Signature")
				h.Del("Webhook-Id")
				h.Del("Webhook-Timestamp")
			})
		}, http.StatusUnauthorized, "missing required webhook-signature header"},
		{"signed over another body", func() (int, string) {
			hdr, _ := openaitest.SignWebhook(hookSecret, "evt_b", now, event("evt_other"))
			return post(t, srv.URL, hookSecret, "evt_b", now, event("evt_b"), func(h http.Header) { h.Set("Webhook-Signature", hdr.Get("Webhook-Signature")) })
		}, http.StatusUnauthorized, "signature verification failed"},
		{"another secret", func() (int, string) {
			return post(t, srv.URL, "whsec_YW5vdGhlciBzZWNyZXQgb2YgMzIgYnl0ZXMgLi4uLi4=", "evt_s", now, event("evt_s"), nil)
		}, http.StatusUnauthorized, "signature verification failed"},
		{"stale", func() (int, string) {
			return post(t, srv.URL, hookSecret, "evt_old", now.Add(-10*time.Minute), event("evt_old"), nil)
		}, http.StatusUnauthorized, "too old"},
		{"from the future", func() (int, string) {
			return post(t, srv.URL, hookSecret, "evt_new", now.Add(10*time.Minute), event("evt_new"), nil)
		}, http.StatusUnauthorized, "too new"},
		{"too large", func() (int, string) {
			body := fmt.Appendf(nil, `{"id":"evt_big","object":"event","created_at":%d,"type":"agent.session.idle","data":{"id":"%s"}}`, now.Unix(), strings.Repeat("x", 2048))
			return post(t, srv.URL, hookSecret, "evt_big", now, body, nil)
		}, http.StatusRequestEntityTooLarge, "1024 bytes"},
		{"not an event", func() (int, string) { return post(t, srv.URL, hookSecret, "evt_arr", now, []byte(`[]`), nil) }, http.StatusBadRequest, ""},
		{"an event", func() (int, string) { return post(t, srv.URL, hookSecret, "evt_ok", now, event("evt_ok"), nil) }, http.StatusOK, "acknowledged"},
		{"the same again", func() (int, string) { return post(t, srv.URL, hookSecret, "evt_ok", now, event("evt_ok"), nil) }, http.StatusOK, "duplicate"},
		{"the same, signed later", func() (int, string) {
			return post(t, srv.URL, hookSecret, "evt_ok", now.Add(time.Second), event("evt_ok"), nil)
		}, http.StatusOK, "duplicate"},
	}
	for _, tc := range tests {
		status, body := tc.send()
		if status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, status, body, tc.status, tc.says)
		}
		if strings.Contains(body, hookSecret) || strings.Contains(body, strings.TrimPrefix(hookSecret, "whsec_")) {
			t.Errorf("%s: the answer shows the secret", tc.name)
		}
	}
	shutdown(t, hh)
	if diff := cmp.Diff(map[string]int{"evt_ok": 1}, log.events); diff != "" {
		t.Errorf("events taken (-want +got):\n%s", diff)
	}
	if strings.Contains(logs.String(), strings.TrimPrefix(hookSecret, "whsec_")) {
		t.Error("the log shows the secret")
	}
	if !strings.Contains(logs.String(), "webhook refused") {
		t.Errorf("the refusals were not logged: %s", logs.String())
	}
}

// TestWebhookHandlerRefused (issue 37, item 2): a handler needs a secret
// (FailedPrecondition), one openai-go can use (InvalidArgument, without
// showing it), and a runner over the sessions backend: Foundry and the
// Responses API send no session webhooks (InvalidArgument).
func TestWebhookHandlerRefused(t *testing.T) {
	t.Setenv("OPENAI_WEBHOOK_SECRET", "")
	h := start(t, setup{script: oneTurn(text("hi"))})
	other := core.NewRunner(coretest.NewBackend(oneTurn(text("hi")), &coretest.BackendOptions{Name: "foundry"}), h.tools, &core.Options{Logger: discard()})
	bad := "whsec_bm90IGxvbmcgZW5vdWdo" // 15 bytes
	tests := []struct {
		name   string
		runner *core.Runner
		secret string
		code   errcode.Code
		says   string
	}{
		{"no secret", h.runner, "", errcode.FailedPrecondition, "OPENAI_WEBHOOK_SECRET"},
		{"a short secret", h.runner, bad, errcode.InvalidArgument, "secret cannot be used"},
		{"another backend", other, hookSecret, errcode.InvalidArgument, `backend is "foundry"`},
		{"no runner", nil, hookSecret, errcode.InvalidArgument, "no runner"},
	}
	for _, tc := range tests {
		_, err := openai.NewWebhookHandler(tc.runner, &openai.WebhookOptions{Secret: tc.secret})
		if errcode.Of(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want %v saying %q", tc.name, err, tc.code, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(bad, "whsec_")) {
			t.Errorf("%s: the error shows the secret", tc.name)
		}
	}
	t.Setenv("OPENAI_WEBHOOK_SECRET", hookSecret)
	if _, err := openai.NewWebhookHandler(h.runner, nil); err != nil {
		t.Errorf("with OPENAI_WEBHOOK_SECRET and nil options: %v", err)
	}
}

// TestWebhookResumes (issue 37, item 2): an action resumes its session in
// the background, the delivery answered at once; an action of a session
// being resumed makes it resume once more, not twice at once; past
// MaxResumes a delivery is answered 503 with Retry-After; Accept leaves
// other sessions alone; Shutdown refuses new resumes and, when its context
// ends first, stops those in flight and names them.
func TestWebhookResumes(t *testing.T) {
	srv := openaitest.NewServer(oneTurn(calls(call("block", `{}`)), text("unblocked")), nil)
	t.Cleanup(srv.Close)
	started := make(chan string, 4)
	block, err := core.NewTool("block", "Blocks until its run stops.", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := core.CallFromContext(ctx)
		started <- c.Thread
		<-ctx.Done()
		return "", ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, b, a := oneToolAgent(t, srv, block)
	log := newHookLog()
	var accepted atomic.Int32
	hh, err := openai.NewWebhookHandler(core.NewRunner(b, tools, &core.Options{Logger: discard()}), log.options(openai.WebhookOptions{
		MaxResumes: 1,
		Accept: func(_ context.Context, s string) bool {
			accepted.Add(1)
			return s != "sess_other"
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(hh)
	t.Cleanup(hs.Close)
	s1 := newSession(t, b, a.ID, "one", nil)
	s2 := newSession(t, b, a.ID, "two", nil)
	action := func(id, session string) (int, string) {
		return deliver(t, hs.URL, hookSecret, id, "agent.session.action_required", `{"id":"`+session+`","required_action":{"type":"function_call"}}`, time.Now())
	}
	if status, body := action("evt_1", s1); status != http.StatusOK || !strings.Contains(body, "resuming") {
		t.Fatalf("first action: %d %q", status, body)
	}
	if got := <-started; got != s1 {
		t.Fatalf("the call of %s ran, want %s", got, s1)
	}
	if status, body := action("evt_2", s1); status != http.StatusOK || !strings.Contains(body, "resuming") {
		t.Errorf("an action of the session being resumed: %d %q, want 200", status, body)
	}
	status, body := action("evt_3", s2)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "busy") {
		t.Errorf("an action past MaxResumes: %d %q, want 503", status, body)
	}
	if status, _ := action("evt_4", "sess_other"); status != http.StatusOK {
		t.Errorf("an action of a session not accepted: %d, want 200", status)
	}
	// Shutdown gives up at once: the blocked resume is stopped, and named.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = hh.Shutdown(ctx)
	if errcode.Of(err) != errcode.Canceled || err == nil || !strings.Contains(err.Error(), s1) {
		t.Errorf("Shutdown = %v, want Canceled naming %s", err, s1)
	}
	if status, _ := action("evt_3", s2); status != http.StatusServiceUnavailable {
		t.Errorf("an action after Shutdown: %d, want 503", status)
	}
	if got := len(log.snapshot()[s1]); got != 1 {
		t.Errorf("the first session was resumed %d times, want once (the second action came while it ran; Shutdown stopped it)", got)
	}
	if len(started) != 0 {
		t.Errorf("another call ran: %s", <-started)
	}
	if got := accepted.Load(); got != 5 {
		t.Errorf("Accept was asked %d times, want 5", got)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"evt_1": 1, "evt_2": 1}, log.events); diff != "" {
		t.Errorf("events taken (-want +got):\n%s", diff)
	}
}

// TestWebhookAcrossProcesses (issue 37, item 2): two handlers over one
// SQLite journal take an event once between them: a delivery to the second
// while the first handles it is answered 503, once handled 200 with
// nothing done; an event whose first handler stopped (its lease passed)
// is taken over. OnEvent failing answers 500 and the event is taken again
// when delivered again.
func TestWebhookAcrossProcesses(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	url := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
	log := newHookLog()
	var servers []string
	for i, lease := range []time.Duration{time.Minute, time.Nanosecond} {
		r := core.NewRunner(h.open(openai.Options{}), h.tools, &core.Options{Journal: openJournal(t, url), Owner: fmt.Sprintf("p%d", i), Logger: discard()})
		hh, err := openai.NewWebhookHandler(r, log.options(openai.WebhookOptions{Lease: lease}))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(hh)
		t.Cleanup(srv.Close)
		t.Cleanup(func() { shutdown(t, hh) })
		servers = append(servers, srv.URL)
	}
	idle := func(url, id string) (int, string) {
		return deliver(t, url, hookSecret, id, "agent.session.idle", `{"id":"sess_1","environment_type":"none"}`, time.Now())
	}
	// evt_1 is held by the first process's OnEvent while the second gets it.
	hold, release := make(chan struct{}), make(chan struct{})
	log.onEvent = func(ev *webhooks.UnwrapWebhookEventUnion) error {
		switch ev.ID {
		case "evt_1":
			close(hold)
			<-release
		case "evt_fail":
			return errors.New("the program's handler failed")
		}
		return nil
	}
	first := make(chan int)
	go func() {
		status, _ := idle(servers[0], "evt_1")
		first <- status
	}()
	<-hold
	if status, body := idle(servers[1], "evt_1"); status != http.StatusServiceUnavailable || !strings.Contains(body, "being handled") {
		t.Errorf("while another process handles it: %d %q, want 503", status, body)
	}
	close(release)
	if status := <-first; status != http.StatusOK {
		t.Errorf("the first process answered %d, want 200", status)
	}
	if status, body := idle(servers[1], "evt_1"); status != http.StatusOK || !strings.Contains(body, "handled before") {
		t.Errorf("once another process handled it: %d %q, want 200, handled before", status, body)
	}
	// evt_2: the second process (lease 1 ns) takes it and "dies" holding
	// it (its OnEvent never returns); the first takes it over.
	j := openJournal(t, url)
	if _, _, err := j.Claim(t.Context(), journaldriver.Key{Backend: openai.WebhookJournal, Thread: "sess_1", Call: "evt_2"}, "", "", "dead", time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if status, body := idle(servers[0], "evt_2"); status != http.StatusOK || !strings.Contains(body, "acknowledged") {
		t.Errorf("an event whose handler died: %d %q, want it taken over", status, body)
	}
	for range 2 {
		if status, _ := idle(servers[0], "evt_fail"); status != http.StatusInternalServerError {
			t.Errorf("OnEvent failing: %d, want 500", status)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"evt_1": 1, "evt_2": 1, "evt_fail": 2}, log.events); diff != "" {
		t.Errorf("OnEvent calls (-want +got):\n%s", diff)
	}
}

// TestEnvironmentConnectionAction (issue 37, item 3): a session waiting
// for its self-hosted environment (required action environment_connection)
// cannot be answered by toolrelay: a resume fails with an
// *UnsupportedActionError (Unimplemented) naming the environment and what
// to do, and a webhook handler does not resume it but hands the action to
// OnEvent, where the program connects the environment; the session goes on,
// and its next action's webhook resumes it to its answer.
func TestEnvironmentConnectionAction(t *testing.T) {
	ep := newEndpoint(t)
	h := start(t, setup{
		script: &coretest.Script{Turns: []coretest.Turn{{Steps: customerSteps}}},
		server: &openaitest.Options{Webhooks: &openaitest.Webhooks{URLs: []string{ep.URL}, Secret: hookSecret}},
	})
	agent := customerAgent(t, h)
	b := h.open(openai.Options{Agent: agent})
	runner := core.NewRunner(b, h.tools, &core.Options{Logger: discard()})
	log := newHookLog()
	envActions := make(chan string, 4)
	log.onEvent = func(ev *webhooks.UnwrapWebhookEventUnion) error {
		if ev.Type == "agent.session.action_required" && ev.Data.RequiredAction.Type == "environment_connection" {
			envActions <- ev.Data.ID
		}
		return nil
	}
	hh, err := openai.NewWebhookHandler(runner, log.options(openai.WebhookOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	ep.serve(hh)
	env := oai.EnvironmentParamOfParamSelfHosted("/workspace")
	session := newSession(t, b, agent, "What does customer 123 pay?", &env)
	if got := <-envActions; got != session {
		t.Fatalf("environment_connection webhook for %s, want %s", got, session)
	}
	sess, err := b.Client().Beta.Agents.Sessions.Get(t.Context(), session)
	if err != nil {
		t.Fatal(err)
	}
	envID := sess.Environment.AsSelfHosted().ID
	_, err = runner.Resume(t.Context(), session, nil)
	var ue *openai.UnsupportedActionError
	if !errors.As(err, &ue) || ue.Type != "environment_connection" || ue.Environment != envID || errcode.Of(err) != errcode.Unimplemented {
		t.Fatalf("Resume = %v, want an Unimplemented *UnsupportedActionError for environment %s", err, envID)
	}
	for _, says := range []string{"environment_connection", envID, "executor", "Runner.Resume", "Backend.Client().Beta.Agents.Sessions.Get"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the error does not say %q: %v", says, err)
		}
	}
	// The program's executor connects (the fake's stand-in for it).
	if err := h.srv.ConnectEnvironment(session); err != nil {
		t.Fatal(err)
	}
	log.answered(t, priceAnswer, session)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.srv.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	shutdown(t, hh)
	for _, r := range log.snapshot()[session] {
		if r.err != nil {
			t.Errorf("a resume by webhook failed (resumed on environment_connection?): %v", r.err)
		}
	}
	h.checkOnce()
}

// TestSignInAction (issue 37, item 3): a computer-use request to sign in
// (browser_authentication) asks for credentials toolrelay never holds: the
// run fails with an *UnsupportedActionError (Unimplemented) naming the
// origin and the SDK call that answers it; the program answers it so, and
// a resume goes on to the answer.
func TestSignInAction(t *testing.T) {
	browser := coretest.Call{Name: "browser", Approval: true, Origin: "https://shop.example"}
	h := start(t, setup{
		script: oneTurn(calls(browser), text(`browser: {{output "browser"}}`)),
		server: &openaitest.Options{SignIn: true},
	})
	res, err := h.runner.Run(t.Context(), "Buy it", nil)
	var ue *openai.UnsupportedActionError
	if !errors.As(err, &ue) || ue.Request != "browser_authentication" || ue.Origin != "https://shop.example" || errcode.Of(err) != errcode.Unimplemented {
		t.Fatalf("Run = %v, want an Unimplemented *UnsupportedActionError for browser_authentication", err)
	}
	for _, says := range []string{"https://shop.example", "Sessions.Events.New", "browser_authentication submit or cancel", "Runner.Resume"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the error does not say %q: %v", says, err)
		}
	}
	sess, err := h.backend.Client().Beta.Agents.Sessions.Get(t.Context(), res.Thread)
	if err != nil {
		t.Fatal(err)
	}
	err = h.backend.Client().Beta.Agents.Sessions.Events.New(t.Context(), res.Thread, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{{
		OfParamAgentSessionInputComputerUseApprovalRequestResult: &oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResult{
			RequestID: sess.RequiredActions[0].RequestID,
			Response: oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion{
				OfBrowserAuthenticationSubmit: &oai.AgentBrowserAuthenticationSubmitParam{Fields: []oai.AgentBrowserAuthenticationSubmitParamField{
					{FieldID: "username", Value: "ann"}, {FieldID: "password", Value: "pw"}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = h.runner.Resume(t.Context(), res.Thread, nil)
	if err != nil || res.Text != "browser: signed in" {
		t.Errorf("Resume = %+v, %v, want the answer after signing in", res, err)
	}
}

// firstResult waits for the end of session's first resume, or fails the
// test after a minute.
func (l *hookLog) firstResult(t *testing.T, session string) hookResult {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		rs := l.results[session]
		l.mu.Unlock()
		if len(rs) > 0 {
			return rs[0]
		}
		select {
		case <-l.changed:
		case <-timeout.C:
			t.Fatalf("no resume of %s ended", session)
		}
	}
}

// sessionRequest reports whether r is a request about one session (not
// the one that creates it).
func sessionRequest(r *openaitest.Request) bool {
	return strings.HasPrefix(r.Path, "agents/sessions/")
}

// TestWebhookOutage (issue 46, item 7): a delivery answered 200 whose
// resume meets a short outage (the service answering 503 to the session's
// requests; the SDK not retrying) is tried again, with backoff, and goes
// on to the answer once the outage ends. An outage that outlasts RetryFor,
// or a Shutdown while the resume waits to be tried again, leaves the run in
// the shared journal, not failed: once the service is back, another
// process's TakeOver finds it and finishes it. Every call runs once.
func TestWebhookOutage(t *testing.T) {
	tests := []struct {
		name string
		// failures is how many of the session's requests fail (0: until
		// the test ends the outage).
		failures            int
		retryFor, retryWait time.Duration
		// shutdown shuts the handler down once a request failed.
		shutdown bool
	}{
		{name: "short", failures: 4, retryFor: time.Minute, retryWait: time.Millisecond},
		{name: "outlasting RetryFor", retryFor: 50 * time.Millisecond, retryWait: time.Millisecond},
		{name: "Shutdown while waiting", retryFor: time.Hour, retryWait: time.Hour, shutdown: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var failed atomic.Int32
			var outage atomic.Bool
			outage.Store(true)
			failing := make(chan struct{})
			var failingOnce sync.Once
			ep := newEndpoint(t)
			h := start(t, setup{
				script: &coretest.Script{Turns: []coretest.Turn{{Steps: customerSteps}}},
				server: &openaitest.Options{
					Webhooks: &openaitest.Webhooks{URLs: []string{ep.URL}, Secret: hookSecret},
					Fault: func(r *openaitest.Request) *openaitest.Fault {
						if !sessionRequest(r) || !outage.Load() {
							return nil
						}
						if n := failed.Add(1); tc.failures > 0 && int(n) >= tc.failures {
							outage.Store(false) // this one fails, the next do not
						}
						failingOnce.Do(func() { close(failing) })
						return &openaitest.Fault{Status: http.StatusServiceUnavailable}
					},
				},
			})
			agent := customerAgent(t, h)
			url := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
			noRetries := []option.RequestOption{option.WithMaxRetries(0)}
			b := h.open(openai.Options{Agent: agent, RequestOptions: noRetries})
			runner := core.NewRunner(b, h.tools, &core.Options{Journal: openJournal(t, url), Owner: "p1", Logger: discard()})
			log := newHookLog()
			hh, err := openai.NewWebhookHandler(runner, log.options(openai.WebhookOptions{RetryFor: tc.retryFor, RetryWait: tc.retryWait}))
			if err != nil {
				t.Fatal(err)
			}
			ep.serve(hh)
			session := newSession(t, h.backend, agent, "What does customer 123 pay?", nil)
			if tc.shutdown {
				<-failing
				// Not a wait of RetryWait (an hour) for the next attempt.
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				if err := hh.Shutdown(ctx); err != nil {
					t.Fatalf("Shutdown while a resume waits to be tried again: %v", err)
				}
				ep.serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) // the deliveries to come: 200
			}

			first := log.firstResult(t, session)
			if tc.failures > 0 {
				if first.err != nil || first.text != priceAnswer {
					t.Fatalf("the resume ended with %q, %v; want %q: it was not tried again after the outage", first.text, first.err, priceAnswer)
				}
				if n := failed.Load(); int(n) != tc.failures {
					t.Errorf("%d of the session's requests failed, want %d", n, tc.failures)
				}
			} else {
				if errcode.Of(first.err) != errcode.Unavailable {
					t.Fatalf("the resume ended with %q, %v; want Unavailable (the outage outlasts RetryFor)", first.text, first.err)
				}
				if n := failed.Load(); n < 2 && !tc.shutdown {
					t.Errorf("%d of the session's requests failed, want the resume tried more than once", n)
				}
				outage.Store(false)
				// Another process, sharing the journal, takes the run over.
				taker := core.NewRunner(h.open(openai.Options{Agent: agent, RequestOptions: noRetries}), h.tools,
					&core.Options{Journal: openJournal(t, url), Owner: "p2", Logger: discard()})
				got, err := taker.TakeOver(t.Context())
				if err != nil || len(got) != 1 || got[0].Thread != session || got[0].Text != priceAnswer {
					var runs []journaldriver.Run
					if rs, ok := openJournal(t, url).(journaldriver.Runs); ok {
						runs, _ = rs.ListRuns(t.Context(), "", "", 10)
					}
					t.Fatalf("TakeOver = %+v, %v; want the run of %s finished (records: %+v)", got, err, session, runs)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := h.srv.FlushWebhooks(ctx); err != nil {
				t.Fatal(err)
			}
			shutdown(t, hh)
			if st := h.srv.SessionStatus(session); st != "idle" {
				t.Errorf("session %s is %s, want idle", session, st)
			}
			if got, want := len(h.runCounts()), 2; got != want {
				t.Errorf("%d calls ran, want %d", got, want)
			}
			h.checkOnce()
		})
	}
}

// TestWebhookRetriedErrors (issue 46, item 7): a webhook handler tries a
// resume again after the failures that may pass (the service unavailable,
// a 429, the service not reached), not after those that stay (a budget or
// step limit, a refusal, a time limit, a cancellation).
func TestWebhookRetriedErrors(t *testing.T) {
	coded := func(c errcode.Code, err error) error { return &errcode.Error{Code: c, Op: "openai: resume", Err: err} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"503", coded(errcode.Unavailable, &oai.Error{StatusCode: http.StatusServiceUnavailable}), true},
		{"a journal's connection lost", coded(errcode.Unavailable, errors.New("conn closed")), true},
		{"429", coded(errcode.ResourceExhausted, &oai.Error{StatusCode: http.StatusTooManyRequests}), true},
		{"not reached", coded(errcode.Unknown, &url.Error{Op: "Get", URL: "https://api.openai.com/v1/agents/sessions/sess_1", Err: refused}), true},
		{"a budget", coded(errcode.ResourceExhausted, core.ErrMaxSteps), false},
		{"400", coded(errcode.InvalidArgument, &oai.Error{StatusCode: http.StatusBadRequest}), false},
		{"a time limit", coded(errcode.DeadlineExceeded, context.DeadlineExceeded), false},
		{"canceled", coded(errcode.Canceled, context.Canceled), false},
		{"unknown", coded(errcode.Unknown, errors.New("?")), false},
	}
	for _, tc := range tests {
		if got := openai.MayPass(tc.err); got != tc.want {
			t.Errorf("%s: tried again = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// trickle opens a connection to the server at url and POSTs to it a body
// announced as 1 MiB less a byte (within MaxBodyBytes) that it sends a
// byte at a time, every 10 ms, until the connection is closed. It returns
// the connection.
func trickle(t *testing.T, url string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: hooks.example\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", openai.DefaultMaxWebhookBytes-1)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	return conn
}

// TestWebhookSlowBody (issue 46, item 8): a body that trickles in (a byte
// every 10 ms, never done) to a server with no timeouts of its own is
// answered 408 once BodyTimeout has passed, and its connection closed; a
// delivery whose handling outlasts BodyTimeout (its body read at once)
// keeps its context to the end.
func TestWebhookSlowBody(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	const bound = 100 * time.Millisecond
	var events atomic.Int32
	hh, err := openai.NewWebhookHandler(h.runner, &openai.WebhookOptions{Secret: hookSecret, Logger: discard(), BodyTimeout: bound,
		OnEvent: func(ctx context.Context, ev *webhooks.UnwrapWebhookEventUnion) error {
			events.Add(1)
			// Handled for 10 times the body's bound: its context lasts.
			select {
			case <-ctx.Done():
				return errors.New("the delivery's context ended while it was handled")
			case <-time.After(10 * bound):
				return nil
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hh) // no ReadTimeout: the handler's bound is the only one
	t.Cleanup(srv.Close)
	t.Cleanup(func() { shutdown(t, hh) })

	conn := trickle(t, srv.URL)
	// A bound for the test only: without the handler's, the answer never comes.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a body that trickles in: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 100ms") {
		t.Errorf("a body that trickles in: %d %q, want 408 saying so", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 408, reading the connection = %v, want EOF (closed)", err)
	}

	idle := `{"id":"sess_9","environment_type":"none"}`
	if status, body := deliver(t, srv.URL, hookSecret, "evt_slow", "agent.session.idle", idle, time.Now()); status != http.StatusOK {
		t.Errorf("a delivery handled for longer than BodyTimeout: %d %q, want 200", status, body)
	}
	if n := events.Load(); n != 1 {
		t.Errorf("OnEvent was called %d times, want once (the trickled body was never an event)", n)
	}
}

// TestWebhookTolerance (issue 46, item 13): the handler's Tolerance, not
// openai-go's default of 5 minutes, bounds a delivery's age and how far
// ahead of the clock it may be, narrower and wider alike.
func TestWebhookTolerance(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	idle := `{"id":"sess_9","environment_type":"none"}`
	now := time.Now()
	tests := []struct {
		tolerance time.Duration
		age       time.Duration // negative: ahead of the clock
		status    int
		says      string
	}{
		{time.Minute, 2 * time.Minute, http.StatusUnauthorized, "too old"},
		{time.Minute, -2 * time.Minute, http.StatusUnauthorized, "too new"},
		{time.Minute, 10 * time.Second, http.StatusOK, "acknowledged"},
		{10 * time.Minute, 7 * time.Minute, http.StatusOK, "acknowledged"},
		{10 * time.Minute, -7 * time.Minute, http.StatusOK, "acknowledged"},
		{10 * time.Minute, 11 * time.Minute, http.StatusUnauthorized, "too old"},
	}
	for i, tc := range tests {
		hh, err := openai.NewWebhookHandler(h.runner, &openai.WebhookOptions{Secret: hookSecret, Logger: discard(), Tolerance: tc.tolerance})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(hh)
		status, body := deliver(t, srv.URL, hookSecret, fmt.Sprintf("evt_%d", i), "agent.session.idle", idle, now.Add(-tc.age))
		srv.Close()
		shutdown(t, hh)
		if status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("Tolerance %v, a delivery of age %v (negative: ahead of the clock): %d %q, want %d saying %q", tc.tolerance, tc.age, status, body, tc.status, tc.says)
		}
	}
}

// TestWebhookReplayWhileHandled (issue 46, item 13): a delivery of an
// event that the same handler is still handling (its first delivery's
// OnEvent has not returned) is answered 503 with Retry-After, since that
// handling may yet fail; once it succeeded, 200 with nothing done. OnEvent
// sees the event once.
func TestWebhookReplayWhileHandled(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	log := newHookLog()
	hold, release := make(chan struct{}), make(chan struct{})
	log.onEvent = func(*webhooks.UnwrapWebhookEventUnion) error {
		close(hold)
		<-release
		return nil
	}
	hh, err := openai.NewWebhookHandler(h.runner, log.options(openai.WebhookOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hh)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { shutdown(t, hh) })
	idle := `{"id":"sess_9","environment_type":"none"}`
	at := time.Now()
	send := func() (int, string, string) {
		body := fmt.Appendf(nil, `{"id":"evt_1","object":"event","created_at":%d,"type":"agent.session.idle","data":%s}`, at.Unix(), idle)
		hdr, err := openaitest.SignWebhook(hookSecret, "evt_1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header = hdr
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
	}
	first := make(chan int)
	go func() {
		status, _, _ := send()
		first <- status
	}()
	<-hold
	if status, body, retry := send(); status != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body, "being handled") {
		t.Errorf("the event again while its first delivery is handled: %d %q (Retry-After %q), want 503 with Retry-After", status, body, retry)
	}
	close(release)
	if status := <-first; status != http.StatusOK {
		t.Errorf("the first delivery: %d, want 200", status)
	}
	if status, body, _ := send(); status != http.StatusOK || !strings.Contains(body, "handled before") {
		t.Errorf("the event again once handled: %d %q, want 200, handled before", status, body)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"evt_1": 1}, log.events); diff != "" {
		t.Errorf("OnEvent calls (-want +got):\n%s", diff)
	}
}

// TestWebhookActionDuringResume (issue 46, item 13): actions of a session
// that arrive while its resume runs (here, while its call's handler is
// held) make the handler resume it once more when that resume ends, once
// however many arrived: no action is lost, and no two resumes of a session
// run at once.
func TestWebhookActionDuringResume(t *testing.T) {
	srv := openaitest.NewServer(oneTurn(calls(call("hold", `{}`)), text("released")), nil)
	t.Cleanup(srv.Close)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var running, overlapped atomic.Int32
	holdTool, err := core.NewTool("hold", "Holds until released.", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, b, a := oneToolAgent(t, srv, holdTool)
	log := newHookLog()
	runner := core.NewRunner(b, tools, &core.Options{Logger: discard(), Hooks: &core.Hooks{
		Run: func(ctx context.Context, _ *core.RunInfo) (context.Context, func(*core.Result, error)) {
			if running.Add(1) > 1 {
				overlapped.Add(1)
			}
			return ctx, func(*core.Result, error) { running.Add(-1) }
		}}})
	hh, err := openai.NewWebhookHandler(runner, log.options(openai.WebhookOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(hh)
	t.Cleanup(hs.Close)
	session := newSession(t, b, a.ID, "hold on", nil)
	action := func(id string) {
		t.Helper()
		status, body := deliver(t, hs.URL, hookSecret, id, "agent.session.action_required", `{"id":"`+session+`","required_action":{"type":"function_call"}}`, time.Now())
		if status != http.StatusOK || !strings.Contains(body, "resuming") {
			t.Fatalf("action %s: %d %q, want 200 resuming", id, status, body)
		}
	}
	action("evt_1")
	<-started
	action("evt_2") // while the first resume runs
	action("evt_3")
	close(release)
	shutdown(t, hh) // waits for the resumes
	want := []hookResult{{text: "released"}, {text: "released"}}
	got := log.snapshot()[session]
	for i := range got {
		got[i].turn = "" // the same turn, answered again
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(hookResult{}), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("resumes of the session (-want +got):\n%s", diff)
	}
	if n := overlapped.Load(); n != 0 {
		t.Errorf("%d resumes of the session ran beside another", n)
	}
}
