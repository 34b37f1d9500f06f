package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// shareHooks registers the thread workflow on e with run hooks that the
// environments next makes share, as one worker's do.
func (e *env) shareHooks(h *runHooks) {
	e.te.RegisterWorkflowWithOptions(func(ctx workflow.Context, st State) error { return runThread(ctx, st, h) },
		workflow.RegisterOptions{Name: WorkflowName, DisableAlreadyRegisteredCheck: true})
}

// next returns an environment for the run that continues e's workflow
// as new, with st: the same worker (runner, backend, hooks h, counters)
// on a new test environment, its workflow id e's.
func (e *env) next(h *runHooks, st State) *env {
	e.t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet))
	n := &env{t: e.t, te: s.NewTestWorkflowEnvironment(), backend: e.backend, runner: e.runner, start: st}
	n.te.SetTestTimeout(30 * time.Second)
	Register(n.te, e.runner)
	n.shareHooks(h)
	return n
}

// continued returns the state e's workflow continued as new with.
func (e *env) continued() State {
	e.t.Helper()
	e.te.ExecuteWorkflow(WorkflowName, e.start)
	err := e.te.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		e.t.Fatalf("the workflow ended with %v, want it continued as new", err)
	}
	var st State
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// longTurn: four steps of three weather calls (the third call of step
// refund, if not -1, a refund over 100, which needs a decision), then the
// answer; then a second turn.
func longTurn(refund int) *coretest.Script {
	var steps []coretest.Step
	for s := range 4 {
		var calls []coretest.Call
		for c := range 3 {
			calls = append(calls, coretest.Call{Name: "get_weather", Arguments: json.RawMessage(fmt.Sprintf(`{"city":"c%d%d"}`, s, c))})
		}
		if s == refund {
			calls[2] = coretest.Call{Name: "refund", Arguments: json.RawMessage(`{"order":"A1","amount":500}`), ID: "call_refund"}
		}
		steps = append(steps, coretest.Step{Calls: calls})
	}
	steps = append(steps, coretest.Step{Text: "all done"})
	return &coretest.Script{Turns: []coretest.Turn{{Steps: steps}, {Steps: []coretest.Step{{Text: "second"}}}}}
}

