package realtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/temporal"
	"github.com/toolrelay/toolrelay/web"
)

// TestWebFleet: two processes serving package web's handler over the
// Temporal runner (each with its own client, worker, runner and handler,
// sharing only the Temporal server and the model's service) serve one
// chat between them, as a fleet behind a load balancer does. The chat's
// second message, on B, continues the thread of its first, answered on A
// (the model sees the first turn: the service gets it on the same
// thread); the answer to B's approval, back on A, finds the chat paused
// and finishes the answer; another identity is told on either process
// that the chat does not exist.
func TestWebFleet(t *testing.T) {
	var refunds atomic.Int32
	refund, err := core.NewTool("refund", "Refund an order.", func(_ context.Context, in struct {
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}) (string, error) {
		refunds.Add(1)
		return fmt.Sprintf("refunded %d on order %s", in.Amount, in.Order), nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("refunds need a person's yes")})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(refund)
	if err != nil {
		t.Fatal(err)
	}
	service := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{{Text: "Hello! How can I help?"}}},
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)}}},
			{Text: "Done: {{result 0}}."},
		}},
	}}, &coretest.BackendOptions{Tools: tools, DeltaSize: 8})
	queue := newQueue(t)
	var fronts []*webFront
	for range 2 {
		c := dial(t)
		startWorker(t, c, queue, core.NewRunner(service, tools, &core.Options{Logger: quiet}))
		r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Heartbeat: 5 * time.Second, Idle: time.Minute}})
		fronts = append(fronts, newWebFront(t, r))
	}
	a, b := fronts[0], fronts[1]

	status, first := a.post(t, "ann", userMessage("c", "hi"))
	if got, want := sseTexts(first), "Hello! How can I help?"; status != http.StatusOK || got != want {
		t.Fatalf("A's answer to the first message: %d %q, want 200 %q\n%s", status, got, want, first)
	}
	status, second := b.post(t, "ann", userMessage("c", "refund 7"))
	request := sseChunk(second, "tool-approval-request")
	if status != http.StatusOK || request == nil {
		t.Fatalf("B's answer to the second message: %d, asking no approval (a new thread answers with the script's first turn):\n%s", status, second)
	}
	message := sseChunk(second, "start")["messageId"]
	for _, f := range fronts {
		if status, body := f.post(t, "bob", answers("c", message, request["approvalId"])); status != http.StatusNotFound {
			t.Errorf("another identity's answer: status %d (%s), want 404", status, body)
		}
	}
	status, third := a.post(t, "ann", answers("c", message, request["approvalId"]))
	if got, want := sseTexts(third), "Done: refunded 150 on order 7."; status != http.StatusOK || got != want {
		t.Errorf("A's answer once approved: %d %q, want 200 %q\n%s", status, got, want, third)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("refunded %d times, want once", n)
	}
	var inputs []coretest.Received
	for _, r := range service.Received() {
		if r.Kind == "input" {
			inputs = append(inputs, coretest.Received{Kind: r.Kind, Thread: r.Thread, Input: r.Input})
		}
	}
	want := []coretest.Received{{Kind: "input", Thread: "thread_1", Input: "hi"}, {Kind: "input", Thread: "thread_1", Input: "refund 7"}}
	if diff := cmp.Diff(want, inputs); diff != "" {
		t.Errorf("the service's inputs (-want +got):\n%s", diff)
	}
}

// A webFront is one process's web front end: package web's handler over
// a Temporal runner, served on loopback; requests name their identity in
// the X-User header.
type webFront struct{ *httptest.Server }

func newWebFront(t *testing.T, r *temporal.Runner) *webFront {
	t.Helper()
	h := web.Handler(r, &web.Options{
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:   slog.New(slog.NewTextHandler(testLog{t}, nil)),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &webFront{srv}
}

// testLog writes a log into the test's.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// post POSTs body as who, and returns the status and the whole body.
func (f *webFront) post(t *testing.T, who, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/api/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", who)
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// userMessage returns the body the AI SDK's client POSTs for the user's
// text.
func userMessage(chat, text string) string {
	b, _ := json.Marshal(map[string]any{
		"id": chat, "trigger": "submit-message",
		"messages": []any{map[string]any{"id": "u-" + text, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}},
	})
	return string(b)
}

// answers returns the body the client POSTs to approve the call of
// approval id in the assistant's message.
func answers(chat, message, id string) string {
	b, _ := json.Marshal(map[string]any{
		"id": chat, "trigger": "submit-message", "messageId": message,
		"messages": []any{map[string]any{"id": message, "role": "assistant", "parts": []any{map[string]any{
			"type": "tool-refund", "toolCallId": id, "state": "approval-responded", "approval": map[string]any{"id": id, "approved": true},
		}}}},
	})
	return string(b)
}

// sseChunks returns the chunks of a UI message stream, each's string
// fields.
func sseChunks(sse string) []map[string]string {
	var out []map[string]string
	sc := bufio.NewScanner(strings.NewReader(sse))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(d), &m) != nil {
			continue
		}
		c := map[string]string{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				c[k] = s
			}
		}
		out = append(out, c)
	}
	return out
}

// sseChunk returns the first chunk of type typ, or nil.
func sseChunk(sse, typ string) map[string]string {
	for _, c := range sseChunks(sse) {
		if c["type"] == typ {
			return c
		}
	}
	return nil
}

// sseTexts returns the text of the text-delta chunks.
func sseTexts(sse string) string {
	var b strings.Builder
	for _, c := range sseChunks(sse) {
		if c["type"] == "text-delta" {
			b.WriteString(c["delta"])
		}
	}
	return b.String()
}
