package core_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/corestream"
)

// TestStreamThread: a Stream's Thread is the thread it continues or
// resumes from the start; a new run's is the service's once it ran.
func TestStreamThread(t *testing.T) {
	r, _ := streamRunner(t, &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{{Text: "one"}}},
		{Steps: []coretest.Step{{Text: "two"}}},
	}}, 0)
	st := r.Stream(t.Context(), "hi", nil)
	if got := st.Thread(); got != "" {
		t.Errorf("a new run's Thread before it ran = %q, want \"\"", got)
	}
	res, err := st.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Thread == "" || st.Thread() != res.Thread {
		t.Errorf("a new run's Thread after it ran = %q, want the result's %q", st.Thread(), res.Thread)
	}
	next := r.Stream(t.Context(), "again", &core.RunOptions{Thread: res.Thread})
	if got := next.Thread(); got != res.Thread {
		t.Errorf("a continued run's Thread = %q, want %q", got, res.Thread)
	}
	if _, err := next.Result(); err != nil {
		t.Fatal(err)
	}
	if got := r.ResumeStream(t.Context(), "thread_x", nil).Thread(); got != "thread_x" {
		t.Errorf("a resume's Thread = %q, want thread_x", got)
	}
}

// TestNewStream: a Stream made by corestream.New (core's newStream) yields what its run yields,
// once, stops it when the reader stops, and returns its result.
func TestNewStream(t *testing.T) {
	failed := errors.New("it failed")
	runs := 0
	run := func(yield func(core.Event, error) bool) (*core.Result, error) {
		runs++
		if !yield(core.Event{Kind: core.EventTextDelta, Text: "a"}, nil) {
			return &core.Result{Thread: "w1"}, core.ErrStreamStopped
		}
		yield(core.Event{Kind: core.EventRunFinished, Err: failed}, failed)
		return &core.Result{Thread: "w1", Text: "a"}, failed
	}
	st := corestream.New("w1", run)
	if got := st.Thread(); got != "w1" {
		t.Errorf("Thread = %q, want w1", got)
	}
	var got []string
	for ev := range st.Events() {
		got = append(got, describe(ev))
	}
	if diff := cmp.Diff([]string{"text_delta a", "run_finished Unknown"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res, err := st.Result(); !errors.Is(err, failed) || res.Text != "a" {
		t.Errorf("Result = %+v, %v; want the run's", res, err)
	}
	for ev, err := range st.Events() {
		if ev.Kind != core.EventRunFinished || err == nil {
			t.Errorf("a second range yielded %v, %v; want run_finished with an error", ev.Kind, err)
		}
	}
	stopped := corestream.New("", run)
	for range stopped.Events() {
		break
	}
	if _, err := stopped.Result(); !errors.Is(err, core.ErrStreamStopped) {
		t.Errorf("a stopped reader's Result error = %v, want ErrStreamStopped", err)
	}
	if stopped.Thread() != "w1" {
		t.Errorf("Thread of a stream named none = %q, want its result's w1", stopped.Thread())
	}
	if runs != 2 {
		t.Errorf("the runs ran %d times, want 2 (once per stream)", runs)
	}
}
