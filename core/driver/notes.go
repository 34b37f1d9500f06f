package driver

import "context"

// ThreadNotes keeps short notes about the threads of one backend where the
// runner keeps its journal, beside the thread's results: what the backend
// must know of a thread that its id does not say (such as the service's
// sandbox session the thread's turns run in), so that a run of the thread
// in another process (a resume after a restart, a takeover) finds what an
// earlier run noted. Notes are pruned with the journal's entries.
//
// The runner puts one in the context of each Start, Submit and Resume when
// its journal keeps notes (see [ThreadNotesFrom]); its names never meet the
// runner's own notes about the thread.
type ThreadNotes interface {
	// SetNote records value under name for thread, in place of any
	// value recorded before; an empty value clears the note.
	SetNote(ctx context.Context, thread, name, value string) error
	// Note returns the value recorded under name for thread, and whether
	// there is one.
	Note(ctx context.Context, thread, name string) (value string, ok bool, err error)
}

type notesKey struct{}

// WithThreadNotes returns ctx carrying n for the backend calls made with
// it. A nil n removes the notes ctx carries.
func WithThreadNotes(ctx context.Context, n ThreadNotes) context.Context {
	return context.WithValue(ctx, notesKey{}, n)
}

// ThreadNotesFrom returns the notes ctx carries, or nil when the runner's
// journal keeps none (the backend then knows only what it keeps itself).
func ThreadNotesFrom(ctx context.Context) ThreadNotes {
	n, _ := ctx.Value(notesKey{}).(ThreadNotes)
	return n
}
