package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// TestContinueBusyThread: while a run works on a thread, a run with
// NoWait continuing or resuming it, from the same runner or from another
// sharing the journal, fails at once with ErrThreadBusy
// (FailedPrecondition), sending nothing and never saying it held the
// thread; once the run is over, the thread is continued.
func TestContinueBusyThread(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{{Text: "Hello."}}},
		{Steps: []coretest.Step{{Calls: []coretest.Call{{Name: "wait", Arguments: []byte(`{}`)}}}, {Text: "Waited."}}},
		{Steps: []coretest.Step{{Text: "Again."}}},
	}}
	entered, release := make(chan struct{}), make(chan struct{})
	wait := mustTool(t)(core.NewTool("wait", "Wait.", func(context.Context, struct{}) (string, error) {
		close(entered)
		<-release
		return "waited", nil
	}, nil))
	tools, err := core.NewToolbox(wait)
	if err != nil {
		t.Fatal(err)
	}
	backend := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})
	journal := journaldriver.NewMemory()
	a := core.NewRunner(backend, tools, &core.Options{Logger: quiet, Journal: journal})
	b := core.NewRunner(backend, tools, &core.Options{Logger: quiet, Journal: journal})
	t.Cleanup(func() { a.Close(); b.Close() })
	first, err := a.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	thread := first.Thread
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(t.Context(), "wait", &core.RunOptions{Thread: thread})
		done <- err
	}()
	<-entered
	sent := len(backend.Received())
	for _, tc := range []struct {
		name   string
		runner *core.Runner
		resume bool
	}{
		{"continue, same runner", a, false},
		{"continue, other runner", b, false},
		{"resume, same runner", a, true},
		{"resume, other runner", b, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := false
			ro := &core.RunOptions{Thread: thread, NoWait: true, Held: func() { held = true }}
			var err error
			if tc.resume {
				_, err = tc.runner.Resume(t.Context(), thread, ro)
			} else {
				_, err = tc.runner.Run(t.Context(), "again", ro)
			}
			if !errors.Is(err, core.ErrThreadBusy) || errcode.Of(err) != errcode.FailedPrecondition {
				t.Errorf("err = %v, want ErrThreadBusy (FailedPrecondition)", err)
			}
			if held {
				t.Error("Held was called")
			}
			if n := len(backend.Received()); n != sent {
				t.Errorf("the service received %d more requests", n-sent)
			}
		})
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	held := false
	res, err := b.Run(t.Context(), "again", &core.RunOptions{Thread: thread, NoWait: true, Held: func() { held = true }})
	if err != nil || res.Text != "Again." || !held {
		t.Errorf("after the run: %+v, %v, held %v; want the answer, the thread held", res, err, held)
	}
}
