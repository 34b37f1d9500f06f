package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// chargeStep is a step of n charges (side effects), then the answer.
func chargeStep(n int) *coretest.Script {
	var calls []coretest.Call
	for i := range n {
		calls = append(calls, coretest.Call{Name: "charge", Arguments: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
	}
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Calls: calls}, {Text: "charged"}}}}}
}

// chargeTool counts the charges that started.
func chargeTool(t *testing.T) (*core.Tool, *atomic.Int32) {
	var started atomic.Int32
	return mustTool(t)(core.NewTool("charge", "Charges a card.", func(context.Context, struct {
		N int `json:"n"`
	}) (string, error) {
		started.Add(1)
		return "charged", nil
	}, nil)), &started
}

// TestNoHandlerAfterCancel (issue 30, item 3): once the run's context is
// done, no handler starts, with the default memory journal as with any:
// the caller canceling at EventStepStarted, or a stream's reader stopping
// at a call or at the step's start. The calls not started leave nothing
// in the journal (they run on resume).
func TestNoHandlerAfterCancel(t *testing.T) {
	for _, n := range []int{1, 3} {
		for _, how := range []string{"cancel at step_started", "break at tool_call", "break at step_started"} {
			t.Run(fmt.Sprintf("%d calls/%s", n, how), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					charge, started := chargeTool(t)
					j := journaldriver.NewMemory()
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					opts := &core.Options{Journal: j}
					if how == "cancel at step_started" {
						opts.OnEvent = func(e core.Event) {
							if e.Kind == core.EventStepStarted {
								cancel()
							}
						}
					}
					r, _ := newRunner(t, chargeStep(n), []*core.Tool{charge}, opts)
					var err error
					if how == "cancel at step_started" {
						_, err = r.Run(ctx, "charge", nil)
					} else {
						stop := core.EventToolCall
						if how == "break at step_started" {
							stop = core.EventStepStarted
						}
						st := r.Stream(ctx, "charge", nil)
						for ev := range st.Events() {
							if ev.Kind == stop {
								break
							}
						}
						_, err = st.Result()
					}
					if !errors.Is(err, context.Canceled) {
						t.Errorf("run error = %v, want context.Canceled", err)
					}
					synctest.Wait() // a handler left behind would have started by now
					if got := started.Load(); got != 0 {
						t.Errorf("%d handlers started after the run's context was done, want 0", got)
					}
					for i := range n {
						k := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: fmt.Sprintf("call_%d", i+1)}
						if e, ok, _ := j.Get(t.Context(), k); ok {
							t.Errorf("call %s left in the journal as %v, want no entry (not started)", k.Call, e.State)
						}
					}
				})
			})
		}
	}
}

// failingFinish is a journal whose Finish fails (a full disk) from the
// first call on.
type failingFinish struct{ *journaldriver.Memory }

var errDiskFull = &errcode.Error{Code: errcode.ResourceExhausted, Op: "journal: finish", Err: errors.New("disk full")}

func (failingFinish) Finish(context.Context, journaldriver.Key, string, journaldriver.Result) error {
	return errDiskFull
}

// TestJournalFailureStopsStep (issue 30, item 6): once recording a result
// fails, the step's handlers not started yet do not start (their effects
// would end in doubt too); the run ends with the journal's code, saying
// what became of the step's calls.
func TestJournalFailureStopsStep(t *testing.T) {
	for _, concurrency := range []int{1, 2} {
		t.Run(fmt.Sprintf("concurrency=%d", concurrency), func(t *testing.T) {
			charge, started := chargeTool(t)
			r, b := newRunner(t, chargeStep(4), []*core.Tool{charge}, &core.Options{Journal: failingFinish{journaldriver.NewMemory()}, Concurrency: concurrency})
			start := time.Now()
			_, err := r.Run(t.Context(), "charge", nil)
			if errcode.Of(err) != errcode.ResourceExhausted || !errors.Is(err, errDiskFull) {
				t.Fatalf("Run = %v (%v), want the journal's error, ResourceExhausted", err, errcode.Of(err))
			}
			if got := started.Load(); got > int32(concurrency) {
				t.Errorf("%d handlers started, want at most %d (those under way when the journal failed)", got, concurrency)
			}
			if !strings.Contains(err.Error(), "not started") {
				t.Errorf("Run error %q does not say which calls were not started", err)
			}
			if got := results(b.Received()); len(got) != 0 {
				t.Errorf("results sent: %+v, want none", got)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the step took %v", d)
			}
		})
	}
}
