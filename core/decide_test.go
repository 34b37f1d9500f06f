package core_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Of the tests of a decision made in one process and a resume in another:
// the runners' lease, long enough that a resume made to wait for it ends
// at its deadline, well before.
const (
	decideLease    = time.Minute
	resumeDeadline = 5 * time.Second
)

// sharedJournals open the journal the runners of a test share, as
// processes would: a memory journal, and a SQLite file. Each runs in a
// synctest bubble, so that a resume that waits for the lease ends at its
// deadline at once.
var sharedJournals = []struct {
	name string
	open func(t *testing.T) journaldriver.Journal
}{
	{"memory", func(*testing.T) journaldriver.Journal { return journaldriver.NewMemory() }},
	{"sqlite", func(t *testing.T) journaldriver.Journal {
		return openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "journal.db"))
	}},
}

// processes returns a runner for each of owners, like model's (its
// backend and tools) but over journal j, as if in a process of its own:
// its own owner name, the lease decideLease.
func processes(t *testing.T, b *coretest.Backend, model *core.Runner, j journaldriver.Journal, owners ...string) map[string]*core.Runner {
	t.Helper()
	out := map[string]*core.Runner{}
	for _, owner := range owners {
		r := core.NewRunner(b, model.Toolbox(), &core.Options{Logger: quiet, Journal: j, Owner: owner, Lease: decideLease})
		t.Cleanup(func() { r.Close() })
		out[owner] = r
	}
	return out
}

// TestDecisionElsewhere (issue 46, item 6): a run pauses for approval on
// runner A; runner B (another process: an operator's tool, a web front
// end) decides the call and does not resume the run; a Resume on A, or on
// a third runner C, goes on at once, not once B's lease (a minute) has
// passed: it finishes well before its deadline, the refund run once.
func TestDecisionElsewhere(t *testing.T) {
	for _, sj := range sharedJournals {
		for _, resumer := range []string{"A", "C"} {
			t.Run(sj.name+"/resumed on "+resumer, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newApprovalEnv(t, refundScript("150"), nil)
					rs := processes(t, e.backend, e.runner, sj.open(t), "A", "B", "C")
					res, err := rs["A"].Run(t.Context(), "refund", nil)
					if !errors.Is(err, core.ErrAwaitingApproval) {
						t.Fatalf("Run on A = %v, want ErrAwaitingApproval", err)
					}
					if err := rs["B"].Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(t.Context(), resumeDeadline)
					defer cancel()
					got, err := rs[resumer].Resume(ctx, res.Thread, nil)
					if err != nil || got.Text != "refunded / order 7: 150" {
						t.Fatalf("Resume on %s after B's decision = %+v, %v; want the answer within %v (the lease is %v)", resumer, got, err, resumeDeadline, decideLease)
					}
					if e.refunds.Load() != 1 || e.lookups.Load() != 1 {
						t.Errorf("refunds %d, lookups %d; want each once", e.refunds.Load(), e.lookups.Load())
					}
				})
			})
		}
	}
}

// TestDecisionFleet (issue 46, item 6) is TestDecisionElsewhere's fleet: in
// each of 3 rounds, 8 runners (processes sharing the journal) each start a
// run that pauses for approval; then each decides the run of the next
// runner, all at once, and once every call is decided each resumes the
// run of the runner after that, all at once. Every resume must finish
// with the answer before its deadline (well before the lease), and every
// approved refund must run exactly once.
func TestDecisionFleet(t *testing.T) {
	const (
		runners = 8
		rounds  = 3
	)
	for _, sj := range sharedJournals {
		t.Run(sj.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newFleetEnv(t)
				var owners []string
				for i := range runners {
					owners = append(owners, fmt.Sprintf("w%d", i))
				}
				rs := processes(t, e.backend, e.runner, sj.open(t), owners...)
				for round := range rounds {
					paused := make([]*core.Result, runners)
					var wg sync.WaitGroup
					for i, owner := range owners {
						wg.Go(func() {
							res, err := rs[owner].Run(t.Context(), fmt.Sprintf("refund %d.%d", round, i), nil)
							if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
								t.Errorf("round %d: Run on %s = %+v, %v; want one call awaiting approval", round, owner, res, err)
								return
							}
							paused[i] = res
						})
					}
					wg.Wait()
					if t.Failed() {
						t.FailNow()
					}
					for i, owner := range owners {
						wg.Go(func() {
							p := paused[(i+1)%runners]
							if err := rs[owner].Decide(t.Context(), p.Thread, p.Pending[0].Key.Call, core.Decision{Approved: true, Actor: owner}); err != nil {
								t.Errorf("round %d: Decide on %s: %v", round, owner, err)
							}
						})
					}
					wg.Wait()
					for i, owner := range owners {
						wg.Go(func() {
							p := paused[(i+2)%runners]
							ctx, cancel := context.WithTimeout(t.Context(), resumeDeadline)
							defer cancel()
							if res, err := rs[owner].Resume(ctx, p.Thread, nil); err != nil || res.Text != "refunded / order 7: 150" {
								t.Errorf("round %d: Resume on %s of %s's run = %+v, %v; want the answer within %v (the lease is %v)", round, owner, owners[(i+2)%runners], res, err, resumeDeadline, decideLease)
							}
						})
					}
					wg.Wait()
					if t.Failed() {
						t.FailNow()
					}
				}
				e.checkOnce(t, runners*rounds)
			})
		})
	}
}

// fleetEnv is approvalEnv's tools, counting the runs of each thread's
// refund, for many runs at once.
type fleetEnv struct {
	runner  *core.Runner
	backend *coretest.Backend
	mu      sync.Mutex
	refunds map[string]int // by thread
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Helper()
	e := &fleetEnv{refunds: map[string]int{}}
	refund := mustTool(t)(core.NewTool("refund", "Refund an order.", func(ctx context.Context, in refundArgs) (string, error) {
		call, _ := core.CallFromContext(ctx)
		e.mu.Lock()
		e.refunds[call.Thread]++
		e.mu.Unlock()
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("refunds need a person's approval")}))
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
		return "order 7: 150", nil
	}, nil))
	tools, err := core.NewToolbox(refund, lookup)
	if err != nil {
		t.Fatal(err)
	}
	e.backend = coretest.NewBackend(refundScript("150"), &coretest.BackendOptions{Tools: tools})
	e.runner = core.NewRunner(e.backend, tools, &core.Options{Logger: quiet})
	t.Cleanup(func() { e.runner.Close() })
	return e
}

// checkOnce fails t unless the refunds of n threads ran, each once.
func (e *fleetEnv) checkOnce(t *testing.T, n int) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.refunds) != n {
		t.Errorf("refunds ran on %d threads, want %d", len(e.refunds), n)
	}
	for thread, k := range e.refunds {
		if k != 1 {
			t.Errorf("thread %s: the refund ran %d times, want once", thread, k)
		}
	}
}
