package driver

import (
	"context"
	"time"
)

// Unsynced is implemented by durable journals that can write a call's
// claim and result without waiting for the disk. The runner uses it for
// the calls of tools that may run twice (declared idempotent or read-only):
// a claim or a result of such a call lost to a power loss only makes the
// call run again, which its tool allows, so neither needs a sync of its
// own.
//
// The writes must still survive the process being killed, as every write
// of the journal does, and keep their order: a later write that waits for
// the disk makes them durable too (a write-ahead log written in order does
// this by itself). Apart from the sync, each method behaves exactly as the
// [Journal] method of the same name without the suffix.
type Unsynced interface {
	// ClaimUnsynced is [Journal.Claim], not waiting for the disk.
	ClaimUnsynced(ctx context.Context, key Key, digest, idempotencyKey, owner string, lease time.Duration) (Entry, bool, error)
	// FinishUnsynced is [Journal.Finish], not waiting for the disk.
	FinishUnsynced(ctx context.Context, key Key, owner string, result Result) error
}

// Stats counts the writes of a journal since it was opened. A durable
// journal reports them through a Stats method (see [Stater]), so that
// programs and benchmarks can see what durability costs: the syncs are the
// dearest part of a call.
type Stats struct {
	// Writes counts the writes made: claims, takeovers, results, marks,
	// run records and the rest, one for each method call that wrote.
	Writes int64
	// Commits counts the transactions that committed them: fewer than
	// Writes when writes share transactions (group commit).
	Commits int64
	// Syncs counts the commits that waited for the disk before the
	// journal reported them done.
	Syncs int64
}

// A Stater reports its journal's [Stats].
type Stater interface {
	Stats() Stats
}
