package bench

import (
	"context"
	"testing"

	"github.com/toolrelay/toolrelay/core"
)

// TestFlows checks that every client compared gets the script's answer on
// both fakes, on a new thread and on an existing one, with steps of one
// call and of several, so that the benchmarks compare clients that do the
// same work.
func TestFlows(t *testing.T) {
	for _, backend := range backends {
		for _, c := range append(clients(backend, true, false), client{name: "floor"}) {
			t.Run(backend+"/"+c.name, func(t *testing.T) {
				fl, thread := session(t, backend, c, Script(2, 2, 3), nil, core.Options{})
				for turn := range 2 {
					got, text, err := fl.turn(context.Background(), thread, "go")
					if err != nil {
						t.Fatalf("turn %d: %v", turn+2, err)
					}
					if got != thread {
						t.Errorf("turn %d ran on thread %q, want %q", turn+2, got, thread)
					}
					if err := check(text, Answer(2, 3)); err != nil {
						t.Errorf("turn %d: %v", turn+2, err)
					}
				}
			})
		}
	}
}
