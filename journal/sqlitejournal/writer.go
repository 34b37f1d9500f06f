package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/group"
)

// The writer makes every write of a Journal, on the one connection it
// holds, in transactions of the writes that arrive together (group
// commit, package journal/internal/group): the calls of a step, claimed or
// finished at once, and those of concurrent runs, share one transaction
// and one sync to disk, instead of each paying for its own.
type writer struct {
	conn     *sql.Conn
	sync     Synchronous
	relaxed  bool // the connection is at synchronous = NORMAL now
	begin    *sql.Stmt
	commit   *sql.Stmt
	rollback *sql.Stmt
	q        group.Queue[*op]

	writes, commits, syncs atomic.Int64 // see driver.Stats
}

// stats returns the writer's counts.
func (w *writer) stats() driver.Stats {
	return driver.Stats{Writes: w.writes.Load(), Commits: w.commits.Load(), Syncs: w.syncs.Load()}
}

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// An op is one write. run makes it, inside a transaction; it returns only
// errors of the database (an op's own outcome, such as a lost lease, goes
// into variables run closes over). An op without run makes a transaction
// for the writes handed to the queue's Later.
type op struct {
	group.Op
	run func(ctx context.Context) error
	// syncFrom is the weakest Synchronous setting under which the write is
	// synced to disk before it is reported done (Claims or Full); empty:
	// none. A transaction is synced if one of its writes must be.
	syncFrom Synchronous
	err      error
}

var errClosed = group.ErrClosed

func newWriter(ctx context.Context, conn *sql.Conn, sync Synchronous) (*writer, error) {
	w := &writer{conn: conn, sync: sync}
	w.q = group.Queue[*op]{Run: w.run, Max: maxBatch, Empty: func() *op { return &op{} }}
	for _, s := range []struct {
		stmt **sql.Stmt
		text string
	}{{&w.begin, "BEGIN IMMEDIATE"}, {&w.commit, "COMMIT"}, {&w.rollback, "ROLLBACK"}} {
		var err error
		if *s.stmt, err = conn.PrepareContext(ctx, s.text); err != nil {
			w.closeStmts()
			return nil, err
		}
	}
	return w, nil
}

// Err returns the write's outcome (group.Write).
func (o *op) Err() error { return o.err }

// close makes the writes handed to the queue's Later, and waits until the
// transaction under way, if any, is over; writes still queued, and those
// after, fail.
func (w *writer) close() { w.q.Close() }

// covers reports whether a write to be synced from setting from on is
// synced under s.
func (s Synchronous) covers(from Synchronous) bool {
	rank := func(s Synchronous) int {
		switch s {
		case Full:
			return 2
		case Claims:
			return 1
		}
		return 0
	}
	return from != "" && rank(s) >= rank(from)
}

// closeStmts closes the writer's statements, once it is closed.
func (w *writer) closeStmts() error {
	var errs []error
	for _, s := range []*sql.Stmt{w.begin, w.commit, w.rollback} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// run makes the writes of batch in one transaction, setting each one's
// err. If a write fails, the transaction is rolled back, and made again
// without it, so that one write's failure is not the others'. If the
// transaction itself fails (to begin or to commit), every write of it
// fails.
func (w *writer) run(batch []*op) {
	live := batch
	for len(live) > 0 {
		bad := w.transaction(live)
		if bad < 0 {
			return
		}
		// live[bad] keeps its error; the others go again.
		live = append(live[:bad:bad], live[bad+1:]...)
	}
}

// transaction makes the writes of ops in one transaction. If a write
// fails, it rolls the transaction back, sets that write's err and returns
// its index. Otherwise it sets the err of every write (nil, or the error
// of the transaction) and returns -1.
func (w *writer) transaction(ops []*op) int {
	if err := w.transact(ops); err != nil {
		for i, o := range ops {
			if o.err != nil {
				return i
			}
		}
		for _, o := range ops {
			o.err = err
		}
	}
	return -1
}

func (w *writer) transact(ops []*op) error {
	for _, o := range ops {
		o.err = nil
	}
	relaxed := true
	for _, o := range ops {
		relaxed = relaxed && !w.sync.covers(o.syncFrom)
	}
	if relaxed != w.relaxed {
		pragma := "PRAGMA synchronous = FULL"
		if relaxed {
			pragma = "PRAGMA synchronous = NORMAL"
		}
		if _, err := w.conn.ExecContext(txCtx, pragma); err != nil {
			return err
		}
		w.relaxed = relaxed
	}
	if _, err := w.begin.ExecContext(txCtx); err != nil {
		return err
	}
	writes := 0
	for _, o := range ops {
		if o.run == nil {
			continue
		}
		writes++
		if o.err = o.run(txCtx); o.err != nil {
			w.rollback.ExecContext(txCtx)
			return o.err
		}
	}
	if _, err := w.commit.ExecContext(txCtx); err != nil {
		w.rollback.ExecContext(txCtx)
		return err
	}
	w.writes.Add(int64(writes))
	w.commits.Add(1)
	if !relaxed {
		w.syncs.Add(1)
	}
	return nil
}

// txCtx is the context of every statement of the writer's transactions.
// It is never canceled: a transaction the writer has taken runs to its end
// (close waits for it), and its waits for another process's lock are
// bounded by the busy timeout. modernc.org/sqlite watches a context that
// can be canceled with a goroutine of its own for each statement, which
// cost a call alone more than its SQL.
var txCtx = context.Background()
