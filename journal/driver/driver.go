// Package driver defines the interface a journal implements: the store in
// which the runner keeps every call's claim and result, so that a result
// computed once is never computed again. Application code does not use this
// package; it opens a journal through package journal. Journal authors
// implement [Journal], register a URL scheme with journal.Register, and test
// their journal with package journal/journaltest. [NewMemory] is the
// runner's default journal.
package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	coredriver "github.com/toolrelay/toolrelay/core/driver"
)

// A Journal keeps the result of every call, so that a result computed once
// is never computed again: after a disconnect or a crash, a kept result is
// sent again with the same ids and idempotency key. The runner claims a call
// (state Started) before its handler runs, records the result (Succeeded or
// Failed) before it is sent, and marks it Submitted once the service has
// accepted it. A call found Started whose lease has expired is in doubt:
// its handler may or may not have taken effect (see [ToolOptions]).
//
// Implementations must be safe for concurrent use, and Claim and TakeOver
// must be atomic: of several owners racing for a key, one wins. This package
// provides [NewMemory]; durable journals are opened through package journal.
type Journal interface {
	// Claim creates the entry for key in state Started, owned by owner until
	// the lease ends, unless an entry exists. It returns the entry as stored
	// and whether this call created it.
	Claim(ctx context.Context, key Key, digest, idempotencyKey, owner string, lease time.Duration) (Entry, bool, error)
	// Renew extends owner's lease on a Started entry. It returns an error
	// matching ErrLeaseLost if the entry is no longer owner's.
	Renew(ctx context.Context, key Key, owner string, lease time.Duration) error
	// TakeOver gives a Started entry whose lease has expired to owner, with a
	// new lease. It reports whether it did; false means the entry is not in
	// doubt any more (another owner took it, or it finished).
	TakeOver(ctx context.Context, key Key, owner string, lease time.Duration) (bool, error)
	// Release deletes a Started entry owned by owner whose handler stopped
	// without a result (its run was canceled), so the call can run again.
	Release(ctx context.Context, key Key, owner string) error
	// Finish records the result of a Started entry owned by owner, moving it
	// to Succeeded or Failed. It returns an error matching ErrLeaseLost if
	// the entry is no longer owner's.
	Finish(ctx context.Context, key Key, owner string, result Result) error
	// MarkSubmitted moves finished entries to Submitted. Keys that are not
	// finished are left alone. It may return before the marks are written
	// (a lost mark only makes a resumed run send the result again without
	// saying it was sent), provided the journal's own Get, and its next
	// writes, see them.
	MarkSubmitted(ctx context.Context, keys []Key) error
	// Get returns the entry for key, and whether there is one.
	Get(ctx context.Context, key Key) (Entry, bool, error)
	// Prune deletes the entries with a result last updated before t (and,
	// in a journal that keeps approvals, the approvals decided before t;
	// in one that keeps notes, the notes set before t; in one that keeps
	// runs, the ended runs last updated before t) and returns how many
	// entries it deleted. Whatever t, it never deletes what a run that is
	// not over may still need: a Started entry; in a journal that keeps
	// runs, a result (Submitted too: a resume that read the thread before
	// it was sent sends it again), a decided approval, or a note, of a
	// thread whose run is running or awaiting approval (see [Runs]); a
	// pending approval; a run that has not ended.
	Prune(ctx context.Context, before time.Time) (int, error)
}

// ErrLeaseLost is matched (with [errors.Is]) by errors a Journal returns when
// an owner acts on an entry, or a run, it no longer owns (see [Runs] and
// [Fenced]).
var ErrLeaseLost = errors.New("journal: lease lost")

// Key identifies a call in a journal.
type Key struct {
	// Backend is the backend's name.
	Backend string
	// Thread is the session or conversation (as the backend keys it).
	Thread string
	// Turn is the turn or response; it may be empty.
	Turn string
	// Call is the service's call id.
	Call string
}

// State is the state of a journal entry.
type State int

// The states of an entry, in order.
const (
	// Started: a handler was claimed for the call and may be running.
	Started State = iota + 1
	// Succeeded: the call has a result.
	Succeeded
	// Failed: the call has a failed result.
	Failed
	// Submitted: the service accepted the call's result.
	Submitted
)

var stateNames = [...]string{Started: "started", Succeeded: "succeeded", Failed: "failed", Submitted: "submitted"}

