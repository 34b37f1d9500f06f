package core_test

import (
	"context"
	"errors"
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

// stalledSubmit is a backend whose first Submit sends the results, then
// reports stalled and waits for gate before it returns the next step.
type stalledSubmit struct {
	*coretest.Backend
	once          sync.Once
	stalled, gate chan struct{}
}

func (b *stalledSubmit) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	step, err := b.Backend.Submit(ctx, req)
	b.once.Do(func() {
		close(b.stalled)
		<-b.gate
	})
	return step, err
}

// failingRenewals is a journal whose renewals of owner's runs time out (as
// SQLite's did under load).
type failingRenewals struct {
	*journaldriver.Memory
	owner string
}

func (j *failingRenewals) RenewRun(ctx context.Context, backend, thread, owner string, lease time.Duration) error {
	if owner == j.owner {
		return context.DeadlineExceeded
	}
	return j.Memory.RenewRun(ctx, backend, thread, owner, lease)
}

// TestStalledWorkerLosesRun (issue 30, the unfenced gap): a worker stalls
// past its run's lease (the service slow to answer, its renewals timing
// out); another worker takes the run over, runs the next step's call and
// finishes the run, and a prune with no retention deletes the call's
// entry. The stalled worker, going on with the step it was finally given,
// must not claim the call again (no entry stood in its way): its claim is
// fenced by the run's record, which is not its own any more, so it runs
// no handler and stops with FailedPrecondition. The charge is made once.
func TestStalledWorkerLosesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var charges, lookups atomic.Int32
		lookup := mustTool(t)(core.NewTool("lookup", "Looks an order up.", func(context.Context, struct{}) (string, error) {
			lookups.Add(1)
			return "order 7", nil
		}, nil))
		charge := mustTool(t)(core.NewTool("charge", "Charges a card.", func(context.Context, struct{}) (string, error) {
			charges.Add(1)
			return "charged", nil
		}, nil))
		tools, _ := core.NewToolbox(lookup, charge)
		inner := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}},
			{Calls: []coretest.Call{{Name: "charge", Arguments: []byte(`{}`)}}},
			{Text: `{{output "charge"}}`},
		}}}}, &coretest.BackendOptions{Tools: tools})
		const lease = 30 * time.Second
		j := &failingRenewals{Memory: journaldriver.NewMemory(), owner: "a"}
		slow := &stalledSubmit{Backend: inner, stalled: make(chan struct{}), gate: make(chan struct{})}
		a := core.NewRunner(slow, tools, &core.Options{Journal: j, Owner: "a", Lease: lease, Logger: quiet})
		defer a.Close()
		b := core.NewRunner(inner, tools, &core.Options{Journal: j, Owner: "b", Lease: lease, Logger: quiet})
		defer b.Close()

		aDone := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), "look the order up, then charge it", nil)
			aDone <- err
		}()
		<-slow.stalled
		time.Sleep(2 * lease) // a's lease on its run expires, unrenewed
		results, err := b.TakeOver(t.Context())
		if err != nil || len(results) != 1 || results[0].Text != "charged" {
			t.Fatalf("b's TakeOver = %+v, %v; want the run finished", results, err)
		}
		if _, err := j.Prune(t.Context(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		close(slow.gate) // a goes on, with the step that calls charge
		err = <-aDone
		if errcode.Of(err) != errcode.FailedPrecondition || !errors.Is(err, journaldriver.ErrLeaseLost) {
			t.Errorf("the stalled worker's Run = %v (%v), want FailedPrecondition matching ErrLeaseLost: it lost the run", err, errcode.Of(err))
		}
		if c, l := charges.Load(), lookups.Load(); c != 1 || l != 1 {
			t.Errorf("charged %d times, looked up %d times; want once each", c, l)
		}
	})
}
