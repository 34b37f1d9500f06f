package driver

import (
	"context"
	"slices"
	"strings"
)

// Entries is implemented by journals that can list their entries, for the
// people who operate them (cmd/toolrelay-journal lists the calls in doubt,
// or a thread's calls). [Memory] implements it.
type Entries interface {
	// ListEntries returns at most limit entries that f selects, least
	// recently updated first.
	ListEntries(ctx context.Context, f EntryFilter, limit int) ([]Entry, error)
}

// EntryFilter selects entries for [Entries.ListEntries]; its zero value
// selects every entry.
type EntryFilter struct {
	// Backend and Thread, when not empty, select that backend's or
	// thread's entries.
	Backend, Thread string
	// State, when not zero, selects the entries in that state.
	State State
	// InDoubt selects the entries in doubt: started, their owner's lease
	// ended (by the journal's clock), so that their handler may or may not
	// have taken effect.
	InDoubt bool
}

var _ Entries = (*Memory)(nil)

// ListEntries implements [Entries].
func (j *Memory) ListEntries(_ context.Context, f EntryFilter, limit int) ([]Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	var out []Entry
	for _, e := range j.entries {
		switch {
		case f.Backend != "" && e.Key.Backend != f.Backend,
			f.Thread != "" && e.Key.Thread != f.Thread,
			f.State != 0 && e.State != f.State,
			f.InDoubt && (e.State != Started || now.Before(e.LeaseUntil)):
			continue
		}
		out = append(out, copyEntry(e))
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Updated.Compare(b.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.Key.Call, b.Key.Call)
	})
	return out[:min(len(out), max(limit, 0))], nil
}
