package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/corestream"
)

// echoRunner is a Runner other than core's, as temporal.Runner is: it
// names a new run's thread before the run (w1, w2, …), its events carry
// the service's thread (svc), and it has no journal.
type echoRunner struct {
	mu      sync.Mutex
	threads []string // the thread each run was asked to continue ("" for new)
	during  func()   // called in the middle of each run
}

func (e *echoRunner) Stream(ctx context.Context, input string, opts *core.RunOptions) *core.Stream {
	e.mu.Lock()
	e.threads = append(e.threads, opts.Thread)
	thread := opts.Thread
	if thread == "" {
		thread = "w" + itoa(len(e.threads))
	}
	e.mu.Unlock()
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		if opts.Held != nil {
			opts.Held()
		}
		text := "echo: " + input
		if !yield(core.Event{Kind: core.EventTextDelta, Thread: "svc", Item: "m", Text: text}, nil) {
			return &core.Result{Thread: thread}, core.ErrStreamStopped
		}
		e.during()
		yield(core.Event{Kind: core.EventTextDone, Item: "m", Text: text}, nil)
		yield(core.Event{Kind: core.EventRunFinished}, nil)
		return &core.Result{Thread: thread, Text: text}, nil
	})
}

func (e *echoRunner) ResumeStream(ctx context.Context, thread string, opts *core.RunOptions) *core.Stream {
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		yield(core.Event{Kind: core.EventRunFinished}, nil)
		return &core.Result{Thread: thread}, nil
	})
}

func (e *echoRunner) Approvals(context.Context, string) ([]core.Approval, error) { return nil, nil }

func (e *echoRunner) Decide(context.Context, string, string, core.Decision) error { return nil }

// TestOtherRunner: Handler serves a Runner that is not core's: the chat's
// answer is the runner's, and the chat's next message continues the
// thread the runner named before the run, not the service's its events
// carry: so the chat's record says from the run's first event on, kept in
// this process's memory since the runner has no journal.
func TestOtherRunner(t *testing.T) {
	var during []string // the chat's thread, as its record says in the middle of each run
	r := &echoRunner{}
	h := Handler(r, &Options{Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }, Logger: quiet}).(*handler)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.turns.Wait()
	})
	r.during = func() {
		rec, err := h.store.load(t.Context(), "c1")
		if err != nil {
			t.Error(err)
		}
		during = append(during, rec.Thread)
	}
	s := &testServer{Server: srv, h: h}
	for _, text := range []string{"hello", "again"} {
		if got := texts(readAll(t, s.post(t, "ana", userMessage("c1", text)))); got != "echo: "+text {
			t.Errorf("answer to %q = %q, want the runner's echo", text, got)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if diff := cmp.Diff([]string{"", "w1"}, r.threads); diff != "" {
		t.Errorf("threads the runs continued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"w1", "w1"}, during); diff != "" {
		t.Errorf("the chat's thread in the middle of each run (-want +got):\n%s", diff)
	}
}
