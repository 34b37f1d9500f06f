package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// inventory returns the harness's Inventory, or skips the scenario.
func (e *env) inventory() Inventory {
	e.t.Helper()
	inv, ok := e.h.(Inventory)
	if !ok {
		e.t.Skip("the harness cannot count what exists on its service (conformance.Inventory)")
	}
	return inv
}

// wantNothingLeft fails the test if anything exists on the service.
func (e *env) wantNothingLeft(inv Inventory, when string) {
	e.t.Helper()
	got := inv.OnService()
	want := maps.Clone(got)
	for k := range want {
		want[k] = 0
	}
	if diff := cmp.Diff(want, got); diff != "" {
		e.t.Errorf("%s, on the service (-want +got):\n%s", when, diff)
	}
}

// wantOneAgent fails the test if more than one agent, or agent version,
// exists on the service.
func (e *env) wantOneAgent(inv Inventory, when string) {
	e.t.Helper()
	got := inv.OnService()
	for _, k := range []string{"agents", "agent versions"} {
		if got[k] > 1 {
			e.t.Errorf("%s: %d %s on the service (%v), want one at most: a process that resumes uses the agent of the same definition", when, got[k], k, got)
		}
	}
}

func leftAfterAnswer(e *env) {
	inv := e.inventory()
	r := e.runner(script(calls("get_customer", `{"customer_id":"123"}`), answer(`{{output "get_customer"}}`)), nil,
		tool(e, "get_customer", "Look up a customer by ID.", getCustomer, nil))
	e.run(r, "Who is customer 123?", nil)
	if err := r.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.wantNothingLeft(inv, "after a run to its answer and Close")
}

// pausingRefund returns a refund tool that always needs approval, counting
// its runs in n.
func pausingRefund(e *env, n *atomic.Int32) *core.Tool {
	return tool(e, "refund", "Refund an order.", counted(n, func(_ context.Context, in refundArgs) (string, error) {
		return fmt.Sprintf("refunded %d", in.Amount), nil
	}), &core.ToolOptions{Approval: core.ApprovalAlways("every refund needs approval")})
}

// approveAll approves, on r, every call of thread waiting for a decision.
func (e *env) approveAll(r Loop, thread string) {
	e.t.Helper()
	list, err := e.approver(r).Approvals(e.t.Context(), thread)
	if err != nil {
		e.t.Fatalf("Approvals: %v", err)
	}
	n := 0
	for _, a := range list {
		if a.Decision == nil {
			n++
			if err := r.Decide(e.t.Context(), thread, a.Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
				e.t.Fatalf("Decide: %v", err)
			}
		}
	}
	if n == 0 {
		e.t.Fatalf("no call of %s waits for a decision: %+v", thread, list)
	}
}

func leftAfterPauseResume(e *env) {
	inv := e.inventory()
	var refunds atomic.Int32
	mem := journaldriver.NewMemory()
	r := e.runner(script(calls("refund", `{"order":"1","amount":150}`), answer(`{{result 0}}`)), &core.Options{Journal: mem}, pausingRefund(e, &refunds))
	e.approver(r)
	res, err := r.Run(e.t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		e.t.Fatalf("Run = %v, want a pause on the refund", err)
	}
	e.approveAll(r, res.Thread)
	if res, err = r.Resume(e.t.Context(), res.Thread, nil); err != nil || res.Text != "refunded 150" {
		e.t.Fatalf("Resume = %+v, %v; want the refund's answer", res, err)
	}
	if err := r.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.wantNothingLeft(inv, "after a run paused, resumed and finished in one process, and Close")
}

