package pgjournal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/group"
)

// The batcher makes the writes of a Journal in batches (group commit,
// package journal/internal/group): writes that arrive while a batch is on
// its way to the server wait, and go together into the next one, which is
// one round trip and one transaction. Concurrent runs' claims and results
// then share a commit, and the server's work for it, instead of each
// paying for its own: with many runs at once, the server's time per
// write, not the network, is what bounds a journal's throughput. A write
// alone costs what it would without batching.
type batcher struct {
	j *Journal
	q group.Queue[*write]
}

// maxWrites bounds the writes of one batch; batchTimeout bounds the time a
// batch may take (it serves several callers, so none of their contexts
// is its own).
const (
	maxWrites    = 128
	batchTimeout = 30 * time.Second
)

// A write is one statement of a caller.
type write struct {
	group.Op
	stmt   string // empty: no statement (a batch of the queue's Later writes alone)
	args   []any
	synced bool                // committed with the server's synchronous_commit
	scan   func(pgx.Row) error // for a statement that returns one row
	lock   string              // the row it locks (see lockOf)
	mark   bool                // a submitted mark (see MarkSubmitted)

	tag pgconn.CommandTag // without scan
	err error
}

func (b *batcher) init(j *Journal) {
	b.j = j
	b.q = group.Queue[*write]{Run: b.run, Max: maxWrites, Empty: func() *write { return &write{} }}
}

// Err returns the write's outcome (group.Write).
func (w *write) Err() error { return w.err }

// run sends the writes of batch, setting each one's outcome. A statement
// the server fails aborts its transaction: that write keeps its error and
// the others are sent again, without it, so that one write's failure is
// not the others'.
func (b *batcher) run(batch []*write) {
	for live := batch; len(live) > 0; {
		bad := b.send(live)
		if bad < 0 {
			return
		}
		live = append(live[:bad:bad], live[bad+1:]...)
	}
}

// maxAttempts bounds the sending of one batch that the server aborts as a
// deadlock (which ordering makes rare: see send).
const maxAttempts = 3

// send sends ws as one batch: one round trip, one implicit transaction
// (the statements of a pipeline before its Sync message), committed with
// synchronous_commit off unless a write is synced. It returns the index
// of the write whose statement the server failed, or -1 when each write
// has its outcome.
//
// The statements go in the order of the rows they lock, so that the
// batches of workers sharing the tables lock rows in one order and do not
// deadlock; one the server aborts as a deadlock all the same is sent
// again, up to maxAttempts times.
func (b *batcher) send(ws []*write) int {
	j := b.j
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	stmts := make([]*write, 0, len(ws))
	synced, written, marked := false, int64(0), false
	for _, w := range ws {
		synced = synced || w.synced
		switch {
		case w.mark:
			marked = true
		case w.stmt != "":
			written++
		}
		if w.stmt != "" {
			stmts = append(stmts, w)
		}
	}
	if marked {
		written++ // the marks of a batch count as one write, as one call marks a step's keys
	}
	slices.SortStableFunc(stmts, func(a, b *write) int { return strings.Compare(a.lock, b.lock) })
	for attempt := 1; ; attempt++ {
		var batch pgx.Batch
		if !synced {
			batch.Queue("SET LOCAL synchronous_commit = off")
		}
		for _, w := range stmts {
			batch.Queue(w.stmt, w.args...)
		}
		res := j.pool.SendBatch(ctx, &batch)
		var failed *write // the first statement the server failed
		var failure error
		if !synced {
			if _, err := res.Exec(); err != nil {
				failure = err
			}
		}
		for _, w := range stmts {
			if failure != nil {
				break
			}
			if w.scan != nil {
				w.err = w.scan(res.QueryRow())
			} else {
				w.tag, w.err = res.Exec()
			}
			var pgErr *pgconn.PgError
			if errors.As(w.err, &pgErr) {
				failed, failure = w, w.err
			}
		}
		if err := res.Close(); err != nil && failure == nil {
			failure = err
		}
		var pgErr *pgconn.PgError
		switch {
		case failure == nil:
			for _, w := range ws {
				if w.stmt == "" {
					w.err = nil
				}
			}
			j.writes.Add(written)
			j.commits.Add(1)
			if synced {
				j.syncs.Add(1)
			}
			return -1
		case failed == nil || !errors.As(failure, &pgErr):
			// The connection, the context, or the transaction: every write
			// fails.
			for _, w := range ws {
				w.err = failure
			}
			return -1
		case pgErr.Code == deadlock && attempt < maxAttempts:
			continue
		}
		return slices.Index(ws, failed)
	}
}

// deadlock is PostgreSQL's SQLSTATE for a transaction aborted to break a
// deadlock.
const deadlock = "40P01"

// lockOf returns the name of a row, as writes order their statements by
// it: the table's letter, then the row's key.
func lockOf(table byte, key ...string) string {
	return string(table) + "\x00" + strings.Join(key, "\x00")
}

// entryLock names an entry's row; runLock a run's.
func entryLock(k driver.Key) string         { return lockOf('e', k.Backend, k.Thread, k.Turn, k.Call) }
func runLock(backend, thread string) string { return lockOf('r', backend, thread) }
