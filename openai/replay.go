package openai

import (
	"sync"
	"time"
)

// replaySet remembers the ids of the webhook events a handler took (or is
// taking), each for a window, and at most max of them (past it, the oldest
// is forgotten first). It is safe for concurrent use.
type replaySet struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	ids   map[string]*seenEntry
	order []seenID // ids in the order they were added (a queue)
	head  int      // order[head:] are live, or forgotten early
}

type seenEntry struct {
	until time.Time // when it is forgotten
	taken bool      // handled; else being handled
}

type seenID struct {
	id    string
	until time.Time
}

// The states of an event id, as begin finds it.
type seenState int

const (
	seenNew    seenState = iota // not remembered: now being handled
	seenTaking                  // being handled
	seenTaken                   // handled
)

func newReplaySet(window time.Duration, max int) *replaySet {
	return &replaySet{window: window, max: max, ids: map[string]*seenEntry{}}
}

// begin records at now that id is being handled, unless it is
// remembered already, and returns the state it found.
func (s *replaySet) begin(id string, now time.Time) seenState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if e := s.ids[id]; e != nil {
		if e.taken {
			return seenTaken
		}
		return seenTaking
	}
	u := now.Add(s.window)
	s.ids[id] = &seenEntry{until: u}
	s.order = append(s.order, seenID{id, u})
	// The queue holds the ids forgotten early too, until they come up:
	// it is bounded as well.
	for len(s.ids) > s.max || len(s.order)-s.head > 2*s.max {
		s.drop()
	}
	return seenNew
}

// done records that id was handled.
func (s *replaySet) done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.ids[id]; e != nil {
		e.taken = true
	}
}

// forget forgets id, so that a delivery of it is taken again (its handling
// failed).
func (s *replaySet) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id) // its entry in order is skipped when it comes up
}

// len returns how many ids are remembered.
func (s *replaySet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// expire forgets the ids whose window has passed. The caller holds s.mu.
func (s *replaySet) expire(now time.Time) {
	for s.head < len(s.order) && !now.Before(s.order[s.head].until) {
		s.drop()
	}
}

// drop forgets the oldest id. The caller holds s.mu.
func (s *replaySet) drop() {
	e := s.order[s.head]
	s.order[s.head] = seenID{}
	s.head++
	if x := s.ids[e.id]; x != nil && x.until.Equal(e.until) {
		delete(s.ids, e.id) // not an id forgotten and added again since
	}
	if s.head > len(s.order)/2 && s.head > 64 {
		s.order = append(s.order[:0:0], s.order[s.head:]...)
		s.head = 0
	}
}