// String returns the state's name, such as "started".
func (s State) String() string {
	if s > 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Finished reports whether the entry holds a result.
func (s State) Finished() bool { return s >= Succeeded }

// Entry is what a journal holds for one call.
type Entry struct {
	Key Key
	// Digest is the SHA-256 of the call's canonical arguments.
	Digest string
	// IdempotencyKey goes with every submission of the result.
	IdempotencyKey string
	State          State
	// Owner and LeaseUntil say who may run the call, until when.
	Owner      string
	LeaseUntil time.Time
	// Result is set once the state is Succeeded, Failed or Submitted. A
	// journal that reads a finished entry without one (a damaged row)
	// returns an error whose code is errcode.DataLoss instead; the
	// runner treats such an entry the same way, without running the call
	// again (see journaltest.RunDamaged).
	Result *Result
	// Created and Updated are when the entry was made and last changed.
	Created, Updated time.Time
}

// Result is the result of a call as a journal keeps it.
type Result struct {
	Output  coredriver.Output  `json:"output"`
	Failed  bool               `json:"failed,omitempty"`
	Error   string             `json:"error,omitempty"`
	Outcome coredriver.Outcome `json:"outcome,omitempty"`
}

// IdempotencyKey returns the idempotency key of a call: 32 hex digits
// derived from its journal key and argument digest, so every process that
// computes it for the same call gets the same key.
func IdempotencyKey(key Key, digest string) string {
	h := sha256.New()
	for _, s := range []string{key.Backend, key.Thread, key.Turn, key.Call, digest} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// NewMemory returns a journal that keeps entries in memory. It
// survives disconnects but not the process; it is the runner's default.
func NewMemory() *Memory {
	return &Memory{entries: make(map[Key]*Entry), now: time.Now}
}

// Memory is a [Journal] held in memory. Its zero value is not usable;
// call [NewMemory].
type Memory struct {
	mu        sync.Mutex
	entries   map[Key]*Entry
	approvals map[Key]*Approval
	notes     map[noteKey]note
	runs      map[runKey]*Run
	now       func() time.Time
}

var _ Journal = (*Memory)(nil)

// Claim implements [Journal].
func (j *Memory) Claim(_ context.Context, key Key, digest, idem, owner string, lease time.Duration) (Entry, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.claimLocked(key, digest, idem, owner, lease)
}

// claimLocked is Claim, with j.mu held.
func (j *Memory) claimLocked(key Key, digest, idem, owner string, lease time.Duration) (Entry, bool, error) {
	if e, ok := j.entries[key]; ok {
		return copyEntry(e), false, nil
	}
	now := j.now()
	e := &Entry{Key: key, Digest: digest, IdempotencyKey: idem, State: Started, Owner: owner, LeaseUntil: now.Add(lease), Created: now, Updated: now}
	j.entries[key] = e
	return copyEntry(e), true, nil
}

// Renew implements [Journal].
func (j *Memory) Renew(_ context.Context, key Key, owner string, lease time.Duration) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, err := j.owned(key, owner)
	if err != nil {
		return err
	}
	e.LeaseUntil = j.now().Add(lease)
	return nil
}

// TakeOver implements [Journal].
func (j *Memory) TakeOver(_ context.Context, key Key, owner string, lease time.Duration) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[key]
	now := j.now()
	if !ok || e.State != Started || now.Before(e.LeaseUntil) {
		return false, nil
	}
	e.Owner, e.LeaseUntil, e.Updated = owner, now.Add(lease), now
	return true, nil
}

// Release implements [Journal].
func (j *Memory) Release(_ context.Context, key Key, owner string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.owned(key, owner); err != nil {
		return err
	}
	delete(j.entries, key)
	return nil
}

// Finish implements [Journal].
func (j *Memory) Finish(_ context.Context, key Key, owner string, r Result) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, err := j.owned(key, owner)
	if err != nil {
		return err
	}
	e.State = Succeeded
	if r.Failed {
		e.State = Failed
	}
	e.Result = &r
	e.Updated = j.now()
	return nil
}

// MarkSubmitted implements [Journal].
func (j *Memory) MarkSubmitted(_ context.Context, keys []Key) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	for _, k := range keys {
		if e, ok := j.entries[k]; ok && e.State.Finished() {
			e.State, e.Updated = Submitted, now
		}
	}
	return nil
}

// Get implements [Journal].
func (j *Memory) Get(_ context.Context, key Key) (Entry, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[key]
	if !ok {
		return Entry{}, false, nil
	}
	return copyEntry(e), true, nil
}

// Prune implements [Journal].
func (j *Memory) Prune(_ context.Context, before time.Time) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, k := range slices.Collect(maps.Keys(j.entries)) {
		if e := j.entries[k]; e.State.Finished() && e.Updated.Before(before) && !j.live(k.Backend, k.Thread) {
			delete(j.entries, k)
			n++
		}
	}
	for k, a := range j.approvals {
		if a.Decision != nil && a.Decision.At.Before(before) && !j.live(k.Backend, k.Thread) {
			delete(j.approvals, k)
		}
	}
	for k, nt := range j.notes {
		if nt.updated.Before(before) && !j.live(k.backend, k.thread) {
			delete(j.notes, k)
		}
	}
	for k, r := range j.runs {
		if r.State.Ended() && r.Updated.Before(before) {
			delete(j.runs, k)
		}
	}
	return n, nil
}

// live reports whether the thread of backend has a run that is not over:
// running, or awaiting approval.
func (j *Memory) live(backend, thread string) bool {
	r := j.runs[runKey{backend, thread}]
	return r != nil && !r.State.Ended()
}

// Forget deletes the submitted entries of keys, and the notes of their
// threads. The runner calls it on the memory journal it made itself once
// a run has its answer: no resume will ask for those calls again.
func (j *Memory) Forget(keys []Key) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.notes) > 0 {
		threads := make(map[runKey]bool, len(keys))
		for _, k := range keys {
			threads[runKey{k.Backend, k.Thread}] = true
		}
		for k := range j.notes {
			if threads[runKey{k.backend, k.thread}] {
				delete(j.notes, k)
			}
		}
	}
	for _, k := range keys {
		delete(j.approvals, k)
		if e := j.entries[k]; e != nil && e.State == Submitted {
			delete(j.entries, k)
		}
	}
}

func (j *Memory) owned(key Key, owner string) (*Entry, error) {
	e, ok := j.entries[key]
	if !ok || e.State != Started || e.Owner != owner {
		return nil, ErrLeaseLost
	}
	return e, nil
}

func copyEntry(e *Entry) Entry {
	c := *e
	if e.Result != nil {
		r := *e.Result
		c.Result = &r
	}
	return c
}
