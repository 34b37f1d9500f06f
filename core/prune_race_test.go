package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// staleResume is a backend whose Resume reads the thread's state, then
// waits for gate: the state it returns is stale by then.
type staleResume struct {
	*coretest.Backend
	fetched, gate chan struct{}
}

func (b *staleResume) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	step, err := b.Backend.Resume(ctx, thread)
	close(b.fetched)
	<-b.gate
	return step, err
}

// chargeAndRefund is the step the tests below race on: charge (no
// approval) and refund (it needs a person) in one step, then an answer
// quoting both; the counters count each handler's runs.
func chargeAndRefund(t *testing.T) (tools *core.Toolbox, backend *coretest.Backend, charges, refunds *atomic.Int32) {
	charges, refunds = new(atomic.Int32), new(atomic.Int32)
	charge := mustTool(t)(core.NewTool("charge", "Charges a card.", func(context.Context, struct{}) (string, error) {
		charges.Add(1)
		return "charged", nil
	}, nil))
	refund := mustTool(t)(core.NewTool("refund", "Refunds an order.", func(context.Context, struct{}) (string, error) {
		refunds.Add(1)
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("refunds need a person")}))
	tools, _ = core.NewToolbox(charge, refund)
	backend = coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "charge", Arguments: []byte(`{}`)}, {Name: "refund", Arguments: []byte(`{}`)}}},
		{Text: `{{output "charge"}}, {{output "refund"}}`},
	}}}}, &coretest.BackendOptions{Tools: tools})
	return tools, backend, charges, refunds
}

// TestPruneDuringConcurrentResume (issue 30, items 1 and 5, across
// processes): two workers resume a decided run at once, one of them
// reading the thread, then slow to go on. The other must not run the step
// meanwhile (it waits: the runs of a thread are taken one at a time, in
// any process), so that, with the journal pruned with no retention, no
// worker goes on from a stale read of the thread: each handler runs once,
// and both get the answer.
func TestPruneDuringConcurrentResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tools, inner, charges, refunds := chargeAndRefund(t)
		mem := journaldriver.NewMemory()
		first := core.NewRunner(inner, tools, &core.Options{Journal: mem, Owner: "first", Logger: quiet})
		defer first.Close()
		res, err := first.Run(t.Context(), "charge, then refund", nil)
		if len(res.Pending) != 1 {
			t.Fatalf("Run = %+v, %v; want it paused on the refund", res, err)
		}
		if err := first.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
			t.Fatal(err)
		}
		slow := &staleResume{Backend: inner, fetched: make(chan struct{}), gate: make(chan struct{})}
		second := core.NewRunner(slow, tools, &core.Options{Journal: mem, Owner: "second", Logger: quiet})
		defer second.Close()
		type outcome struct {
			res *core.Result
			err error
		}
		firstDone, secondDone := make(chan outcome, 1), make(chan outcome, 1)
		go func() {
			res, err := second.Resume(context.Background(), res.Thread, nil)
			secondDone <- outcome{res, err}
		}()
		<-slow.fetched
		go func() {
			res, err := first.Resume(context.Background(), res.Thread, nil)
			firstDone <- outcome{res, err}
		}()
		synctest.Wait() // the first has finished, or waits for the second
		if _, err := mem.Prune(t.Context(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		close(slow.gate)
		for _, o := range []outcome{<-secondDone, <-firstDone} {
			if o.err != nil || o.res.Text != "charged, refunded" {
				t.Errorf("Resume = %+v, %v; want the answer", o.res, o.err)
			}
		}
		if c, r := charges.Load(), refunds.Load(); c != 1 || r != 1 {
			t.Errorf("charged %d times, refunded %d times; want once each", c, r)
		}
	})
}

// pauseHook is a journal that calls hook once, after the run it records
// as awaiting approval for the first time.
type pauseHook struct {
	*journaldriver.Memory
	once sync.Once
	hook func()
}

func (j *pauseHook) EndRun(ctx context.Context, backend, thread, owner string, state journaldriver.RunState, errText string) error {
	err := j.Memory.EndRun(ctx, backend, thread, owner, state, errText)
	if state == journaldriver.RunAwaiting {
		j.once.Do(j.hook)
	}
	return err
}

// TestDecisionAsRunPauses: a decision recorded by another worker just as
// the run records its pause wakes the run there; the other worker resumes
// it (and may even finish it, and the journal be pruned, before the paused
// run looks again), and the paused run, finding every call decided, must
// not go on too (two workers on one step): it stops with
// FailedPrecondition, leaving the run to the other; each call runs once.
func TestDecisionAsRunPauses(t *testing.T) {
	for _, finished := range []bool{false, true} {
		t.Run(fmt.Sprintf("finished=%v", finished), func(t *testing.T) {
			tools, inner, charges, refunds := chargeAndRefund(t)
			j := &pauseHook{Memory: journaldriver.NewMemory()}
			paused := core.NewRunner(inner, tools, &core.Options{Journal: j, Owner: "paused", Logger: quiet})
			defer paused.Close()
			decider := core.NewRunner(inner, tools, &core.Options{Journal: j, Owner: "decider", Logger: quiet})
			defer decider.Close()
			deciderDone := make(chan error, 1)
			resume := func() {
				res, err := decider.Resume(t.Context(), "thread_1", nil)
				if err == nil && res.Text != "charged, refunded" {
					err = fmt.Errorf("answer %q", res.Text)
				}
				deciderDone <- err
			}
			j.hook = func() {
				list, err := decider.Approvals(t.Context(), "thread_1")
				if err != nil || len(list) != 1 {
					t.Errorf("Approvals = %+v, %v", list, err)
					return
				}
				if err := decider.Decide(t.Context(), "thread_1", list[0].Key.Call, core.Decision{Approved: true}); err != nil {
					t.Error(err)
				}
				if !finished {
					go resume()
					return
				}
				resume()
				if _, err := j.Prune(t.Context(), time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
				}
			}
			_, err := paused.Run(t.Context(), "charge, then refund", nil)
			if errcode.Of(err) != errcode.FailedPrecondition || !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("the paused worker's Run = %v (%v), want FailedPrecondition: another worker goes on", err, errcode.Of(err))
			}
			if err := <-deciderDone; err != nil {
				t.Errorf("the deciding worker's Resume: %v", err)
			}
			if c, r := charges.Load(), refunds.Load(); c != 1 || r != 1 {
				t.Errorf("charged %d times, refunded %d times; want once each", c, r)
			}
		})
	}
}
