package driver

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Runs is implemented by journals that keep a record of each run, so that
// a run whose worker died (its lease expired) can be found and taken over
// by another worker sharing the journal. [Memory] implements it.
type Runs interface {
	// PutRun records r for its (Backend, Thread): created, or, when there
	// is one, updated (state, owner, lease, options, error), unless that
	// one is running under another owner whose lease has not ended: then
	// it returns an error matching ErrLeaseLost, changing nothing. So a
	// run of a thread is taken by one worker at a time.
	PutRun(ctx context.Context, r Run) error
	// EndRun records that owner's run of (backend, thread) ended in state,
	// with errText for a failed one. It returns an error matching
	// ErrLeaseLost, changing nothing, when the run is not owner's any more
	// (another worker took it over).
	EndRun(ctx context.Context, backend, thread, owner string, state RunState, errText string) error
	// MoveRun moves owner's running run of (backend, from) to the thread
	// to, with options in place of its own, at once: no moment sees both
	// records, or neither (a run recorded before its thread existed moves
	// to it). It returns an error matching ErrLeaseLost, changing nothing,
	// when the run is not running under owner any more.
	MoveRun(ctx context.Context, backend, from, to, owner, options string) error
	// RenewRun sets owner's lease on the running run of (backend,
	// thread) to end lease from now. A lease of 0 ends it at once, the run
	// left running: another owner's PutRun takes it, and ClaimRuns hands
	// it out, without waiting (a worker that recorded a decision lets the
	// run go this way: see core's Runner.Decide). It returns an error
	// matching ErrLeaseLost when the run is not running under owner any
	// more.
	RenewRun(ctx context.Context, backend, thread, owner string, lease time.Duration) error
	// WakeRun records owner's run of (backend, thread), if it is awaiting
	// approval, as running under owner with a lease ending lease from
	// now, and reports whether it did; a run in another state, or none,
	// is left as it is. A worker that records a decision wakes the run
	// this way (see core's Runner.Decide), so that if the worker stops
	// before it lets the run go (RenewRun), the lease expires and another
	// worker takes the run over (ClaimRuns): a run whose every call is
	// decided is never left parked.
	WakeRun(ctx context.Context, backend, thread, owner string, lease time.Duration) (bool, error)
	// ClaimRuns gives owner, with a new lease, at most limit runs of
	// backend that are running and whose lease expired, oldest lease
	// first, and returns them as updated. Of several owners claiming at
	// once, each run goes to one.
	ClaimRuns(ctx context.Context, backend, owner string, lease time.Duration, limit int) ([]Run, error)
	// ListRuns returns at most limit runs of backend ("" for every
	// backend) in state ("" for any), oldest first.
	ListRuns(ctx context.Context, backend string, state RunState, limit int) ([]Run, error)
}

// RunState is the state of a run record.
type RunState string

// The states of a run.
const (
	// RunRunning: a worker runs it, under a lease it renews.
	RunRunning RunState = "running"
	// RunAwaiting: it paused for a person's decision (no lease); the
	// decision that leaves no call awaiting one wakes it (WakeRun).
	RunAwaiting RunState = "awaiting_approval"
	// RunFinished: it ended with the model's answer.
	RunFinished RunState = "finished"
	// RunFailed: it ended with an error (Error says which).
	RunFailed RunState = "failed"
	// RunContinued: its thread moved on (a chain's next response); the
	// run goes on under the new thread's record.
	RunContinued RunState = "continued"
)

// Ended reports whether a run in state s is over.
func (s RunState) Ended() bool {
	return s == RunFinished || s == RunFailed || s == RunContinued
}

// A Run is the record of a run.
type Run struct {
	// Backend and Thread identify the run: the thread it waits on, or,
	// before the request that creates it, a name the runner gives the run
	// ("toolrelay-start:" and an id; the record then keeps the run's
	// input in Options, and moves to the thread once it exists).
	Backend, Thread string
	State           RunState
	// Owner is the worker running it; LeaseUntil when its claim ends.
	Owner      string
	LeaseUntil time.Time
	// Options is what the runner needs to go on with the run (opaque).
	Options string
	// Error is the error that ended a failed run.
	Error string
	// Created and Updated are when the record was made and last changed.
	Created, Updated time.Time
}

type runKey struct{ backend, thread string }

var _ Runs = (*Memory)(nil)

// PutRun implements [Runs].
func (j *Memory) PutRun(_ context.Context, r Run) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.runs == nil {
		j.runs = map[runKey]*Run{}
	}
	now := j.now()
	k := runKey{r.Backend, r.Thread}
	if old, ok := j.runs[k]; ok {
		if old.State == RunRunning && old.Owner != r.Owner && now.Before(old.LeaseUntil) {
			return ErrLeaseLost
		}
		r.Created = old.Created
	} else {
		r.Created = now
	}
	r.Updated = now
	j.runs[k] = &r
	return nil
}

// EndRun implements [Runs].
func (j *Memory) EndRun(_ context.Context, backend, thread, owner string, state RunState, errText string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.runs[runKey{backend, thread}]
	if r == nil || r.Owner != owner {
		return ErrLeaseLost
	}
	r.State, r.Error, r.LeaseUntil, r.Updated = state, errText, time.Time{}, j.now()
	return nil
}

// MoveRun implements [Runs].
func (j *Memory) MoveRun(_ context.Context, backend, from, to, owner, options string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.runs[runKey{backend, from}]
	if r == nil || r.State != RunRunning || r.Owner != owner {
		return ErrLeaseLost
	}
	delete(j.runs, runKey{backend, from})
	r.Thread, r.Options, r.Updated = to, options, j.now()
	j.runs[runKey{backend, to}] = r
	return nil
}

// RenewRun implements [Runs].
func (j *Memory) RenewRun(_ context.Context, backend, thread, owner string, lease time.Duration) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.runs[runKey{backend, thread}]
	if r == nil || r.State != RunRunning || r.Owner != owner {
		return ErrLeaseLost
	}
	r.LeaseUntil, r.Updated = j.now().Add(lease), j.now()
	return nil
}

// WakeRun implements [Runs].
func (j *Memory) WakeRun(_ context.Context, backend, thread, owner string, lease time.Duration) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.runs[runKey{backend, thread}]
	if r == nil || r.State != RunAwaiting {
		return false, nil
	}
	now := j.now()
	r.State, r.Owner, r.LeaseUntil, r.Updated = RunRunning, owner, now.Add(lease), now
	return true, nil
}

// ClaimRuns implements [Runs].
func (j *Memory) ClaimRuns(_ context.Context, backend, owner string, lease time.Duration, limit int) ([]Run, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	var due []*Run
	for k, r := range j.runs {
		if k.backend == backend && r.State == RunRunning && !now.Before(r.LeaseUntil) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *Run) int {
		if c := a.LeaseUntil.Compare(b.LeaseUntil); c != 0 {
			return c
		}
		return strings.Compare(a.Thread, b.Thread)
	})
	var out []Run
	for _, r := range due[:min(len(due), max(limit, 0))] {
		r.Owner, r.LeaseUntil, r.Updated = owner, now.Add(lease), now
		out = append(out, *r)
	}
	return out, nil
}

// ListRuns implements [Runs].
func (j *Memory) ListRuns(_ context.Context, backend string, state RunState, limit int) ([]Run, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Run
	for k, r := range j.runs {
		if (backend == "" || k.backend == backend) && (state == "" || r.State == state) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Run) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Thread, b.Thread)
	})
	return out[:min(len(out), max(limit, 0))], nil
}
