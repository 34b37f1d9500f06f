package web

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/journal"
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite: journals
)

// TestFleetOneAnswer checks that two processes sharing one journal (two
// handlers over two runners, each with its own handle on one SQLite
// file) never both answer a chat: while A writes chat c's answer (its
// call held), a new message on c posted to B gets 409, starts nothing and
// changes nothing of c; A's answer ends whole, and then B takes c's next
// message.
func TestFleetOneAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	fx := &effects{block: make(chan struct{})}
	tb := testTools(t, fx)
	script := &coretest.Script{Turns: []coretest.Turn{
		lookupScript.Turns[0],
		{Steps: []coretest.Step{{Text: "Anything else?"}}},
	}}
	service := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb, DeltaSize: 8})
	var servers []*testServer
	for range 2 {
		j, err := journal.Open(t.Context(), "sqlite://"+path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		r := core.NewRunner(service, tb, &core.Options{Logger: quiet, Journal: j})
		servers = append(servers, serve(t, r, service, fx, nil))
	}
	a, b := servers[0], servers[1]
	resp := a.post(t, "ann", userMessage("c", "order 7?"))
	first := readUntil(t, resp, "tool-input-available")
	waitFor(t, "the chat's thread to be recorded", func() bool {
		rec, err := b.h.store.load(t.Context(), "c")
		return err == nil && rec.Thread != ""
	})
	before, err := b.h.store.load(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	sent := len(service.Received())

	busy := b.post(t, "ann", userMessage("c", "and order 8?"))
	body, _ := io.ReadAll(busy.Body)
	busy.Body.Close()
	if busy.StatusCode != http.StatusConflict {
		t.Errorf("a message to B while A answers: status %d (%s), want 409", busy.StatusCode, body)
	}
	b.h.turns.Wait()
	if n := len(service.Received()); n != sent {
		t.Errorf("the service received %d more requests: %v", n-sent, service.Received()[sent:])
	}
	after, err := b.h.store.load(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(encodeRecord(t, before), encodeRecord(t, after)); diff != "" {
		t.Errorf("the chat's record changed (-before +after):\n%s", diff)
	}

	close(fx.block)
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkOnce(t, first+string(rest), lookupAnswer)
	a.h.turns.Wait()

	next := readAll(t, b.post(t, "ann", userMessage("c", "thanks")))
	if got, want := texts(next), "Anything else?"; got != want {
		t.Errorf("B's answer once A's is over: %q, want %q\n%s", got, want, next)
	}
	if n := a.inputs(); n != 2 {
		t.Errorf("%d runs started, want 2 (A's, then B's)", n)
	}
}

// encodeRecord returns rec as the journal keeps it.
func encodeRecord(t *testing.T, rec record) string {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestFleetChatContinues checks that a chat's requests may each go to
// another process sharing the journal (two handlers over two runners,
// each with its own handle on one SQLite file, as two processes behind a
// load balancer): the chat's second message, on B, continues the thread
// of its first, answered on A (the model sees the first turn), and the
// answer to B's approval, back on A, finds the chat paused and finishes
// the answer, though A served the chat moments before.
func TestFleetChatContinues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	fx := &effects{}
	tb := testTools(t, fx)
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{{Text: "Hello! How can I help?"}}},
		refundScript.Turns[0],
	}}
	service := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb, DeltaSize: 8})
	var servers []*testServer
	for _, name := range []string{"a", "b"} {
		j, err := journal.Open(t.Context(), "sqlite://"+path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		r := core.NewRunner(service, tb, &core.Options{Logger: quiet, Journal: j, Concurrency: 1})
		s := serve(t, r, service, fx, nil)
		var n atomic.Int64
		s.h.newID = func() string { return "msg-" + name + strconv.FormatInt(n.Add(1), 10) }
		servers = append(servers, s)
	}
	a, b := servers[0], servers[1]

	if got, want := texts(readAll(t, a.post(t, "ann", userMessage("c", "hi")))), "Hello! How can I help?"; got != want {
		t.Fatalf("A's answer to the first message: %q, want %q", got, want)
	}
	a.h.turns.Wait()
	second := readAll(t, b.post(t, "ann", userMessage("c", "refund 7")))
	if !strings.Contains(second, `"tool-approval-request"`) {
		t.Fatalf("B's answer to the second message asks no approval (a new thread answers with the script's first turn):\n%s", second)
	}
	b.h.turns.Wait()
	ids := approvalIDs(t, b, "c")
	if len(ids) != 1 {
		t.Fatalf("approvals %v, want one", ids)
	}
	resp := a.post(t, "ann", answersMessage("c", "msg-b1", []approvalAnswer{{ID: ids[0], Approved: true}}))
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("the answer to B's approval on A: status %d (%s), want 200", resp.StatusCode, body)
	}
	third := readAll(t, resp)
	if got, want := texts(third), "Done: refunded 150 on order 7."; got != want {
		t.Errorf("A's answer once approved: %q, want %q\n%s", got, want, third)
	}
	a.h.turns.Wait()
	if n := fx.count("7"); n != 1 {
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
