package core

import (
	"context"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// backendNotePrefix begins the name of every note a backend keeps, so that
// none meets one of the runner's own (origin, conversation, totals).
const backendNotePrefix = "backend."

// backendNotes are the journal's notes as the runner's backend keeps them
// ([driver.ThreadNotes]): under the backend's name, each name prefixed.
type backendNotes struct {
	n       journaldriver.Notes
	backend string
}

func (b backendNotes) SetNote(ctx context.Context, thread, name, value string) error {
	return b.n.SetNote(ctx, b.backend, thread, backendNotePrefix+name, value)
}

func (b backendNotes) Note(ctx context.Context, thread, name string) (string, bool, error) {
	return b.n.Note(ctx, b.backend, thread, backendNotePrefix+name)
}

// withBackendNotes returns ctx carrying the journal's notes for the
// backend's calls, when the journal keeps notes; otherwise ctx carries
// none (a run inside a tool of another runner's run does not see that
// runner's).
func (r *Runner) withBackendNotes(ctx context.Context) context.Context {
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok {
		if driver.ThreadNotesFrom(ctx) == nil {
			return ctx
		}
		return driver.WithThreadNotes(ctx, nil)
	}
	return driver.WithThreadNotes(ctx, backendNotes{n: n, backend: r.b.Name()})
}
