package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

var quiet = slog.New(slog.DiscardHandler)

type refundArgs struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

type orderArgs struct {
	Order string `json:"order"`
}

// effects counts the refunds the tools made, by order.
type effects struct {
	mu      sync.Mutex
	refunds map[string]int
	// block, if set, is waited on by each lookup (or its context).
	block chan struct{}
}

func (e *effects) count(order string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refunds[order]
}

// testTools returns the tools of the tests: refund (which needs approval)
// and lookup_order (7 is an espresso machine; others do not exist).
func testTools(t testing.TB, fx *effects) *core.Toolbox {
	t.Helper()
	refund, err := core.NewTool("refund", "Refund an order.", func(_ context.Context, in refundArgs) (string, error) {
		fx.mu.Lock()
		defer fx.mu.Unlock()
		if fx.refunds == nil {
			fx.refunds = map[string]int{}
		}
		fx.refunds[in.Order]++
		return fmt.Sprintf("refunded %d on order %s", in.Amount, in.Order), nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("refunds need a person's yes")})
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := core.NewTool("lookup_order", "Look up an order.", func(ctx context.Context, in orderArgs) (map[string]string, error) {
		if fx.block != nil {
			select {
			case <-fx.block:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if in.Order != "7" {
			return nil, core.ModelErrorf("there is no order %s", in.Order)
		}
		return map[string]string{"order": "7", "item": "espresso machine"}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(refund, lookup)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// scripts are the model's side of the cases of testdata/cases.json.
var scripts = map[string]*coretest.Script{
	"answer": {Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Reasoning: "A greeting: greet back.", Text: "Hello! How can I help with your orders?"},
	}}}},
	"calls": {Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)}, {Name: "lookup_order", Arguments: json.RawMessage(`{"order": "9"}`)}}},
		{Text: "Order 7 is an espresso machine; there is no order 9."},
	}}}},
	"approval": refundScript,
	"denial":   refundScript,
	"failure": {Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)}}},
		{Text: "never said"},
	}}}},
}

var refundScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{
		{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)},
		{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)},
	}},
	{Text: "Done: {{result 0}}."},
}}}}

// secret is in the error of the failure case's service: no page sees it.
const secret = "password=hunter2 at 10.0.0.7"

// testServer is a handler over a runner on the in-memory backend, served on
// loopback; requests name their identity in the X-User header.
type testServer struct {
	*httptest.Server
	h  *handler
	b  *coretest.Backend
	r  *core.Runner
	fx *effects
}

func newTestServer(t testing.TB, script *coretest.Script, opts *Options, bopts *coretest.BackendOptions) *testServer {
	t.Helper()
	fx := &effects{}
	tb := testTools(t, fx)
	if bopts == nil {
		bopts = &coretest.BackendOptions{}
	}
	bopts.Tools = tb
	if bopts.DeltaSize == 0 {
		bopts.DeltaSize = 8
	}
	b := coretest.NewBackend(script, bopts)
	r := core.NewRunner(b, tb, &core.Options{Logger: quiet, Concurrency: 1})
	return serve(t, r, b, fx, opts)
}

func serve(t testing.TB, r *core.Runner, b *coretest.Backend, fx *effects, opts *Options) *testServer {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Identity == nil {
		o.Identity = func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	h := Handler(r, &o).(*handler)
	var n atomic.Int64
	h.newID = func() string { return "msg-" + strconv.FormatInt(n.Add(1), 10) }
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.turns.Wait()
		r.Close()
	})
	return &testServer{Server: srv, h: h, b: b, r: r, fx: fx}
}

// userMessage returns the body the client POSTs for the user's text.
func userMessage(chat, text string) string {
	b, _ := json.Marshal(map[string]any{
		"id": chat, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": "u-" + text, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}},
	})
	return string(b)
}

// approvalAnswer is an answer to an approval, as the page sends it.
type approvalAnswer struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// answersMessage returns the body the client POSTs for answers to
// approvals of the assistant's message.
func answersMessage(chat, message string, answers []approvalAnswer) string {
	var parts []any
	for _, a := range answers {
		parts = append(parts, map[string]any{"type": "tool-refund", "toolCallId": a.ID, "state": "approval-responded", "approval": a})
	}
	b, _ := json.Marshal(map[string]any{
		"id": chat, "trigger": "submit-message", "messageId": message,
		"messages": []any{map[string]any{"id": message, "role": "assistant", "parts": parts}},
	})
	return string(b)
}

func (s *testServer) post(t testing.TB, who, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/api/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", who)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (s *testServer) reconnect(t testing.TB, who, chat string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/api/chat/"+chat+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", who)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readAll returns the whole body of resp, checking it is a UI message
// stream.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("headers %v, want a UI message stream", resp.Header)
	}
	return string(b)
}

// chunks returns the data of the events of an SSE transcript.
func chunks(sse string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(sse))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// texts returns the text of the text-delta chunks of an SSE transcript.
func texts(sse string) string {
	var b strings.Builder
	for _, c := range chunks(sse) {
		var v struct{ Type, Delta string }
		json.Unmarshal([]byte(c), &v)
		if v.Type == "text-delta" {
			b.WriteString(v.Delta)
		}
	}
	return b.String()
}

// waitFor polls cond until it holds, or fails after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for t0 := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var errBoom = errors.New("boom: " + secret)
