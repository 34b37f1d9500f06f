package driver

import (
	"context"
	"time"
)

// Fenced is implemented by journals that keep runs ([Runs]) and can fence
// a call's claim with the record of the run it is made for. A worker that
// stalls past its run's lease (a long pause, a journal that timed out its
// renewals) loses the run to another worker, which may finish it and have
// a prune delete its calls' entries; a plain [Journal.Claim] of one of
// those calls by the stalled worker then finds no entry, creates one and
// runs the call's handler a second time. A fenced claim is refused instead:
// the runner claims every call of a recorded run through ClaimFenced when
// its journal implements Fenced. [Memory] implements it, as the SQLite and
// PostgreSQL journals do; a journal that keeps runs without it leaves that
// gap open. A journal that wraps another and changes its Claim must change
// ClaimFenced too (or not offer it), as with [Unsynced]: the runner calls
// ClaimFenced instead of Claim or ClaimUnsynced.
type Fenced interface {
	// ClaimFenced is Claim ([Unsynced.ClaimUnsynced] when req.Unsynced is
	// set and the journal implements [Unsynced]) of req's call. When
	// req.Run is not empty, it first checks, atomically with the claim
	// (in the same transaction), that the record of the run
	// (req.Key.Backend, req.Run) is running under req.Owner; if it is
	// not (another worker took the run over, it ended or paused, or there
	// is no record), it returns an error matching ErrLeaseLost, creating
	// no entry and returning none. The record's lease is not compared with
	// the clock: a run whose lease expired is its owner's until another
	// worker takes it over (Runs.ClaimRuns). With req.Run empty it is
	// Claim.
	ClaimFenced(ctx context.Context, req ClaimRequest) (Entry, bool, error)
}

// A ClaimRequest is a fenced claim of a call (see [Fenced]).
type ClaimRequest struct {
	// Key, Digest, IdempotencyKey, Owner and Lease are [Journal.Claim]'s
	// arguments.
	Key            Key
	Digest         string
	IdempotencyKey string
	Owner          string
	Lease          time.Duration
	// Run, when not empty, is the thread of the record of the run the
	// claim is made for (in Key.Backend); it fences the claim.
	Run string
	// Unsynced asks for [Unsynced.ClaimUnsynced]'s durability: the claim
	// need not wait for the disk.
	Unsynced bool
}

var _ Fenced = (*Memory)(nil)

// ClaimFenced implements [Fenced].
func (j *Memory) ClaimFenced(ctx context.Context, req ClaimRequest) (Entry, bool, error) {
	if req.Run == "" {
		return j.Claim(ctx, req.Key, req.Digest, req.IdempotencyKey, req.Owner, req.Lease)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.runs[runKey{req.Key.Backend, req.Run}]; r == nil || r.State != RunRunning || r.Owner != req.Owner {
		return Entry{}, false, ErrLeaseLost
	}
	return j.claimLocked(req.Key, req.Digest, req.IdempotencyKey, req.Owner, req.Lease)
}
