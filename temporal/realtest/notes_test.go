package realtest

import (
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/temporal"
)

// TestNotes: a note set through one runner is read through another of
// its task queue (its own client, as in another process), not through a
// runner of another queue; a new value replaces it; a cleared note is
// gone, and may be cleared again or set anew; a note past the loop's
// MaxPayloadBytes is refused.
func TestNotes(t *testing.T) {
	queue := newQueue(t)
	tools, err := core.NewToolbox()
	if err != nil {
		t.Fatal(err)
	}
	var runners []*temporal.Runner
	for range 2 {
		c := dial(t)
		startWorker(t, c, queue, core.NewRunner(coretest.NewBackend(&coretest.Script{}, nil), tools, &core.Options{Logger: quiet}))
		runners = append(runners, temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Heartbeat: 5 * time.Second, MaxPayloadBytes: 100}}))
	}
	a, b := runners[0], runners[1]
	ctx := t.Context()
	check := func(when, want string, wantOK bool) {
		t.Helper()
		v, ok, err := b.Note(ctx, "web", "web-chat/c", "web")
		if err != nil || v != want || ok != wantOK {
			t.Errorf("%s: Note = %q, %v, %v; want %q, %v, nil", when, v, ok, err, want, wantOK)
		}
	}
	check("before any", "", false)
	for _, step := range []struct{ value, want string }{{"first", "first"}, {"second", "second"}, {"", ""}, {"", ""}, {"third", "third"}} {
		if err := a.SetNote(ctx, "web", "web-chat/c", "web", step.value); err != nil {
			t.Fatalf("SetNote(%q): %v", step.value, err)
		}
		check("after SetNote("+step.value+")", step.want, step.want != "")
	}
	if v, ok, err := b.Note(ctx, "web", "web-chat/d", "web"); err != nil || ok || v != "" {
		t.Errorf("another thread's note: %q, %v, %v; want none", v, ok, err)
	}
	other := temporal.NewRunner(dial(t), &temporal.Options{TaskQueue: newQueue(t)})
	if v, ok, err := other.Note(ctx, "web", "web-chat/c", "web"); err != nil || ok || v != "" {
		t.Errorf("the note, read by a runner of another task queue: %q, %v, %v; want none", v, ok, err)
	}
	err = a.SetNote(ctx, "web", "web-chat/c", "web", strings.Repeat("x", 101))
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("a note past MaxPayloadBytes: %v, want InvalidArgument", err)
	}
	check("after the refused note", "third", true)
}
