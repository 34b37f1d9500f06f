package core

import (
	"context"
	"fmt"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
)

// threadLocks serialize a runner's runs on each thread: a run holds the
// thread it works on (the one it resumes or continues, the one it starts,
// the ones its chain moves to), and another run of the same runner on
// that thread waits for it. Runners in other processes are kept apart by
// the journal's claims; within one, a backend's state of a thread is not
// for two runs at once.
type threadLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // thread → closed when released
}

// A threadHold is what one run holds of its runner's threadLocks.
type threadHold struct {
	l       *threadLocks
	threads map[string]chan struct{}
	// noWait makes take fail at once on a thread another run holds.
	noWait bool
}

// hold returns an empty hold of one run on l.
func (l *threadLocks) hold() *threadHold { return &threadHold{l: l} }

// take holds thread for the run, waiting while another run of the runner
// holds it, until ctx ends (its error, with the context's code). A thread
// held already, or "", is no wait.
func (h *threadHold) take(ctx context.Context, thread string) error {
	if thread == "" || h.threads[thread] != nil {
		return nil
	}
	l := h.l
	for {
		l.mu.Lock()
		busy, ok := l.held[thread]
		if !ok {
			ch := make(chan struct{})
			if l.held == nil {
				l.held = map[string]chan struct{}{}
			}
			l.held[thread] = ch
			l.mu.Unlock()
			if h.threads == nil {
				h.threads = map[string]chan struct{}{}
			}
			h.threads[thread] = ch
			return nil
		}
		l.mu.Unlock()
		if h.noWait {
			return busyError(thread)
		}
		select {
		case <-busy:
		case <-ctx.Done():
			err := context.Cause(ctx)
			return &errcode.Error{Code: errcode.Of(err), Op: "core: run", Err: fmt.Errorf("another run of this runner works on thread %s: %w", thread, err)}
		}
	}
}

// release lets go of every thread the run holds.
func (h *threadHold) release() {
	l := h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for thread, ch := range h.threads {
		delete(l.held, thread)
		close(ch)
	}
	h.threads = nil
}