// reopen opens another backend on the fake, as another process of the
// same program would, and the loop of first over it (sharing journal, for
// core's Runner) in that process.
func (e *env) reopen(re Reopener, first Loop, tools *core.Toolbox, journal journaldriver.Journal) Loop {
	e.t.Helper()
	po := e.processOpener(first)
	b, err := re.Reopen(e.t.Context(), tools)
	if err != nil {
		e.t.Fatalf("Reopen: %v", err)
	}
	r, err := po.OpenProcess(e.t, b, tools, &core.Options{Journal: journal, Logger: quiet})
	if errors.Is(err, ErrLacking) {
		b.Close()
		e.skipLacking(err)
	}
	if err != nil {
		e.t.Fatalf("opening the loop in a second process: %v", err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

// pauseFirst starts the scenarios of work taken up by other processes: a
// run of steps refunds, each needing approval, paused on the first. It
// returns the thread, the toolbox and the journal the processes share.
func (e *env) pauseFirst(steps int, refunds *atomic.Int32) (Reopener, string, *core.Toolbox, journaldriver.Journal, Loop) {
	e.t.Helper()
	re, ok := e.h.(Reopener)
	if !ok {
		e.t.Skip("the harness cannot open a second backend on its fake (conformance.Reopener)")
	}
	s := script()
	for i := range steps {
		s.Turns[0].Steps = append(s.Turns[0].Steps, calls("refund", fmt.Sprintf(`{"order":"%d","amount":%d}`, i+1, 10*(i+1))))
	}
	s.Turns[0].Steps = append(s.Turns[0].Steps, answer(`{{result 0}}`))
	mem := journaldriver.NewMemory()
	r, tools := e.runnerTools(s, &core.Options{Journal: mem}, pausingRefund(e, refunds))
	e.processOpener(r)
	e.approver(r)
	if e.caps.LocalThreads {
		e.t.Skip("the backend's threads live in the process that started them (Capabilities.LocalThreads)")
	}
	res, err := r.Run(e.t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		e.t.Fatalf("Run = %v, want a pause on the refund", err)
	}
	return re, res.Thread, tools, mem, r
}

func leftAfterTakeover(e *env) {
	inv := e.inventory()
	var refunds atomic.Int32
	re, thread, tools, mem, first := e.pauseFirst(1, &refunds)
	// The first process dies: it is never closed (until the test ends).
	second := e.reopen(re, first, tools, mem)
	e.approveAll(second, thread)
	res, err := second.Resume(e.t.Context(), thread, nil)
	if err != nil || res.Text != "refunded 10" || refunds.Load() != 1 {
		e.t.Fatalf("Resume in the second process = %+v, %v (refunds %d); want the refund run once", res, err, refunds.Load())
	}
	e.wantOneAgent(inv, "after the second process finished the run")
	if err := second.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.wantNothingLeft(inv, "after a takeover and the second process's Close")
}

func leftAfterSeveral(e *env) {
	inv := e.inventory()
	const processes = 4
	var refunds atomic.Int32
	re, thread, tools, mem, first := e.pauseFirst(processes-1, &refunds)
	if err := first.Close(); err != nil {
		e.t.Fatalf("Close of the first process: %v", err)
	}
	e.wantOneAgent(inv, "after the first process paused and closed")
	for i := 1; i < processes; i++ {
		r := e.reopen(re, first, tools, mem)
		e.approveAll(r, thread)
		res, err := r.Resume(e.t.Context(), thread, nil)
		last := i == processes-1
		switch {
		case last && (err != nil || res.Text != fmt.Sprintf("refunded %d", 10*(processes-1))):
			e.t.Fatalf("Resume in process %d = %+v, %v; want the answer", i+1, res, err)
		case !last && !errors.Is(err, core.ErrAwaitingApproval):
			e.t.Fatalf("Resume in process %d = %v, want a pause on the next refund", i+1, err)
		}
		if res != nil && res.Thread != "" {
			thread = res.Thread // a chain of responses moves on
		}
		if err := r.Close(); err != nil {
			e.t.Fatalf("Close of process %d: %v", i+1, err)
		}
		if !last {
			e.wantOneAgent(inv, fmt.Sprintf("after process %d paused and closed", i+1))
		}
	}
	if got := refunds.Load(); got != processes-1 {
		e.t.Errorf("%d refunds ran, want %d (one per process that resumed)", got, processes-1)
	}
	e.wantNothingLeft(inv, fmt.Sprintf("after %d processes resumed the run in turn and closed", processes))
}
