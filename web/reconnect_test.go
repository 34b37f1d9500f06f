package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

var lookupScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)}}},
	{Text: "Order 7 is {{result 0}}, delivered on Monday."},
}}}}

var lookupAnswer = regexp.MustCompile(`^Order 7 is \{"item":"espresso machine","order":"7"\}, delivered on Monday\.$`)

// readUntil reads resp's events until one contains s, and returns what it
// read.
func readUntil(t *testing.T, resp *http.Response, s string) string {
	t.Helper()
	var b strings.Builder
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if strings.Contains(line, s) {
			return b.String()
		}
		if err != nil {
			t.Fatalf("the stream ended before %q: %v\n%s", s, err, b.String())
		}
	}
}

// checkOnce checks that a transcript shows each call's input and outcome
// once, and the answer's text whole (matching answer), once, to the end.
func checkOnce(t *testing.T, sse string, answer *regexp.Regexp) {
	t.Helper()
	if n := strings.Count(sse, `"tool-input-available"`); n != 1 {
		t.Errorf("the call's input shown %d times, want once:\n%s", n, sse)
	}
	if n := strings.Count(sse, `"tool-output-available"`) + strings.Count(sse, `"tool-output-error"`); n != 1 {
		t.Errorf("the call's outcome shown %d times, want once:\n%s", n, sse)
	}
	if got := texts(sse); !answer.MatchString(got) {
		t.Errorf("text %q, want %v\n%s", got, answer, sse)
	}
	if !regexp.MustCompile(`data: \{"type":"finish","finishReason":"stop"[^\n]*\}\n\ndata: \[DONE\]\n\n$`).MatchString(sse) {
		t.Errorf("the stream does not end with finish and [DONE]:\n%s", sse)
	}
}

