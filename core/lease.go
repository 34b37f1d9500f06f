package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

// leases are the claims of the calls a runner is running. One goroutine
// renews them all every third of Options.Lease, so that a call arms no
// timer of its own: a timer due before every other wakes the runtime's
// network poller, which costs more than a quick call. The goroutine runs
// while the runner holds claims; it ends at the first renewal that finds
// none, or when the runner is closed.
type leases struct {
	mu      sync.Mutex
	held    map[driver.Key]int // claims held, with how many calls hold each
	stop    chan struct{}      // closed to end the renewing goroutine; nil when none runs
	stopped bool               // the runner is closed
}

// holdLease keeps the claim on key alive until dropLease.
func (r *Runner) holdLease(key driver.Key) {
	l := &r.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[driver.Key]int{}
	}
	l.held[key]++
	if l.stop == nil && !l.stopped {
		l.stop = make(chan struct{})
		go r.renewLeases(l.stop)
	}
}

// dropLease stops renewing the claim on key.
func (r *Runner) dropLease(key driver.Key) {
	l := &r.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key]--; l.held[key] <= 0 {
		delete(l.held, key)
	}
}

// holds reports whether the claim on key is held.
func (l *leases) holds(key driver.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[key] > 0
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

// renewLeases renews the claims held every third of the lease, until none
// is held or stop is closed.
func (r *Runner) renewLeases(stop chan struct{}) {
	l := &r.leases
	every := r.opts.Lease / 3
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
		keys := slices.Collect(maps.Keys(l.held))
		l.mu.Unlock()
		for _, key := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			var err error
			if key.Call == "" {
				// A run's record (see runRecord).
				err = r.opts.Journal.(driver.Runs).RenewRun(ctx, key.Backend, key.Thread, r.opts.Owner, r.opts.Lease)
			} else {
				err = r.opts.Journal.Renew(ctx, key, r.opts.Owner, r.opts.Lease)
			}
			cancel()
			// A claim dropped meanwhile was finished or released: its
			// renewal may fail.
			if err != nil && l.holds(key) {
				r.opts.Logger.Warn("toolrelay: lease renewal failed", "call_id", key.Call, errorAttr(err))
			}
		}
	}
}
