package inflight_test

import (
	"sync"
	"testing"

	"github.com/toolrelay/toolrelay/internal/inflight"
)

// TestLimits: an identity gets at most max requests in at once, others
// are counted apart, and a request out makes room again; concurrent
// entries never pass the bound.
func TestLimits(t *testing.T) {
	var l inflight.Limits
	for i := range 2 {
		if !l.Enter("ann", 2) {
			t.Fatalf("ann's request %d refused", i+1)
		}
	}
	if l.Enter("ann", 2) {
		t.Fatal("ann's third request let in past 2")
	}
	if !l.Enter("bob", 2) {
		t.Fatal("bob refused for ann's requests")
	}
	l.Leave("ann")
	if got := l.Count("ann"); got != 1 {
		t.Fatalf("Count(ann) = %d, want 1", got)
	}
	if !l.Enter("ann", 2) {
		t.Fatal("ann refused after one of hers ended")
	}

	var c inflight.Limits
	var wg sync.WaitGroup
	var mu sync.Mutex
	in := 0
	for range 50 {
		wg.Go(func() {
			if c.Enter("carl", 5) {
				mu.Lock()
				in++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if in != 5 || c.Count("carl") != 5 {
		t.Fatalf("%d of 50 concurrent requests let in, count %d; want 5", in, c.Count("carl"))
	}
}