// TestReconnect checks that a page that goes away in the middle of an
// answer and reconnects (the client's resumeStream) gets the whole message
// from its start, with the same id, then the rest: nothing twice, nothing
// missed; the run went on without it.
func TestReconnect(t *testing.T) {
	s := newTestServer(t, lookupScript, &Options{ReconnectWindow: time.Second}, nil)
	s.fx.block = make(chan struct{})
	resp := s.post(t, "ann", userMessage("c1", "order 7?"))
	first := readUntil(t, resp, "tool-input-available")
	resp.Body.Close() // the page reloads
	again := s.reconnect(t, "ann", "c1")
	replay := readUntil(t, again, "tool-input-available")
	if !strings.HasPrefix(replay, chunksPrefix(first)) {
		t.Errorf("the replay does not start as the first stream did:\n%s\nvs\n%s", replay, first)
	}
	close(s.fx.block)
	rest := readAll(t, again)
	checkOnce(t, replay+rest, lookupAnswer)
	if n := s.inputs(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
	// Once the answer is over (and its window passed), nothing is being
	// written: 204.
	s.h.turns.Wait()
	waitFor(t, "the finished answer to be let go", func() bool {
		c := s.h.acquire("c1")
		defer c.release()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.turn == nil
	})
}

// chunksPrefix returns the events of a stream that was cut, without the
// last (maybe partial) line.
func chunksPrefix(sse string) string { return sse[:strings.LastIndex(sse[:len(sse)-1], "\n")+1] }

// TestNoAnswerInProgress checks that a reconnection when no answer is
// being written gets 204, as the client expects.
func TestNoAnswerInProgress(t *testing.T) {
	s := newTestServer(t, lookupScript, &Options{ReconnectWindow: time.Millisecond}, nil)
	readAll(t, s.post(t, "ann", userMessage("c1", "order 7?")))
	s.h.turns.Wait()
	waitFor(t, "204", func() bool {
		resp := s.reconnect(t, "ann", "c1")
		resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	})
}

// TestDroppedStopsRun checks that when the only page reading an answer goes
// away, the run's reading stops (the handler's context canceled, nothing
// else run), and that the next request, a reconnection, resumes the turn
// and shows its rest: on fake-foundry, whose turns survive a stopped
// reader.
func TestDroppedStopsRun(t *testing.T) {
	fx := &effects{block: make(chan struct{})}
	tb := testTools(t, fx)
	r, err := adapter.Open(t.Context(), tb, &adapter.Options{
		DefaultBackend:  "fake-foundry",
		BackendSettings: []any{coretest.FakeSettings{Script: lookupScript}, foundry.Settings{Delivery: string(foundry.Streaming)}},
		Runner:          core.Options{Logger: quiet},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, r, nil, fx, &Options{ReconnectWindow: -1})
	resp := s.post(t, "ann", userMessage("c1", "order 7?"))
	first := readUntil(t, resp, "tool-input-available")
	resp.Body.Close()
	waitFor(t, "the run to stop", func() bool {
		rec, err := s.h.store.load(t.Context(), "c1")
		return err == nil && rec.State == stateInterrupted
	})
	s.h.turns.Wait()
	// The next request resumes it.
	close(fx.block)
	rest := readAll(t, s.reconnect(t, "ann", "c1"))
	if !strings.HasPrefix(rest, chunksPrefix(first)) {
		t.Errorf("the reconnection does not replay the start:\n%s\nvs\n%s", rest, first)
	}
	// What the resumed turn says of the call its stop interrupted is the
	// backend's (Foundry's cancellation answers it as stopped): the page
	// is shown it once, as the rest of the answer.
	checkOnce(t, rest, regexp.MustCompile(`^Order 7 is .+, delivered on Monday\.$`))
	rec, err := s.h.store.load(t.Context(), "c1")
	if err != nil || rec.State != "" || rec.Message != nil || rec.Thread == "" {
		t.Errorf("the chat's record after the answer: %+v, %v", rec, err)
	}
}

// TestFleet checks that a chat's next request can go to another process
// sharing the journal: a refund paused on one handler is answered on
// another, which finds the chat (its owner, thread and message), decides,
// and finishes the answer; the refund runs once.
func TestFleet(t *testing.T) {
	journal := journaldriver.NewMemory()
	fx := &effects{}
	tb := testTools(t, fx)
	service := coretest.NewBackend(refundScript, &coretest.BackendOptions{Tools: tb, DeltaSize: 8})
	var servers []*testServer
	for range 2 {
		r := core.NewRunner(service, tb, &core.Options{Logger: quiet, Journal: journal, Concurrency: 1})
		servers = append(servers, serve(t, r, service, fx, nil))
	}
	a, b := servers[0], servers[1]
	first := readAll(t, a.post(t, "ann", userMessage("c1", "refund 7")))
	if !strings.Contains(first, `"tool-approval-request"`) {
		t.Fatalf("no approval asked:\n%s", first)
	}
	a.h.turns.Wait()
	if resp := b.post(t, "bob", answersMessage("c1", "msg-1", []approvalAnswer{{ID: "call_1", Approved: true}})); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another identity on the other process: status %d, want 404", resp.StatusCode)
	}
	second := readAll(t, b.post(t, "ann", answersMessage("c1", "msg-1", []approvalAnswer{{ID: "call_1", Approved: true}})))
	if got, want := texts(second), "Done: refunded 150 on order 7."; got != want {
		t.Errorf("answer %q, want %q\n%s", got, want, second)
	}
	if !strings.Contains(second, `{"type":"start","messageId":"msg-1"}`) || strings.Count(second, "tool-input-available") != 0 {
		t.Errorf("the answer does not go on with the same message, showing only what is new:\n%s", second)
	}
	if n := fx.count("7"); n != 1 {
		t.Errorf("refunded %d times, want once", n)
	}
	list, err := b.r.Approvals(t.Context(), mustThread(t, b, "c1"))
	if err != nil || len(list) != 1 || list[0].Decision == nil || list[0].Decision.Actor != "ann" {
		t.Errorf("approvals %+v, %v: want one decided by ann", list, err)
	}
	// And the thread goes on from either process.
	b.h.turns.Wait()
}

func mustThread(t *testing.T, s *testServer, chat string) string {
	t.Helper()
	rec, err := s.h.store.load(t.Context(), chat)
	if err != nil || rec.Thread == "" {
		t.Fatalf("chat %s: %+v, %v", chat, rec, err)
	}
	return rec.Thread
}

// TestResumeKeepsRunOptions checks that a run stopped because its page
// went away, and resumed at once because a page came back meanwhile,
// keeps the handler's run options: with MaxSteps 2, the resumed run stops
// at its limit instead of running the script's other steps.
func TestResumeKeepsRunOptions(t *testing.T) {
	const maxSteps = 2
	var steps []coretest.Step
	for range 6 {
		steps = append(steps, coretest.Step{Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)}}})
	}
	steps = append(steps, coretest.Step{Text: "Order 7 is an espresso machine."})
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: steps}}}
	// The first lookup waits for its run to be stopped, and returns only
	// once the test let a page come back.
	running, stopped, goOn := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	lookup, err := core.NewTool("lookup_order", "Look up an order.", func(ctx context.Context, in orderArgs) (string, error) {
		if calls.Add(1) == 1 {
			close(running)
			<-ctx.Done()
			close(stopped)
			<-goOn
			return "", ctx.Err()
		}
		return "espresso machine", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(lookup)
	if err != nil {
		t.Fatal(err)
	}
	b := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb, DeltaSize: 8})
	r := core.NewRunner(b, tb, &core.Options{Logger: quiet, Concurrency: 1})
	s := serve(t, r, b, &effects{}, &Options{
		ReconnectWindow: -1, // stopped as soon as its page goes
		RunOptions:      func(*http.Request) *core.RunOptions { return &core.RunOptions{MaxSteps: maxSteps} },
	})
	resp := s.post(t, "ann", userMessage("c1", "order 7?"))
	<-running
	resp.Body.Close() // the page goes: the run stops
	<-stopped
	again := s.reconnect(t, "ann", "c1") // and comes back before the run ended
	readUntil(t, again, `"type":"start"`)
	close(goOn)
	rest := readAll(t, again)
	s.h.turns.Wait()
	// The interrupted lookup runs again as the run resumes: one more.
	if n := int(calls.Load()); n > maxSteps+1 {
		t.Errorf("the lookup ran %d times, want at most %d (MaxSteps, and the interrupted call again):\n%s", n, maxSteps+1, rest)
	}
	if !strings.Contains(rest, "reached a limit") {
		t.Errorf("the answer does not end at the step limit:\n%s", rest)
	}
}
