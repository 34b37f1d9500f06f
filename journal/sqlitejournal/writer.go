package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

// The writer makes every write of a Journal, on the one connection it
// holds. Writes that arrive while a transaction is under way wait, and go
// together into the next one (group commit): the calls of a step, claimed
// or finished at once, share one transaction and one sync to disk, instead
// of each paying for its own.
//
// The transactions are made by the callers themselves, one at a time: a
// write that finds none under way makes its own at once, in its caller's
// goroutine (a call alone hands nothing to another goroutine, and wakes
// none); writes that find one under way queue, and the first of them, once
// it is over, makes the next with the others queued. A goroutine of the
// writer's own would be woken by every write and wake its caller in turn:
// on a small machine, that cost a call alone more than its SQL.
type writer struct {
	conn     *sql.Conn
	sync     Synchronous
	relaxed  bool // the connection is at synchronous = NORMAL now
	begin    *sql.Stmt
	commit   *sql.Stmt
	rollback *sql.Stmt
	batch    []*op // the leader's

	mu      sync.Mutex
	leading bool  // a caller is making transactions
	queue   []*op // writes waiting for the next transaction
	closed  bool
	idle    sync.Cond // signaled when leading becomes false
	// later holds the writes nobody waits for (see writeLater): the next
	// transaction makes them first.
	later []*op
	timer *time.Timer // makes them if no transaction comes

	writes, commits, syncs atomic.Int64 // see driver.Stats
}

// stats returns the writer's counts.
func (w *writer) stats() driver.Stats {
	return driver.Stats{Writes: w.writes.Load(), Commits: w.commits.Load(), Syncs: w.syncs.Load()}
}

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// laterDelay bounds how long a write nobody waits for waits for a
// transaction to join; maxLater bounds how many wait.
const (
	laterDelay = 50 * time.Millisecond
	maxLater   = 64
)

// An op is one write. run makes it, inside a transaction; it returns only
// errors of the database (an op's own outcome, such as a lost lease, goes
// into variables run closes over). An op without run makes a transaction
// for the writes made later (see flush).
type op struct {
	run func(ctx context.Context) error
	// syncFrom is the weakest Synchronous setting under which the write is
	// synced to disk before it is reported done (Claims or Full); empty:
	// none. A transaction is synced if one of its writes must be.
	syncFrom Synchronous

	state atomic.Int32 // queued, taken or withdrawn
	err   error
	// wake is closed when a queued write is done (taken, err set) or when
	// it is to make the next transaction (lead).
	wake chan struct{}
	lead bool
}

const (
	queued int32 = iota
	taken
	withdrawn
)

var errClosed = errors.New("the journal is closed")

func newWriter(ctx context.Context, conn *sql.Conn, sync Synchronous) (*writer, error) {
	w := &writer{conn: conn, sync: sync, batch: make([]*op, 0, maxBatch+maxLater+1)}
	w.idle.L = &w.mu
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

// do makes a write and waits until it is committed. If ctx ends while the
// write waits its turn, do withdraws it and returns ctx's error; once a
// transaction has taken it, do waits for its outcome, which it returns even
// if ctx has ended meanwhile (the write is done, or not, but never
// unknown).
func (w *writer) do(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	if !w.leading {
		w.leading = true
		w.mu.Unlock()
		o.state.Store(taken)
		w.lead(o)
		return o.err
	}
	o.wake = make(chan struct{})
	w.queue = append(w.queue, o)
	w.mu.Unlock()
	select {
	case <-o.wake:
	case <-ctx.Done():
		if o.state.CompareAndSwap(queued, withdrawn) {
			return ctx.Err()
		}
		<-o.wake
	}
	if o.lead {
		w.lead(o)
	}
	return o.err
}

// writeLater makes o with the next transaction, without waiting for it:
// first in it, so that the writes of that transaction see it. If no
// transaction comes within laterDelay, a transaction of its own makes it;
// if maxLater writes wait already, o is made now, with them. Its error is
// dropped: it is for writes whose loss costs little (submitted marks).
func (w *writer) writeLater(o *op) {
	w.mu.Lock()
	if w.closed || len(w.later) >= maxLater {
		w.mu.Unlock()
		w.do(context.Background(), o)
		return
	}
	w.later = append(w.later, o)
	if w.timer == nil {
		w.timer = time.AfterFunc(laterDelay, w.flush)
	} else if len(w.later) == 1 {
		w.timer.Reset(laterDelay)
	}
	w.mu.Unlock()
}

// flush makes the writes waiting in later, if any, now.
func (w *writer) flush() {
	w.mu.Lock()
	n := len(w.later)
	w.mu.Unlock()
	if n > 0 {
		w.do(context.Background(), &op{}) // no write of its own
	}
}

// lead makes the transaction of o, already taken, and of the writes waiting
// in later (first) and queued (up to maxBatch); then it hands the lead to
// the first write still queued, or, with none, leaves the writer idle. A
// writer that is closed fails the writes still queued instead.
func (w *writer) lead(o *op) {
	w.mu.Lock()
	batch := append(append(w.batch[:0], w.later...), o)
	clear(w.later)
	w.later = w.later[:0]
	n := 0
	for n < len(w.queue) && len(batch) < maxBatch+maxLater {
		if q := w.queue[n]; q.state.CompareAndSwap(queued, taken) {
			batch = append(batch, q)
		}
		n++
	}
	w.dequeue(n)
	w.mu.Unlock()

	w.run(batch)
	for _, q := range batch {
		if q.wake != nil && q != o {
			close(q.wake)
		}
	}
	clear(batch)

	w.mu.Lock()
	defer w.mu.Unlock()
	for n = 0; n < len(w.queue); n++ {
		q := w.queue[n]
		if !q.state.CompareAndSwap(queued, taken) {
			continue // withdrawn
		}
		if w.closed {
			q.err = errClosed
			close(q.wake)
			continue
		}
		w.dequeue(n + 1)
		q.lead = true
		close(q.wake)
		return
	}
	w.dequeue(n)
	w.leading = false
	w.idle.Broadcast()
}

// dequeue removes the first n writes of the queue.
func (w *writer) dequeue(n int) {
	m := copy(w.queue, w.queue[n:])
	clear(w.queue[m:])
	w.queue = w.queue[:m]
}

// close makes the writes waiting in later, waits until the transaction
// under way, if any, is over, failing the writes still queued; writes
// after it fail.
func (w *writer) close() {
	w.flush()
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	defer w.mu.Unlock()
	w.closed = true
	for w.leading {
		w.idle.Wait()
	}
}

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
