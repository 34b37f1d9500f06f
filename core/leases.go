package core

import (
	"context"
	"slices"
	"sync"
	"time"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// leases are the claims of the calls a runner is running. One goroutine
// renews them all every third of Options.Lease, so that a call arms no
// timer of its own: a timer due before every other wakes the runtime's
// network poller, which costs more than a quick call. The goroutine runs
// while the runner holds claims; it ends at the first renewal that finds
// none, or when the runner is closed.
//
// A claim is held for a run, and renewed only while the run's context is
// not done: once it ends (its caller, its time limit, a stream's reader
// that stopped), the claim is left to expire, whether or not the run's
// goroutine gets to act on it (a stream's reader that stops reading
// holds that goroutine), so that no other worker waits for the run more
// than a lease past its end.
type leases struct {
	mu sync.Mutex
	// held are the claims held: for each, the Done channels of the
	// contexts of the runs that hold it, one per hold.
	held    map[journaldriver.Key][]<-chan struct{}
	stop    chan struct{} // closed to end the renewing goroutine; nil when none runs
	stopped bool          // the runner is closed
	opts    *Options      // the runner's: its journal, owner and lease
}

// hold keeps the claim on key alive until drop, while ctx is not
// done.
func (l *leases) hold(ctx context.Context, key journaldriver.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[journaldriver.Key][]<-chan struct{}{}
	}
	l.held[key] = append(l.held[key], ctx.Done())
	if l.stop == nil && !l.stopped {
		l.stop = make(chan struct{})
		go l.renewLeases(l.stop)
	}
}

// drop stops renewing the claim on key held under ctx.
func (l *leases) drop(ctx context.Context, key journaldriver.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held[key]
	if i := slices.Index(held, ctx.Done()); i >= 0 {
		held = slices.Delete(held, i, i+1)
	}
	if len(held) == 0 {
		delete(l.held, key)
	} else {
		l.held[key] = held
	}
}

// live reports whether a hold of held is under a context not done.
func live(held []<-chan struct{}) bool {
	for _, done := range held {
		select {
		case <-done:
		default:
			return true // a nil channel (a context never done) too
		}
	}
	return false
}

// holds reports whether the claim on key is held.
func (l *leases) holds(key journaldriver.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held[key]) > 0
}

// close ends the renewing goroutine for good.
func (l *leases) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
}

// renewLeases renews the claims held under a context not done every third
// of the lease, until none is held or stop is closed.
func (l *leases) renewLeases(stop chan struct{}) {
	every := l.opts.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if len(l.held) == 0 {
			if l.stop == stop {
				l.stop = nil
			}
			l.mu.Unlock()
			return
		}
		var keys []journaldriver.Key
		for key, held := range l.held {
			if live(held) {
				keys = append(keys, key)
			}
		}
		l.mu.Unlock()
		for _, key := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			var err error
			if key.Call == "" {
				// A run's record (see runRecord).
				err = l.opts.Journal.(journaldriver.Runs).RenewRun(ctx, key.Backend, key.Thread, l.opts.Owner, l.opts.Lease)
			} else {
				err = l.opts.Journal.Renew(ctx, key, l.opts.Owner, l.opts.Lease)
			}
			cancel()
			// A claim dropped meanwhile was finished or released: its
			// renewal may fail.
			if err != nil && l.holds(key) {
				l.opts.Logger.Warn("toolrelay: lease renewal failed", "call_id", key.Call, errorAttr(err))
			}
		}
	}
}
