package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
)

// The writer makes every write of a Journal, on the one connection it
// holds. Writes that arrive while it commits a transaction wait, and go
// together into the next one (group commit): the calls of a step, claimed
// or finished at once, share one transaction and one sync to disk, instead
// of each paying for its own.
type writer struct {
	conn     *sql.Conn
	sync     Synchronous
	relaxed  bool // the connection is at synchronous = NORMAL now
	queue    chan *op
	stop     chan struct{}
	stopped  chan struct{}
	ctx      context.Context // canceled when the writer stops
	cancel   context.CancelFunc
	begin    *sql.Stmt
	commit   *sql.Stmt
	rollback *sql.Stmt
}

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// An op is one write. run makes it, inside the writer's transaction; it
// returns only errors of the database (an op's own outcome, such as a lost
// lease, goes into variables run closes over).
type op struct {
	run func(ctx context.Context) error
	// syncFrom is the weakest Synchronous setting under which the write is
	// synced to disk before it is reported done (Claims or Full); empty:
	// none. A transaction is synced if one of its writes must be.
	syncFrom Synchronous

	state atomic.Int32 // queued, taken or withdrawn
	err   error
	done  chan struct{}
}

const (
	queued int32 = iota
	taken
	withdrawn
)

var errClosed = errors.New("the journal is closed")

func newWriter(ctx context.Context, conn *sql.Conn, sync Synchronous) (*writer, error) {
	w := &writer{conn: conn, sync: sync, queue: make(chan *op, maxBatch), stop: make(chan struct{}), stopped: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	for _, s := range []struct {
		stmt **sql.Stmt
		text string
	}{{&w.begin, "BEGIN IMMEDIATE"}, {&w.commit, "COMMIT"}, {&w.rollback, "ROLLBACK"}} {
		var err error
		if *s.stmt, err = conn.PrepareContext(ctx, s.text); err != nil {
			w.cancel()
			w.closeStmts()
			return nil, err
		}
	}
	go w.loop()
	return w, nil
}

// do makes a write and waits until it is committed. If ctx ends while the
// write waits its turn, do withdraws it and returns ctx's error; once the
// writer has taken it, do waits for its outcome, which it returns even if
// ctx has ended meanwhile (the write is done, or not, but never unknown).
func (w *writer) do(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case w.queue <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stopped:
		return errClosed
	}
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		if o.state.CompareAndSwap(queued, withdrawn) {
			return ctx.Err()
		}
	case <-w.stopped:
		if o.state.CompareAndSwap(queued, withdrawn) {
			return errClosed
		}
	}
	<-o.done
	return o.err
}

// close stops the writer once the writes it has taken are done; writes
// still queued fail.
func (w *writer) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
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

// closeStmts closes the writer's statements, once it is stopped.
func (w *writer) closeStmts() error {
	var errs []error
	for _, s := range []*sql.Stmt{w.begin, w.commit, w.rollback} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

func (w *writer) loop() {
	defer close(w.stopped)
	defer w.cancel()
	batch := make([]*op, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-w.stop:
			return
		default:
		}
		select {
		case o := <-w.queue:
			batch = append(batch, o)
		case <-w.stop:
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-w.queue:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		w.run(batch)
	}
}

// run makes the writes of batch in one transaction, and reports each done.
// If a write fails, the transaction is rolled back, and made again without
// it, so that one write's failure is not the others'. If the transaction
// itself fails (to begin or to commit), every write of it fails.
func (w *writer) run(batch []*op) {
	var live []*op
	for _, o := range batch {
		if o.state.CompareAndSwap(queued, taken) {
			live = append(live, o)
		}
	}
	defer func() {
		for _, o := range batch {
			if o.state.Load() == taken {
				close(o.done)
			}
		}
	}()
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
		if _, err := w.conn.ExecContext(w.ctx, pragma); err != nil {
			return err
		}
		w.relaxed = relaxed
	}
	if _, err := w.begin.ExecContext(w.ctx); err != nil {
		return err
	}
	for _, o := range ops {
		if o.err = o.run(w.ctx); o.err != nil {
			w.rollback.ExecContext(w.ctx)
			return o.err
		}
	}
	if _, err := w.commit.ExecContext(w.ctx); err != nil {
		w.rollback.ExecContext(w.ctx)
		return err
	}
	return nil
}
