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

// A Write is a store's write type, which embeds [Op].
type Write interface{ op() *Op }

const (
	queued int32 = iota
	taken
	withdrawn
)

// A Queue makes writes of type W in batches. Set Run and Max before use.
type Queue[W Write] struct {
	// Run makes the writes of a batch (at least one), setting each one's
	// outcome in it. One caller at a time calls it.
	Run func(batch []W)
	// Max bounds the writes of a batch, but for Front's.
	Max int
	// Front, if set, returns writes that go first in the next batch,
	// which nobody waits for (their Op is not used). It is called with the
	// queue's lock held, and must not call the queue.
	Front func() []W

	mu      sync.Mutex
	leading bool // a caller is making batches
	queue   []W  // writes waiting for the next batch
	closed  bool
	idle    sync.Cond // signaled when leading becomes false
	batch   []W       // the leader's
}

// Do makes w, in a batch, and returns once the batch is made; w holds its
// outcome. If ctx ends while w waits its turn, Do withdraws it (it is never
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
		return nil
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
	return nil
}

// lead makes the batch of w, already taken, and of the writes of Front
// (first) and of the queue (up to Max); then it hands the lead to the
// first write still queued, or, with none, leaves the queue idle. A queue
// that is closed fails the writes still queued instead.
func (q *Queue[W]) lead(w W) {
	q.mu.Lock()
	batch := q.batch[:0]
	if q.Front != nil {
		batch = append(batch, q.Front()...)
	}
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

// Close waits until the batch under way, if any, is made; the writes still
// queued, and those handed to the queue after, fail with ErrClosed.
func (q *Queue[W]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.waitIdle()
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
