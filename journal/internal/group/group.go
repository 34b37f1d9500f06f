// Package group makes the writes of a journal's concurrent callers in
// batches (group commit), for the stores of package journal: writes that
// arrive while a batch is under way wait, and go together into the next,
// so that they share its transaction, its round trip and its sync.
//
// The batches are made by the callers themselves, one at a time: a write
// that finds none under way makes its own at once, in its caller's
// goroutine (a write alone hands nothing to another goroutine, and wakes
// none); writes that find one under way queue, and the first of them, once
// it is over, makes the next with the others queued. A goroutine of the
// queue's own would be woken by every write and wake its caller in turn:
// on a small machine, that cost a write alone more than its SQL.
package group

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by [Queue.Do] for a write handed to a closed
// queue, or still waiting when it was closed.
var ErrClosed = errors.New("the journal is closed")

// Op is what a queue keeps of a write: a store's write type embeds it.
type Op struct {
	state  atomic.Int32 // queued, taken or withdrawn
	wake   chan struct{}
	lead   bool // woken to make the next batch
	closed bool // woken because the queue was closed
}

func (o *Op) op() *Op { return o }

// A Write is a store's write type, which embeds [Op] and reports the
// outcome Run set in it.
type Write interface {
	op() *Op
	Err() error
}

const (
	queued int32 = iota
	taken
	withdrawn
)

// A Queue makes writes of type W in batches. Set Run, Max and Empty before
// use.
type Queue[W Write] struct {
	// Run makes the writes of a batch (at least one), setting each one's
	// outcome in it. One caller at a time calls it.
	Run func(batch []W)
	// Max bounds the writes of a batch, but for those handed to Later.
	Max int
	// Empty returns a write that writes nothing: the queue makes a batch
	// of one, when it must, to make the writes handed to Later.
	Empty func() W

	mu      sync.Mutex
	leading bool // a caller is making batches
	queue   []W  // writes waiting for the next batch
	closed  bool
	idle    sync.Cond // signaled when leading becomes false
	batch   []W       // the leader's
	// later holds the writes nobody waits for (see Later): the next
	// batch makes them first.
	later []W
	timer *time.Timer // makes them if no batch comes
}

// LaterDelay bounds how long a write handed to Later waits for a batch to
// join; MaxLater bounds how many wait.
const (
	LaterDelay = 50 * time.Millisecond
	MaxLater   = 64
)

// Later hands w to the queue without waiting for it: it goes first into
// the next batch, so that the writes of that batch see it. If no batch
// comes within LaterDelay, a batch of its own makes it; if MaxLater writes
// wait already, it is made now, with them. Its outcome is dropped: Later
// is for writes whose loss costs little (a submitted mark).
func (q *Queue[W]) Later(w W) {
	q.mu.Lock()
	if q.closed || len(q.later) >= MaxLater {
		q.mu.Unlock()
		q.Do(context.Background(), w)
		return
	}
	q.later = append(q.later, w)
	if q.timer == nil {
		q.timer = time.AfterFunc(LaterDelay, func() { q.flush() })
	} else if len(q.later) == 1 {
		q.timer.Reset(LaterDelay)
	}
	q.mu.Unlock()
}

// flush makes the writes waiting in later, if any, now, and returns the
// error of their batch.
func (q *Queue[W]) flush() error {
	q.mu.Lock()
	n := len(q.later)
	q.mu.Unlock()
	if n == 0 {
		return nil
	}
	return q.Do(context.Background(), q.Empty())
}

// Settle returns once the writes handed to Later before it are made: it
// makes those still waiting, and waits for the batch under way, which may
// hold some. It returns ctx's error if ctx ends first, or the error of
// the batch it made.
func (q *Queue[W]) Settle(ctx context.Context) error {
	q.mu.Lock()
	pending := len(q.later) > 0 || q.leading
	q.mu.Unlock()
	if !pending {
		return nil
	}
	err := q.Do(ctx, q.Empty())
	if errors.Is(err, ErrClosed) {
		return nil // Close made them
	}
	return err
}

