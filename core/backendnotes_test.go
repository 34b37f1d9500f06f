package core_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// notingBackend notes, on each step, the step's thread under "seen", and
// records what each Resume reads back.
type notingBackend struct {
	*coretest.Backend
	read []string // the "seen" note of each resumed thread, "" for none
}

func (b *notingBackend) note(ctx context.Context, step *driver.Step, err error) (*driver.Step, error) {
	if n := driver.ThreadNotesFrom(ctx); n != nil && step != nil && step.Thread != "" {
		if err := n.SetNote(ctx, step.Thread, "seen", "yes:"+step.Thread); err != nil {
			return nil, err
		}
	}
	return step, err
}

func (b *notingBackend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	step, err := b.Backend.Start(ctx, req)
	return b.note(ctx, step, err)
}

func (b *notingBackend) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	v := ""
	if n := driver.ThreadNotesFrom(ctx); n != nil {
		v, _, _ = n.Note(ctx, thread, "seen")
	}
	b.read = append(b.read, v)
	return b.Backend.Resume(ctx, thread)
}

// TestBackendNotes: a backend's notes about a thread, made in one runner's
// run, are read by another runner that shares only the journal (a resume
// in a new process), under the backend's name, and never in place of the
// runner's own notes; a runner whose journal keeps no notes gives the
// backend none.
func TestBackendNotes(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "book", Arguments: json.RawMessage(`{}`)}}},
		{Text: "booked"},
	}}}}
	book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) { return "booked", nil }, nil))
	tools, _ := core.NewToolbox(book)
	ctx := context.Background()

	mem := journaldriver.NewMemory()
	b1 := &notingBackend{Backend: coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})}
	res, err := core.NewRunner(b1, tools, &core.Options{Journal: mem, Logger: quiet}).Run(ctx, "book", nil)
	if err != nil {
		t.Fatal(err)
	}
	b2 := &notingBackend{Backend: b1.Backend}
	if _, err := core.NewRunner(b2, tools, &core.Options{Journal: mem, Logger: quiet}).Resume(ctx, res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"yes:" + res.Thread}, b2.read); diff != "" {
		t.Errorf("notes read on resume (-want +got):\n%s", diff)
	}
	v, ok, err := mem.Note(ctx, b1.Name(), res.Thread, "seen")
	if err != nil || ok {
		t.Errorf(`the backend's note is kept under its own name: the runner's name "seen" = %q, %v, %v; want none`, v, ok, err)
	}

	// A journal without notes: the backend is given none.
	b3 := &notingBackend{Backend: b1.Backend}
	if _, err := core.NewRunner(b3, tools, &core.Options{Journal: noNotes{journaldriver.NewMemory()}, Logger: quiet}).Resume(ctx, res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{""}, b3.read); diff != "" {
		t.Errorf("notes read without a notes journal (-want +got):\n%s", diff)
	}
}

// noNotes is a journal that keeps no notes.
type noNotes struct{ journaldriver.Journal }
