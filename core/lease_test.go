package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/journal/driver"
)

// TestLeaseRenewed checks that the claim on a call stays alive while its
// handler runs for several times the lease, and that nothing is left
// renewing once the run is over (synctest.Test waits for every goroutine
// the run started).
func TestLeaseRenewed(t *testing.T) {
	const lease = 3 * time.Second
	for _, rc := range runContexts {
		t.Run(rc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				journal := driver.NewMemory()
				var left []time.Duration // lease left at each check
				slow := mustTool(t)(core.NewTool("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
					call, _ := core.CallFromContext(ctx)
					key := driver.Key{Backend: "coretest", Thread: call.Thread, Turn: call.Turn, Call: call.ID}
					for range 4 {
						time.Sleep(lease)
						e, ok, err := journal.Get(ctx, key)
						if err != nil || !ok || e.State != driver.Started {
							t.Errorf("the call's entry is %+v, %v, %v; want it started", e, ok, err)
						}
						left = append(left, e.LeaseUntil.Sub(time.Now()))
					}
					return "done", nil
				}, nil))
				script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
					{Calls: []coretest.Call{{Name: "slow", Arguments: json.RawMessage(`{}`)}}},
					{Text: "{{result 0}}"},
				}}}}
				r, _ := newRunner(t, script, []*core.Tool{slow}, &core.Options{Journal: journal, Lease: lease})
				res, err := r.Run(rc.ctx(t), "go", nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.Text != "done" {
					t.Errorf("answer %q, want done", res.Text)
				}
				// Renewed every third of the lease, a claim always has
				// two thirds of it left, or more; never renewed, it would
				// have none at the first check.
				for i, d := range left {
					if d < 2*lease/3 || d > lease {
						t.Errorf("check %d: %v of the lease left, want between %v and %v", i, d, 2*lease/3, lease)
					}
				}
				if len(left) != 4 {
					t.Errorf("%d checks, want 4", len(left))
				}
			})
		})
	}
}

// TestCallJournaledLeaseRenewed (issue 46, item 14): a journaled
// Runner.Call (a call of a loop run elsewhere, a toolbox served over MCP)
// keeps its claim alive while its handler runs for several times the
// lease, as a step's call does: the claim never has less than two thirds
// of the lease left, and the same call made meanwhile in another process
// (a runner of its own, the journal shared) waits for it and gets its
// result, instead of taking the claim over once the lease passes (the
// call is not idempotent: it would be reported in doubt).
func TestCallJournaledLeaseRenewed(t *testing.T) {
	const lease = 3 * time.Second
	synctest.Test(t, func(t *testing.T) {
		journal := driver.NewMemory()
		call := core.Call{ID: "call_1", Thread: "session_1", Turn: "turn_1", Name: "slow", Arguments: json.RawMessage(`{}`)}
		key := driver.Key{Backend: "coretest", Thread: call.Thread, Turn: call.Turn, Call: call.ID}
		var (
			runs int
			left []time.Duration // lease left at each check
		)
		slow := mustTool(t)(core.NewTool("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
			runs++
			for range 4 {
				time.Sleep(lease)
				e, ok, err := journal.Get(ctx, key)
				if err != nil || !ok || e.State != driver.Started {
					t.Errorf("the call's entry is %+v, %v, %v; want it started", e, ok, err)
				}
				left = append(left, e.LeaseUntil.Sub(time.Now()))
			}
			return "done", nil
		}, nil))
		first, _ := newRunner(t, &coretest.Script{}, []*core.Tool{slow}, &core.Options{Journal: journal, Owner: "first", Lease: lease})
		second, _ := newRunner(t, &coretest.Script{}, []*core.Tool{slow}, &core.Options{Journal: journal, Owner: "second", Lease: lease})
		done := make(chan core.CallResult, 1)
		go func() {
			tr, err := first.Call(t.Context(), &core.CallRequest{Call: call, Journaled: true})
			if err != nil {
				t.Error(err)
			}
			done <- core.CallResult{Output: tr.Output, Failed: tr.Failed, Error: tr.Error, Outcome: tr.Outcome}
		}()
		synctest.Wait() // the handler sleeps
		time.Sleep(lease / 2)
		tr, err := second.Call(t.Context(), &core.CallRequest{Call: call, Journaled: true})
		if err != nil {
			t.Fatal(err)
		}
		if first := <-done; first.Failed || first.Output.Text != "done" {
			t.Errorf("the first process's call = %+v, want done", first)
		}
		if tr.Failed || tr.Output.Text != "done" || runs != 1 {
			t.Errorf("the second process's call = %+v (the handler ran %d times); want the first's result, done, the handler run once", tr, runs)
		}
		for i, d := range left {
			if d < 2*lease/3 || d > lease {
				t.Errorf("check %d: %v of the lease left, want between %v and %v", i, d, 2*lease/3, lease)
			}
		}
	})
}