// Do makes w, in a batch, and returns once the batch is made, with w's
// outcome (its Err). If ctx ends while w waits its turn, Do withdraws it (it is never
// made) and returns ctx's error; once a batch has taken it, Do waits for
// the batch, even if ctx ends meanwhile: a write is made, or not, but
// never unknown. It returns ErrClosed, w not made, once the queue is
// closed.
func (q *Queue[W]) Do(ctx context.Context, w W) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := w.op()
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if !q.leading {
		q.leading = true
		q.mu.Unlock()
		o.state.Store(taken)
		q.lead(w)
		return w.Err()
	}
	o.wake = make(chan struct{})
	q.queue = append(q.queue, w)
	q.mu.Unlock()
	select {
	case <-o.wake:
	case <-ctx.Done():
		if o.state.CompareAndSwap(queued, withdrawn) {
			return ctx.Err()
		}
		<-o.wake
	}
	switch {
	case o.closed:
		return ErrClosed
	case o.lead:
		q.lead(w)
	}
	return w.Err()
}

// lead makes the batch of w, already taken, and of the writes handed to
// Later (first) and of the queue (up to Max); then it hands the lead to
// the first write still queued, or, with none, leaves the queue idle. A
// queue that is closed fails the writes still queued instead.
func (q *Queue[W]) lead(w W) {
	q.mu.Lock()
	batch := append(q.batch[:0], q.later...)
	clear(q.later)
	q.later = q.later[:0]
	front := len(batch)
	batch = append(batch, w)
	n := 0
	for ; n < len(q.queue) && len(batch)-front < q.Max; n++ {
		if x := q.queue[n]; x.op().state.CompareAndSwap(queued, taken) {
			batch = append(batch, x)
		}
	}
	q.dequeue(n)
	q.mu.Unlock()

	q.Run(batch)
	for _, x := range batch {
		if o := x.op(); o.wake != nil && o != w.op() {
			close(o.wake)
		}
	}
	clear(batch)
	q.batch = batch[:0]

	q.mu.Lock()
	defer q.mu.Unlock()
	for n = 0; n < len(q.queue); n++ {
		o := q.queue[n].op()
		if !o.state.CompareAndSwap(queued, taken) {
			continue // withdrawn
		}
		if q.closed {
			o.closed = true
			close(o.wake)
			continue
		}
		q.dequeue(n + 1)
		o.lead = true
		close(o.wake)
		return
	}
	q.dequeue(n)
	q.leading = false
	q.idle.Broadcast()
}

// dequeue removes the first n writes of the queue.
func (q *Queue[W]) dequeue(n int) {
	m := copy(q.queue, q.queue[n:])
	clear(q.queue[m:])
	q.queue = q.queue[:m]
}

// Close makes the writes handed to Later, and waits until the batch under
// way, if any, is made; the writes still queued, and those handed to the
// queue after (to Later too), fail with ErrClosed. It returns the error
// of the batch that made Later's writes.
func (q *Queue[W]) Close() error {
	err := q.flush()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
	}
	q.closed = true
	q.waitIdle()
	return err
}

// waitIdle waits, with q's lock held, until no batch is under way.
func (q *Queue[W]) waitIdle() {
	if q.idle.L == nil {
		q.idle.L = &q.mu
	}
	for q.leading {
		q.idle.Wait()
	}
}

// Len returns how many writes are queued (for tests).
func (q *Queue[W]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Closed reports whether Close was called (for tests).
func (q *Queue[W]) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// WaitIdle waits until no batch is under way (for tests).
func (q *Queue[W]) WaitIdle() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waitIdle()
}

// Busy reports whether a batch is under way: a write made before Busy was
// called may not be committed yet.
func (q *Queue[W]) Busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.leading
}
