package openai

import (
	"fmt"
	"testing"
	"time"
)

// TestReplaySet (issue 37, item 2): an event id is new once, then being
// handled until done, then handled; it is forgotten when its window passes,
// when it is forgotten (its handling failed), or, oldest first, past the
// set's bound, which holds however ids come and go.
func TestReplaySet(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := newReplaySet(time.Hour, 3)
	steps := []struct {
		what string
		do   func() seenState
		want seenState
	}{
		{"a is new", func() seenState { return s.begin("a", t0) }, seenNew},
		{"a again, being handled", func() seenState { return s.begin("a", t0) }, seenTaking},
		{"a done, then again", func() seenState { s.done("a"); return s.begin("a", t0.Add(time.Minute)) }, seenTaken},
		{"b forgotten, then again", func() seenState { s.begin("b", t0); s.forget("b"); return s.begin("b", t0) }, seenNew},
		{"a just before its window passes", func() seenState { return s.begin("a", t0.Add(time.Hour-time.Second)) }, seenTaken},
		{"a once its window passed", func() seenState { return s.begin("a", t0.Add(time.Hour)) }, seenNew},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Errorf("%s: %v, want %v", st.what, got, st.want)
		}
	}
	// Past the bound the oldest goes first.
	s = newReplaySet(time.Hour, 3)
	for i := range 4 {
		s.begin(fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second))
	}
	if got := s.begin("0", t0.Add(5*time.Second)); got != seenNew {
		t.Errorf("the oldest id past the bound: %v, want forgotten (new)", got)
	}
	if got := s.begin("3", t0.Add(5*time.Second)); got != seenTaking {
		t.Errorf("a recent id: %v, want remembered", got)
	}
	// Ids that come and go leave the queue bounded too.
	for i := range 1000 {
		id := fmt.Sprint("x", i)
		s.begin(id, t0.Add(10*time.Second))
		s.forget(id)
	}
	if n := len(s.order) - s.head; n > 2*s.max || s.len() > s.max {
		t.Errorf("after 1000 ids forgotten: queue %d, set %d; bound %d", n, s.len(), s.max)
	}
}
