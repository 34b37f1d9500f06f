// Package inflight bounds the requests each identity has in flight at
// once, for the servers of runs (package web, package a2atools).
package inflight

import "sync"

// Limits counts the requests in flight of each identity. The zero value
// is ready to use; it must not be copied after first use.
type Limits struct {
	mu sync.Mutex
	n  map[string]int
}

// Enter counts a request of who in and reports true, or reports false,
// counting nothing, when who has max in flight already.
func (l *Limits) Enter(who string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[who] >= max {
		return false
	}
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[who]++
	return true
}

// Leave counts a request of who, entered before, out.
func (l *Limits) Leave(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[who]--; l.n[who] <= 0 {
		delete(l.n, who)
	}
}

// Count returns how many requests of who are in flight.
func (l *Limits) Count(who string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[who]
}