// TestContinueInTurn (issue 46, item 9): a turn whose history reaches
// the server's suggestion or MaxHistoryEvents in the middle continues as
// new before its next call, in the middle of a step (the calls started
// end first) and through a pause for a decision: the run update answers
// that the turn continued; in the new run the turn goes on with the calls
// left, each call run once and each step's results sent once, in order;
// the wait update naming the turn returns its answer with every result;
// the events of the turn are each there once; the Run hook begins and
// ends the turn once; and the thread's next turn runs.
func TestContinueInTurn(t *testing.T) {
	for _, c := range []struct {
		name     string
		refund   int  // the step whose third call needs a decision, or -1
		decide   bool // in the first run
		set      LoopOptions
		at       int  // the call activities completed when the history asks
		length   bool // the history passes MaxHistoryEvents, rather than the server suggesting
		wantLeft []int
		later    []int
	}{
		{name: "suggested in a step", refund: -1, set: LoopOptions{Concurrency: 2}, at: 4, wantLeft: []int{2}},
		{name: "history length between steps", refund: -1, set: LoopOptions{MaxHistoryEvents: 100}, at: 6, length: true, wantLeft: []int{0, 1, 2}},
		{name: "before a pause", refund: 2, set: LoopOptions{Concurrency: 1}, at: 7, wantLeft: []int{1}, later: []int{2}},
		{name: "after a pause", refund: 1, decide: true, set: LoopOptions{Concurrency: 1}, at: 7, wantLeft: []int{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, longTurn(c.refund), c.set)
			hooks := newRunHooks(e.runner)
			e.shareHooks(hooks)
			calls := 0
			e.te.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				if info.ActivityType.Name != activityCall {
					return
				}
				if calls++; calls == c.at {
					if c.length {
						e.te.SetCurrentHistoryLength(101)
					} else {
						e.te.SetContinueAsNewSuggested(true)
					}
				}
			})
			var run, decided outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather everywhere", MaxSteps: 10})
			if c.decide {
				e.update(2*time.Second, UpdateDecide, &decided, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann"}})
			}
			st := e.continued()
			if c.decide {
				// The run update answered the pause; a wait would have
				// answered that the turn continued.
				if run.err != nil || run.res == nil || run.res.Done || len(run.res.Pending) != 1 || decided.err != nil {
					t.Fatalf("run = %+v, %v; decide: %v; want a pause, decided", run.res, run.err, decided.err)
				}
			} else if run.err != nil || run.res == nil || !run.res.Continued || run.res.Turn != 1 || run.res.Done {
				t.Fatalf("run = %+v, %v; want the turn continued", run.res, run.err)
			}
			ts := st.Running
			if ts == nil || st.Last != nil || st.Turns != 1 {
				t.Fatalf("continued as new with %+v, want turn 1 running", st)
			}
			if diff := cmp.Diff(c.wantLeft, ts.Calls); diff != "" {
				t.Errorf("calls left (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.later, ts.Later); diff != "" {
				t.Errorf("calls left to decide (-want +got):\n%s", diff)
			}

			n := e.next(hooks, st)
			var paused, busy, decide, wait, second outcome
			var approvals []core.Approval
			if c.refund >= 0 && !c.decide {
				n.update(time.Second, UpdateWait, &paused, waitRequest{Turn: 1})
				n.update(time.Second, UpdateRun, &busy, runRequest{Input: "meanwhile"})
				n.te.RegisterDelayedCallback(func() {
					v, err := n.te.QueryWorkflow(QueryApprovals)
					if err == nil {
						err = v.Get(&approvals)
					}
					if err != nil {
						t.Errorf("approvals: %v", err)
					}
				}, 2*time.Second)
				n.update(3*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann"}})
			}
			n.update(4*time.Second, UpdateWait, &wait, waitRequest{Turn: 1})
			var events eventsPage
			n.te.RegisterDelayedCallback(func() {
				v, err := n.te.QueryWorkflow(QueryEvents, eventsRequest{Turn: 1})
				if err == nil {
					err = v.Get(&events)
				}
				if err != nil {
					t.Errorf("events: %v", err)
				}
			}, 5*time.Second)
			n.update(6*time.Second, UpdateRun, &second, runRequest{Input: "and then?"})
			n.run()

			if c.refund >= 0 && !c.decide {
				if paused.err != nil || paused.res == nil || paused.res.Done || len(paused.res.Pending) != 1 || paused.res.Pending[0].Key.Call != "call_refund" {
					t.Errorf("wait before the decision = %+v, %v; want the turn paused on call_refund", paused.res, paused.err)
				}
				if err := clientError("run", busy.err); !errors.Is(err, core.ErrThreadBusy) {
					t.Errorf("a run while the carried turn runs = %+v, %v; want it refused, busy", busy.res, err)
				}
				if len(approvals) != 1 || approvals[0].Key.Call != "call_refund" || approvals[0].Decision != nil || decide.err != nil {
					t.Errorf("approvals in the new run %+v (decide: %v), want call_refund awaiting its decision", approvals, decide.err)
				}
			}
			if wait.err != nil || wait.res == nil || !wait.res.Done || wait.res.Err != nil || wait.res.Text != "all done" || wait.res.Steps != 4 || wait.res.ToolCalls != 12 {
				t.Fatalf("wait = %+v, %v; want the answer after 4 steps and 12 calls", wait.res, wait.err)
			}
			var want, got []string
			for s := range 4 {
				for k := range 3 {
					want = append(want, fmt.Sprintf("sunny in c%d%d", s, k))
				}
			}
			if c.refund >= 0 {
				want[3*c.refund+2] = "refunded A1"
			}
			for _, r := range wait.res.Calls {
				got = append(got, r.Output.Text)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the turn's results (-want +got):\n%s", diff)
			}
			got = nil
			for _, r := range e.backend.Received() {
				switch r.Kind {
				case "input":
					got = append(got, "input "+r.Input)
				case "results":
					for _, d := range r.Results {
						got = append(got, d.Output)
					}
				default:
					got = append(got, r.Kind)
				}
			}
			want = append([]string{"input weather everywhere"}, want...)
			want = append(want, "input and then?")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the service received (-want +got):\n%s", diff)
			}
			if n := e.calls.Load(); n != 12 {
				t.Errorf("the call hook saw %d calls, want 12", n)
			}
			kinds := map[core.EventKind]int{}
			for _, ev := range events.Events {
				kinds[ev.Kind]++
			}
			wantKinds := map[core.EventKind]int{core.EventToolCall: 12, core.EventStepStarted: 4, core.EventCallStarted: 12, core.EventCallFinished: 12,
				core.EventResultsSubmitted: 4, core.EventTextDelta: 1, core.EventTextDone: 1, core.EventRunFinished: 1}
			if c.refund >= 0 {
				wantKinds[core.EventApprovalRequested] = 1
				wantKinds[core.EventRunFinished] = 2 // the pause, the end
			}
			if diff := cmp.Diff(wantKinds, kinds); diff != "" || events.Skipped != 0 {
				t.Errorf("the turn's events, %d skipped (-want +got):\n%s", events.Skipped, diff)
			}
			if second.err != nil || second.res == nil || second.res.Text != "second" || second.res.Turn != 2 {
				t.Errorf("the next turn = %+v, %v; want its answer", second.res, second.err)
			}
			wantRuns := []string{`begin coretest thread="" resume=false`, `end "all done"`,
				fmt.Sprintf("begin coretest thread=%q resume=false", testWorkflowID), `end "second"`}
			if c.refund >= 0 {
				wantRuns = append([]string{`begin coretest thread="" resume=false`, "end error FailedPrecondition",
					fmt.Sprintf("begin coretest thread=%q resume=true", testWorkflowID)}, wantRuns[1:]...)
			}
			if diff := cmp.Diff(wantRuns, e.runs.get()); diff != "" {
				t.Errorf("run hook (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContinueInTurnEnds: a turn carried into the new run that was
// canceled as the run continued (the cancel signal came while the updates
// answered) ends Canceled, and one whose time passed ends
// DeadlineExceeded: no call left runs, and the service's turn is
// canceled. A wait for another turn than the thread's is refused.
func TestContinueInTurnEnds(t *testing.T) {
	for _, c := range []struct {
		name  string
		carry func(*turnState)
		code  errcode.Code
		is    error
	}{
		{"canceled", func(ts *turnState) { ts.Canceled = true }, errcode.Canceled, context.Canceled},
		{"time passed", func(ts *turnState) { ts.Deadline = ts.Deadline.Add(-time.Hour) }, errcode.DeadlineExceeded, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, longTurn(-1), LoopOptions{Concurrency: 1, RunTimeout: 30 * time.Minute})
			hooks := newRunHooks(e.runner)
			e.shareHooks(hooks)
			calls := 0
			e.te.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				if info.ActivityType.Name == activityCall {
					if calls++; calls == 2 {
						e.te.SetContinueAsNewSuggested(true)
					}
				}
			})
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather everywhere"})
			st := e.continued()
			c.carry(st.Running)
			ran := e.calls.Load()
			n := e.next(hooks, st)
			var other, wait outcome
			n.update(time.Second, UpdateWait, &other, waitRequest{Turn: 7})
			n.update(2*time.Second, UpdateWait, &wait, waitRequest{Turn: 1})
			n.run()
			if err := clientError("wait", other.err); errcode.Of(err) != errcode.FailedPrecondition {
				t.Errorf("wait for turn 7 = %+v, %v; want FailedPrecondition", other.res, err)
			}
			if wait.err != nil || wait.res == nil || !wait.res.Done || wait.res.Err == nil {
				t.Fatalf("wait = %+v, %v; want the turn ended with an error", wait.res, wait.err)
			}
			if err := wait.res.Err.Err(); errcode.Of(err) != c.code || !errors.Is(err, c.is) {
				t.Errorf("the turn's error %v (code %v), want %v matching %v", err, errcode.Of(err), c.code, c.is)
			}
			if got := e.calls.Load(); got != ran {
				t.Errorf("%d calls ran in the new run, want none", got-ran)
			}
			r := e.backend.Received()
			if len(r) == 0 || r[len(r)-1].Kind != "cancel" {
				t.Errorf("the service received %+v, want its turn canceled last", r)
			}
		})
	}
}

// TestFitState: a carried turn too large for MaxPayloadBytes drops, in
// order, its first events, its earlier steps' results, the approvals of
// the calls that ran, the largest outputs of the step's calls that ran;
// never the step, the calls left or their approvals; it fits whenever
// fitState says so, and below what it cannot drop, it does not.
func TestFitState(t *testing.T) {
	big := strings.Repeat("x", 2000)
	step := &stepResult{Backend: "coretest", Step: &driver.Step{Thread: "th", Turn: "tu", Calls: []driver.Call{
		{ID: "c0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
		{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"A1","amount":500}`)},
	}}}
	approval := func(id string) core.Approval {
		a := core.Approval{Tool: "refund", Why: "over 100"}
		a.Key.Call = id
		return a
	}
	carried := func() State {
		ts := &turnState{Step: step, Calls: []int{1}, Done: []callDone{{Index: 0, Result: driver.ToolResult{Call: step.Step.Calls[0], Output: driver.Output{Text: big}}}},
			Pending: []core.Approval{approval("earlier"), approval("c1")}}
		for range 4 {
			ts.Result.Calls = append(ts.Result.Calls, driver.ToolResult{Output: driver.Output{Text: big}})
		}
		for range 10 {
			ts.Events = append(ts.Events, event{Kind: core.EventCallFinished, Text: big})
		}
		return State{Turns: 1, Running: ts}
	}
	full := size(carried())
	floor := 0 // the least size that fitted
	for max := full; max > 0; max -= full / 200 {
		st := carried()
		fits := fitState(&st, max)
		ts := st.Running
		got := size(st)
		if fits != (got <= max) {
			t.Fatalf("max %d: fitState = %v at %d bytes", max, fits, got)
		}
		if fits {
			floor = got
		}
		if max == full && (ts.Dropped != 0 || ts.Result.CallsOmitted || len(ts.Pending) != 2 || ts.Done[0].Result.Outcome == core.TooLarge) {
			t.Fatalf("max %d (its size): dropped something: %+v", max, ts)
		}
		// The order: nothing is dropped before what comes first goes.
		omitted, approvals, outputs := ts.Result.CallsOmitted, len(ts.Pending) < 2, ts.Done[0].Result.Outcome == core.TooLarge
		if omitted && len(ts.Events) > 0 || approvals && !omitted || outputs && !approvals {
			t.Fatalf("max %d: dropped out of order: %d events kept, calls omitted %v, %d approvals, output replaced %v", max, len(ts.Events), omitted, len(ts.Pending), outputs)
		}
		if ts.Dropped+len(ts.Events) != 10 || ts.Step != step || !cmp.Equal(ts.Calls, []int{1}) || !slices.ContainsFunc(ts.Pending, func(a core.Approval) bool { return a.Key.Call == "c1" }) {
			t.Fatalf("max %d: dropped what the turn needs: %+v", max, ts)
		}
	}
	if floor == 0 || floor >= full/4 {
		t.Errorf("the least carried state that fitted is %d bytes of %d", floor, full)
	}
}

// TestEventsGoneBetweenTurns: once the workflow continued as new after a
// turn (the server suggested it), a reader that had not read all of the
// turn's events is told they are gone (and takes the turn's answer from
// its update), rather than finding none, for ever.
func TestEventsGoneBetweenTurns(t *testing.T) {
	e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "one"}}}}}, LoopOptions{})
	e.te.SetContinueAsNewSuggested(true)
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather?"})
	st := e.continued()
	if run.err != nil || run.res == nil || !run.res.Done || st.Running != nil || st.Last == nil {
		t.Fatalf("run = %+v, %v; continued with %+v; want the turn done, then continued as new", run.res, run.err, st)
	}
	n := e.next(newRunHooks(e.runner), st)
	var page eventsPage
	n.te.RegisterDelayedCallback(func() {
		v, err := n.te.QueryWorkflow(QueryEvents, eventsRequest{Turn: 1, After: 1})
		if err == nil {
			err = v.Get(&page)
		}
		if err != nil {
			t.Errorf("events: %v", err)
		}
	}, time.Second)
	n.run()
	if diff := cmp.Diff(eventsPage{Turn: 1, Gone: true}, page); diff != "" {
		t.Errorf("the events of the turn before (-want +got):\n%s", diff)
	}
}
