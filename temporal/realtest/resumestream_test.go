package realtest

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/temporal"
)

// TestResumeStream: what package web asks of a runner, on the Temporal
// runner. A streamed turn pauses on a call awaiting approval (Held called
// once the workflow took it); Approvals lists the call; a second turn on
// the thread is refused at once with ErrThreadBusy; once the call is
// decided, ResumeStream follows the turn from its start, past the pause,
// to the answer; after it, ResumeStream replays the last turn.
func TestResumeStream(t *testing.T) {
	r := weatherRunner(t, true)

	held := 0
	opts := &core.RunOptions{Held: func() { held++ }}
	st := r.Stream(t.Context(), "weather?", opts)
	thread := st.Thread()
	if thread == "" {
		t.Fatal("the stream names no thread before it runs")
	}
	kinds := eventKinds(t, st)
	if held != 1 {
		t.Errorf("Held was called %d times, want once", held)
	}
	if kinds[len(kinds)-1] != "run_finished" {
		t.Fatalf("the paused stream's events %v do not end with run_finished", kinds)
	}
	res, err := st.Result()
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 || res.Thread != thread {
		t.Fatalf("Result = %+v, %v; want a pause on thread %s", res, err, thread)
	}
	call := res.Pending[0].Key.Call

	list, err := r.Approvals(t.Context(), thread)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key.Call != call || list[0].Decision != nil || list[0].Tool != "getCurrentWeatherAtLocation" {
		t.Fatalf("Approvals = %+v, want call %s awaiting a decision", list, call)
	}

	_, err = r.Stream(t.Context(), "another", &core.RunOptions{Thread: thread, NoWait: true}).Result()
	if !errors.Is(err, core.ErrThreadBusy) || errcode.Of(err) != errcode.FailedPrecondition {
		t.Fatalf("a second turn on the paused thread: %v (%v), want ErrThreadBusy, FailedPrecondition", err, errcode.Of(err))
	}

	if err := r.Decide(t.Context(), thread, call, core.Decision{Approved: true, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	held = 0
	resumed := r.ResumeStream(t.Context(), thread, opts)
	kinds = eventKinds(t, resumed)
	if held != 1 {
		t.Errorf("Held was called %d times by ResumeStream, want once", held)
	}
	fin, err := resumed.Result()
	if err != nil || fin.Text != weatherAnswer {
		t.Fatalf("ResumeStream's Result = %+v, %v; want the answer", fin, err)
	}
	if n := count(kinds, "run_finished"); n != 1 {
		t.Errorf("the resumed stream has %d run_finished events, want only its end (the pause passed over): %v", n, kinds)
	}
	if n := count(kinds, "approval_requested"); n != 1 {
		t.Errorf("the resumed stream, from the turn's start, has %d approval_requested, want 1: %v", n, kinds)
	}
	list, err = r.Approvals(t.Context(), thread)
	if err != nil || len(list) != 1 || list[0].Decision == nil || !list[0].Decision.Approved {
		t.Errorf("Approvals after the decision = %+v, %v; want the call approved", list, err)
	}

	again := r.ResumeStream(t.Context(), thread, nil)
	if diff := cmp.Diff(kinds, eventKinds(t, again)); diff != "" {
		t.Errorf("ResumeStream once the turn ended replays other events (-first +replay):\n%s", diff)
	}
	if res, err := again.Result(); err != nil || res.Text != weatherAnswer {
		t.Errorf("the replay's Result = %+v, %v; want the answer", res, err)
	}
}

// eventKinds ranges over st and returns its events' kinds.
func eventKinds(t *testing.T, st *core.Stream) []string {
	t.Helper()
	var kinds []string
	for ev := range st.Events() {
		kinds = append(kinds, ev.Kind.String())
	}
	return kinds
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// TestResumeStreamBudget: a streamed turn stopped on its budget goes on
// under ResumeStream as under Resume: with the same budget it stops
// again; with a raised one it runs the held step's calls, streamed, to
// the answer.
func TestResumeStreamBudget(t *testing.T) {
	r := weatherRunner(t, false)

	one := &core.RunOptions{Budget: core.Budget{MaxToolCalls: 1}}
	st := r.Stream(t.Context(), "weather?", one)
	eventKinds(t, st)
	res, err := st.Result()
	if !errors.Is(err, core.ErrBudgetExceeded) || res.ToolCalls != 1 {
		t.Fatalf("Result = %+v, %v; want a stop on the budget after one call", res, err)
	}
	thread := st.Thread()

	again := r.ResumeStream(t.Context(), thread, one)
	eventKinds(t, again)
	if res, err := again.Result(); !errors.Is(err, core.ErrBudgetExceeded) || res.ToolCalls != 1 {
		t.Fatalf("ResumeStream with the same budget: %+v, %v; want the stop again, one call", res, err)
	}

	raised := r.ResumeStream(t.Context(), thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: core.Unlimited}})
	kinds := eventKinds(t, raised)
	fin, err := raised.Result()
	if err != nil || fin.Text != weatherAnswer || fin.ToolCalls != 3 {
		t.Fatalf("ResumeStream with a raised budget: %+v, %v; want the answer after three calls", fin, err)
	}
	if n := count(kinds, "text_delta"); n == 0 {
		t.Errorf("the resumed turn's text was not streamed: %v", kinds)
	}
}

// weatherRunner returns a Temporal runner of the weather bot on the
// in-memory backend, its worker started; approval asks for a decision on
// the weather's call.
func weatherRunner(t *testing.T, approval bool) *temporal.Runner {
	t.Helper()
	tools, err := weatherTools(filepath.Join(t.TempDir(), "effects.log"), 0, approval)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	queue := newQueue(t)
	startWorker(t, c, queue, core.NewRunner(coretest.NewBackend(weatherScript, nil), tools, &core.Options{Logger: quiet}))
	return temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Heartbeat: 5 * time.Second, Idle: time.Minute}})
}
