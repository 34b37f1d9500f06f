package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// errDown is the error of a backend's operation, or a journal's write,
// made to fail.
var errDown = errors.New("down")

// failingMove is a journal whose MoveRun fails (a disk full, a lost
// connection) once failing is set.
type failingMove struct {
	*journaldriver.Memory
	failing *atomic.Bool
}

func (j failingMove) MoveRun(ctx context.Context, backend, from, to, owner, options string) error {
	if j.failing.Load() {
		return errDown
	}
	return j.Memory.MoveRun(ctx, backend, from, to, owner, options)
}

// TestFailedBeginEndsRecord (issue 46, item 14): a run whose beginning
// fails (the backend's start, the continuation of a thread, a resume; the
// journal's move of a start's record to its new thread) returns its
// error with its run record ended, not running: a record left running
// would be taken over once its lease passed, and the run its caller was
// told failed would be started (or resumed) again behind its back.
func TestFailedBeginEndsRecord(t *testing.T) {
	tests := []struct {
		name string
		// op is the backend's operation that fails ("start", "resume"),
		// or "move": the journal's MoveRun.
		op string
		// begin runs the run whose beginning fails, calling fail once
		// what it needs (a thread, a decision) is made.
		begin func(t *testing.T, r *core.Runner, fail func()) (*core.Result, error)
	}{
		{"start", "start", func(t *testing.T, r *core.Runner, fail func()) (*core.Result, error) {
			fail()
			return r.Run(t.Context(), "refund", nil)
		}},
		{"continue", "start", func(t *testing.T, r *core.Runner, fail func()) (*core.Result, error) {
			res := paused(t, r)
			if err := r.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Resume(t.Context(), res.Thread, nil); err != nil {
				t.Fatal(err)
			}
			fail()
			return r.Run(t.Context(), "refund again", &core.RunOptions{Thread: res.Thread})
		}},
		{"resume", "resume", func(t *testing.T, r *core.Runner, fail func()) (*core.Result, error) {
			res := paused(t, r)
			if err := r.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
				t.Fatal(err)
			}
			fail()
			return r.Resume(t.Context(), res.Thread, nil)
		}},
		{"start's record not moved", "move", func(t *testing.T, r *core.Runner, fail func()) (*core.Result, error) {
			fail()
			return r.Run(t.Context(), "refund", nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failing atomic.Bool
			tools := newApprovalEnv(t, refundScript("150"), nil).runner.Toolbox()
			turn := refundScript("150").Turns[0]
			b := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{turn, turn}}, &coretest.BackendOptions{
				Tools: tools,
				Fault: func(op string, _ int) error {
					if failing.Load() && op == tt.op {
						return errDown
					}
					return nil
				},
			})
			mem := journaldriver.NewMemory()
			var j journaldriver.Journal = mem
			if tt.op == "move" {
				j = failingMove{mem, &failing}
			}
			r := core.NewRunner(b, tools, &core.Options{Logger: quiet, Journal: j, Owner: "worker"})
			t.Cleanup(func() { r.Close() })
			if _, err := tt.begin(t, r, func() { failing.Store(true) }); !errors.Is(err, errDown) {
				t.Fatalf("the run = %v, want the error of the failing %s", err, tt.op)
			}
			runs, err := mem.ListRuns(t.Context(), "", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range runs {
				if run.State == journaldriver.RunRunning {
					t.Errorf("run %s is recorded running (owner %s, lease until %v) after the run returned its error; want it ended", run.Thread, run.Owner, run.LeaseUntil)
				}
			}
		})
	}
}

// paused runs a refund of 150 on r, which pauses for its approval, and
// returns its result.
func paused(t *testing.T, r *core.Runner) *core.Result {
	t.Helper()
	res, err := r.Run(t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("Run = %+v, %v; want one call awaiting approval", res, err)
	}
	return res
}
