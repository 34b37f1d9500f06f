package driver

import (
	"context"
	"time"
)

// Notes is implemented by journals that keep short notes about threads,
// such as the trace context of the run that last started a turn on one,
// so that a run resumed in another process can link to it. [Memory]
// implements it. Notes are pruned with the entries: Prune deletes those
// last set before its time.
type Notes interface {
	// SetNote records value under name for a thread of backend, in place
	// of any value recorded before. An empty value clears the note: the
	// journal may keep it empty or delete it.
	SetNote(ctx context.Context, backend, thread, name, value string) error
	// Note returns the value recorded under name for a thread of backend,
	// and whether there is one.
	Note(ctx context.Context, backend, thread, name string) (string, bool, error)
}

// MaxMemoryNotes bounds the notes a [Memory] keeps: past it, setting one
// drops the note set longest ago.
const MaxMemoryNotes = 4096

type noteKey struct{ backend, thread, name string }

type note struct {
	value   string
	updated time.Time
}

var _ Notes = (*Memory)(nil)

// SetNote implements [Notes]; an empty value deletes the note.
func (j *Memory) SetNote(_ context.Context, backend, thread, name, value string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.notes == nil {
		j.notes = map[noteKey]note{}
	}
	k := noteKey{backend, thread, name}
	if value == "" {
		delete(j.notes, k)
		return nil
	}
	if _, ok := j.notes[k]; !ok && len(j.notes) >= MaxMemoryNotes {
		var oldest noteKey
		first := true
		for k, n := range j.notes {
			if first || n.updated.Before(j.notes[oldest].updated) {
				oldest, first = k, false
			}
		}
		delete(j.notes, oldest)
	}
	j.notes[k] = note{value: value, updated: j.now()}
	return nil
}

// Note implements [Notes].
func (j *Memory) Note(_ context.Context, backend, thread, name string) (string, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n, ok := j.notes[noteKey{backend, thread, name}]
	return n.value, ok, nil
}
