package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// agentChild is an agent tool's child for the tests: a runner on a
// coretest backend of its own whose refund runs fn, counted.
type agentChild struct {
	backend *coretest.Backend
	runner  *core.Runner
	tool    *core.Tool // the agent tool "ask" over it
	refunds atomic.Int32
}

func newAgentChild(t *testing.T, fn func(context.Context) (string, error)) *agentChild {
	return newAgentChildWith(t, fn, nil)
}

// refundStep is a step of the child's: one refund.
var refundStep = coretest.Step{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order":"7","amount":50}`)}}}

// newAgentChildWith is newAgentChild with the refund's options o.
func newAgentChildWith(t *testing.T, fn func(context.Context) (string, error), o *core.ToolOptions) *agentChild {
	return newAgentChildOn(t, []coretest.Step{refundStep, {Text: `child: {{output "refund"}}`}}, fn, o)
}

// newAgentChildOn is newAgentChildWith with the child's steps.
func newAgentChildOn(t *testing.T, steps []coretest.Step, fn func(context.Context) (string, error), o *core.ToolOptions) *agentChild {
	t.Helper()
	return newAgentOn(t, "ask", "asks the refund agent", steps, fn, o, core.Budget{})
}

// newAgentMiddle is an agent between the parent and inner, the agent
// tool "outer" over a runner whose tools are a refund of its own and
// inner's agent tool ("ask"), on its steps, its budget b.
func newAgentMiddle(t *testing.T, steps []coretest.Step, inner *agentChild, b core.Budget) *agentChild {
	t.Helper()
	return newAgentOn(t, "outer", "asks the middle agent", steps, func(context.Context) (string, error) { return "refunded", nil }, nil, b, inner.tool)
}

// newAgentOn is newAgentChildOn with the agent tool's name and
// description, the budget of the child's runner (core.Options.Budget),
// and more tools for it.
func newAgentOn(t *testing.T, name, desc string, steps []coretest.Step, fn func(context.Context) (string, error), o *core.ToolOptions, b core.Budget, extra ...*core.Tool) *agentChild {
	t.Helper()
	ch := &agentChild{}
	refund := must(core.NewTool("refund", "refunds an order", func(ctx context.Context, in refundArgs) (string, error) {
		ch.refunds.Add(1)
		return fn(ctx)
	}, o))
	ch.backend = coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: steps}}}, nil)
	ch.runner = core.NewRunner(ch.backend, must(core.NewToolbox(append([]*core.Tool{refund}, extra...)...)), &core.Options{Logger: quiet, Budget: b})
	t.Cleanup(func() { ch.runner.Close() })
	ch.tool = must(core.NewAgentTool(name, desc, ch.runner, nil))
	return ch
}

// inputs returns the inputs the child's backend received.
func (ch *agentChild) inputs() []string {
	var in []string
	for _, r := range ch.backend.Received() {
		if r.Kind == "input" {
			in = append(in, r.Input)
		}
	}
	return in
}

func askScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "ask", Arguments: json.RawMessage(`{"input":"refund order 7"}`), ID: "call_ask"}}},
		{Text: `parent: {{output "ask"}}`},
	}}}}
}

// TestAgentChildWorkflow: an agent tool's call runs its child as a child
// workflow (its id the parent's, the turn's and the call's), its steps and
// calls activities over the child's runner; the call's activity, dying
// after it made the call's result of the child's answer, runs again and
// makes it again: one child turn, one refund.
func TestAgentChildWorkflow(t *testing.T) {
	ch := newAgentChild(t, func(context.Context) (string, error) { return "refunded", nil })
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	a := &activities{r: e.runner, hooks: e.runner.Hooks()}
	attempts := dieOnce(e, activityCall, true, func(req *callRequest) bool { return req.Call.Name == "ask" }, a.Call)
	var children []string
	e.te.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		children = append(children, info.WorkflowType.Name+" "+info.WorkflowExecution.ID)
	})
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.run()
	if run.err != nil || run.res == nil || run.res.Err != nil || run.res.Text != "parent: child: refunded" {
		t.Fatalf("run = %+v, %v; want the parent's answer quoting the child's", run.res, run.err)
	}
	if diff := cmp.Diff([]string{AgentWorkflowName + " " + testWorkflowID + "/1/call_ask"}, children); diff != "" {
		t.Errorf("child workflows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{1, 2}, *attempts); diff != "" {
		t.Errorf("attempts of the agent call's activity (-want +got):\n%s", diff)
	}
	if n := ch.refunds.Load(); n != 1 {
		t.Errorf("the child's refund ran %d times, want 1", n)
	}
	if diff := cmp.Diff([]string{"refund order 7"}, ch.inputs()); diff != "" {
		t.Errorf("the child's backend's inputs (-want +got):\n%s", diff)
	}
}

// TestAgentChildCanceled: the cancel signal, in the middle of the child's
// call (a minute long), cancels the child workflow, and the parent's turn
// ends Canceled at once, no result sent. (That the child's handler sees
// its context end, which the test environment does not do, is the
// conformance suite's AgentTool/Cancel on a real server.)
func TestAgentChildCanceled(t *testing.T) {
	ch := newAgentChild(t, func(context.Context) (string, error) { return "refunded", nil })
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	a := &activities{r: e.runner, hooks: e.runner.Hooks()}
	e.te.OnActivity(activityCall, mock.Anything, mock.Anything).After(time.Minute).Return(a.Call)
	var canceled []string
	e.te.SetOnChildWorkflowCanceledListener(func(info *workflow.Info) { canceled = append(canceled, info.WorkflowExecution.ID) })
	e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, 2*time.Second)
	var run, wait outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.update(3*time.Second, UpdateWait, &wait)
	e.run()
	if run.err != nil || run.res == nil || run.res.Err == nil || len(run.res.Calls) != 0 {
		t.Fatalf("run = %+v, %v; want the turn ended with an error, no result sent", run.res, run.err)
	}
	if err := run.res.Err.Err(); !errors.Is(err, context.Canceled) || errcode.Of(err) != errcode.Canceled {
		t.Errorf("the turn's error = %v, want Canceled", err)
	}
	if wait.err != nil || wait.res == nil || !wait.res.Done {
		t.Errorf("wait a second after the cancel = %+v, %v; want the turn ended", wait.res, wait.err)
	}
	if diff := cmp.Diff([]string{testWorkflowID + "/1/call_ask"}, canceled); diff != "" {
		t.Errorf("child workflows canceled (-want +got):\n%s", diff)
	}
}

// TestAgentChildApproval: the child's refund, which needs approval,
// pauses the parent's turn on a copy of it (its call id the parent's
// call's, "/" and the child's), listed by the approvals query; the
// parent's decide update refuses edited arguments, takes the decision and
// hands it to the child, whose refund runs once; the parent's turn goes
// on to its answer.
func TestAgentChildApproval(t *testing.T) {
	ch := newAgentChildWith(t, func(context.Context) (string, error) { return "refunded", nil }, &core.ToolOptions{Approval: core.ApprovalAlways("every refund")})
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	var run, edited, decide, wait outcome
	var listed []core.Approval
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.te.RegisterDelayedCallback(func() {
		v, err := e.te.QueryWorkflow(QueryApprovals)
		if err == nil {
			err = v.Get(&listed)
		}
		if err != nil {
			t.Errorf("approvals query: %v", err)
		}
	}, 2*time.Second)
	e.update(3*time.Second, UpdateDecide, &edited, decideRequest{CallID: "call_ask/call_1", Decision: core.Decision{Approved: true, Arguments: json.RawMessage(`{"order":"8","amount":1}`)}})
	e.update(4*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_ask/call_1", Decision: core.Decision{Approved: true, Actor: "ops"}})
	e.update(5*time.Second, UpdateWait, &wait)
	e.run()
	if run.err != nil || run.res == nil || run.res.Done || len(run.res.Pending) != 1 {
		t.Fatalf("run = %+v, %v; want a pause on the child's refund", run.res, run.err)
	}
	p := run.res.Pending[0]
	if p.Key.Call != "call_ask/call_1" || p.Tool != "refund" || p.Why != "every refund" || p.Key.Thread == "" {
		t.Errorf("pending = %+v, want the copy of the child's refund under the parent's call", p)
	}
	if len(listed) != 1 || listed[0].Key != p.Key {
		t.Errorf("approvals query = %+v, want the copy", listed)
	}
	if got := errcode.Of(clientError("decide", edited.err)); got != errcode.InvalidArgument {
		t.Errorf("decide with edited arguments: %v (code %v), want InvalidArgument", edited.err, got)
	}
	if decide.err != nil || wait.err != nil || wait.res == nil || !wait.res.Done || wait.res.Text != "parent: child: refunded" {
		t.Fatalf("decide: %v; wait = %+v, %v; want the parent's answer", decide.err, wait.res, wait.err)
	}
	if n := ch.refunds.Load(); n != 1 || len(ch.inputs()) != 1 {
		t.Errorf("refunds %d, child inputs %v; want 1 and 1", n, ch.inputs())
	}
}

// TestAgentChildRunHook: the child runner's Run hook is called for the
// child's turn, as core's Runner calls it for a child run there (begin,
// and end with the child's answer); the parent's, for the parent's turn.
func TestAgentChildRunHook(t *testing.T) {
	var childRuns runLog
	refund := must(core.NewTool("refund", "refunds an order", func(context.Context, refundArgs) (string, error) { return "refunded", nil }, nil))
	cb := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{refundStep, {Text: `child: {{output "refund"}}`}}}}}, nil)
	child := core.NewRunner(cb, must(core.NewToolbox(refund)), &core.Options{Logger: quiet, Hooks: &core.Hooks{Run: childRuns.hook}})
	t.Cleanup(func() { child.Close() })
	e := newEnv(t, askScript(), LoopOptions{}, must(core.NewAgentTool("ask", "asks the refund agent", child, nil)))
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.run()
	if run.err != nil || run.res == nil || run.res.Text != "parent: child: refunded" {
		t.Fatalf("run = %+v, %v", run.res, run.err)
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"child's", childRuns.get(), []string{`begin coretest thread="" resume=false`, `end "child: refunded"`}},
		{"parent's", e.runs.get(), []string{`begin coretest thread="" resume=false`, `end "parent: child: refunded"`}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("the %s Run hook (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestAgentChildApprovalCanceled: the cancel signal ends a turn paused on
// its child's approval, at once or past the turn's time limit (which the
// pause stopped): the child workflow is canceled, the refund never runs,
// and a wait after it returns the turn's end (Canceled), not the pause.
func TestAgentChildApprovalCanceled(t *testing.T) {
	for _, c := range []struct {
		name string
		set  LoopOptions
		at   time.Duration // the signal's
	}{
		{"at once", LoopOptions{}, 2 * time.Second},
		{"past the time limit", LoopOptions{RunTimeout: time.Minute, ApprovalTimeout: time.Hour}, 10 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := newAgentChildWith(t, func(context.Context) (string, error) { return "refunded", nil }, &core.ToolOptions{Approval: core.ApprovalAlways("every refund")})
			e := newEnv(t, askScript(), c.set, ch.tool)
			var canceled []string
			e.te.SetOnChildWorkflowCanceledListener(func(info *workflow.Info) { canceled = append(canceled, info.WorkflowExecution.ID) })
			var run, wait outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
			// The wait comes with the signal, as Runner.Cancel sends it,
			// before the child's cancellation reached the turn.
			e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, c.at)
			e.update(c.at, UpdateWait, &wait)
			e.run()
			if run.err != nil || run.res == nil || len(run.res.Pending) != 1 {
				t.Fatalf("run = %+v, %v; want a pause on the child's refund", run.res, run.err)
			}
			if wait.err != nil || wait.res == nil || !wait.res.Done || len(wait.res.Pending) != 0 || wait.res.Err == nil || errcode.Of(wait.res.Err.Err()) != errcode.Canceled {
				t.Fatalf("wait after the cancel = %+v, %v; want the turn ended Canceled", wait.res, wait.err)
			}
			if diff := cmp.Diff([]string{testWorkflowID + "/1/call_ask"}, canceled); diff != "" {
				t.Errorf("child workflows canceled (-want +got):\n%s", diff)
			}
			if n := ch.refunds.Load(); n != 0 {
				t.Errorf("the refund ran %d times; want none", n)
			}
		})
	}
}

// TestAgentChildNested: an agent whose child has an agent tool of its
// own runs it as a child workflow of its own, its activities over the
// runner at the path "outer/ask".
func TestAgentChildNested(t *testing.T) {
	inner := newAgentChild(t, func(context.Context) (string, error) { return "refunded", nil })
	mb := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "ask", Arguments: json.RawMessage(`{"input":"refund order 7"}`), ID: "call_ask"}}},
		{Text: `middle: {{output "ask"}}`},
	}}}}, nil)
	middle := core.NewRunner(mb, must(core.NewToolbox(inner.tool)), &core.Options{Logger: quiet})
	t.Cleanup(func() { middle.Close() })
	outer := must(core.NewAgentTool("outer", "asks the middle agent", middle, nil))
	e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "outer", Arguments: json.RawMessage(`{"input":"go deeper"}`), ID: "call_outer"}}},
		{Text: `parent: {{output "outer"}}`},
	}}}}, LoopOptions{}, outer)
	var children []string
	e.te.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		children = append(children, info.WorkflowExecution.ID)
	})
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.run()
	if run.err != nil || run.res == nil || run.res.Err != nil || run.res.Text != "parent: middle: child: refunded" {
		t.Fatalf("run = %+v, %v; want the answers nested", run.res, run.err)
	}
	want := []string{testWorkflowID + "/1/call_outer", testWorkflowID + "/1/call_outer/1/call_ask"}
	if diff := cmp.Diff(want, children); diff != "" {
		t.Errorf("child workflows (-want +got):\n%s", diff)
	}
	if n := inner.refunds.Load(); n != 1 {
		t.Errorf("the inner refund ran %d times, want 1", n)
	}
}

// TestAgentChildOwnBudget: a child stopped on its own budget gives the
// call a failed result saying so, as on core's Runner, and its service's
// turn is canceled, not left waiting: the parent's turn goes on to its
// answer.
func TestAgentChildOwnBudget(t *testing.T) {
	ch := &agentChild{}
	refund := must(core.NewTool("refund", "refunds an order", func(context.Context, refundArgs) (string, error) {
		ch.refunds.Add(1)
		return "refunded", nil
	}, nil))
	step := coretest.Step{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order":"7","amount":50}`)}}}
	ch.backend = coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, step, {Text: "never"}}}}}, nil)
	ch.runner = core.NewRunner(ch.backend, must(core.NewToolbox(refund)), &core.Options{Logger: quiet, Budget: core.Budget{MaxToolCalls: 1}})
	t.Cleanup(func() { ch.runner.Close() })
	ch.tool = must(core.NewAgentTool("ask", "asks the refund agent", ch.runner, nil))
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.run()
	if run.err != nil || run.res == nil || run.res.Err != nil || run.res.Text != `parent: agent "ask" stopped: its budget is spent` {
		t.Fatalf("run = %+v (%+v), %v; want the parent's answer quoting the failed call", run.res, run.res.Err, run.err)
	}
	var kinds []string
	for _, r := range ch.backend.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "results", "cancel"}, kinds); diff != "" || ch.refunds.Load() != 1 {
		t.Errorf("the child's backend received (-want +got):\n%s(refunds %d, want 1)", diff, ch.refunds.Load())
	}
}

// TestAgentChildParentBudget: the child runs under what the parent's
// budget had left: past it, both stop, the parent's turn with
// ErrBudgetExceeded and no result sent; a resume with the same budget
// stops again, running nothing; one with a raised budget goes on with the
// same child turn, whose calls the parent counts.
func TestAgentChildParentBudget(t *testing.T) {
	ch := newAgentChildOn(t, []coretest.Step{refundStep, refundStep, {Text: "child: done"}}, func(context.Context) (string, error) { return "refunded", nil }, nil)
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	var run, same, raised outcome
	two := core.Budget{MaxToolCalls: 2}
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: two})
	e.update(2*time.Second, UpdateResume, &same, resumeRequest{Budget: two})
	var refundsThen int32
	e.te.RegisterDelayedCallback(func() { refundsThen = ch.refunds.Load() }, 2500*time.Millisecond)
	e.update(3*time.Second, UpdateResume, &raised, resumeRequest{Budget: core.Budget{MaxToolCalls: 4}})
	e.run()
	for _, c := range []struct {
		name string
		o    outcome
	}{{"run", run}, {"resume with the same budget", same}} {
		if c.o.err != nil || c.o.res == nil || c.o.res.Err == nil {
			t.Fatalf("%s = %+v, %v; want the turn stopped on its budget", c.name, c.o.res, c.o.err)
		}
		if err := c.o.res.Err.Err(); !errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted || len(c.o.res.Calls) != 0 {
			t.Errorf("%s: %v (results %d); want ErrBudgetExceeded, ResourceExhausted, no result sent", c.name, err, len(c.o.res.Calls))
		}
	}
	if refundsThen != 1 {
		t.Errorf("refunds after the resume with the same budget: %d, want 1", refundsThen)
	}
	if raised.err != nil || raised.res == nil || raised.res.Err != nil || raised.res.Text != "parent: child: done" || raised.res.ToolCalls != 3 {
		t.Fatalf("resume with a raised budget = %+v, %v; want the answer, 3 tool calls counted", raised.res, raised.err)
	}
	if n := ch.refunds.Load(); n != 2 || len(ch.inputs()) != 1 {
		t.Errorf("refunds %d, child inputs %v; want 2 and one", n, ch.inputs())
	}
}

// TestAgentChildParentBudgetTimeLimit: a turn stopped on a child held on
// what its budget left it, and the child held so, wait for a resume
// without their time limits running: a resume ten minutes later, past a
// time limit of a minute, finishes both.
func TestAgentChildParentBudgetTimeLimit(t *testing.T) {
	ch := newAgentChildOn(t, []coretest.Step{refundStep, refundStep, {Text: "child: done"}}, func(context.Context) (string, error) { return "refunded", nil }, nil)
	e := newEnv(t, askScript(), LoopOptions{RunTimeout: time.Minute}, ch.tool)
	e.te.SetTestTimeout(time.Minute)
	var run, raised outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: core.Budget{MaxToolCalls: 2}})
	e.update(10*time.Minute, UpdateResume, &raised, resumeRequest{Budget: core.Budget{MaxToolCalls: 4}})
	e.run()
	if run.err != nil || run.res == nil || run.res.Err == nil || !errors.Is(run.res.Err.Err(), core.ErrBudgetExceeded) {
		t.Fatalf("run = %+v, %v; want the turn stopped on its budget", run.res, run.err)
	}
	if raised.err != nil || raised.res == nil || raised.res.Err != nil || raised.res.Text != "parent: child: done" {
		t.Fatalf("resume ten minutes later = %+v, %v; want the answer", raised.res, raised.err)
	}
	if n := ch.refunds.Load(); n != 2 {
		t.Errorf("refunds %d, want 2", n)
	}
}

// cancelHeld runs a turn under budget that stops on a child held on what
// it had left, sends the cancel signal a second later and waits a second
// after that: it fails the test unless the turn stopped on its budget and
// then ended Canceled, and returns the child workflows canceled.
func (e *env) cancelHeld(t *testing.T, budget core.Budget) (canceled []string) {
	t.Helper()
	e.te.SetOnChildWorkflowCanceledListener(func(info *workflow.Info) { canceled = append(canceled, info.WorkflowExecution.ID) })
	var run, wait outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: budget})
	e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, 2*time.Second)
	e.update(3*time.Second, UpdateWait, &wait)
	e.run()
	if run.res == nil || run.res.Err == nil || !errors.Is(run.res.Err.Err(), core.ErrBudgetExceeded) {
		t.Fatalf("run = %+v, %v; want the turn stopped on its budget", run.res, run.err)
	}
	if wait.err != nil || wait.res == nil || wait.res.Err == nil || errcode.Of(wait.res.Err.Err()) != errcode.Canceled {
		t.Fatalf("wait after the cancel = %+v, %v; want the turn ended Canceled", wait.res, wait.err)
	}
	return canceled
}

// TestAgentChildParentBudgetCanceled: the cancel signal ends a turn
// stopped on a child held on its budget: the child workflow is canceled,
// and the turn ends Canceled (no longer the budget's error).
func TestAgentChildParentBudgetCanceled(t *testing.T) {
	ch := newAgentChildOn(t, []coretest.Step{refundStep, refundStep, {Text: "child: done"}}, func(context.Context) (string, error) { return "refunded", nil }, nil)
	e := newEnv(t, askScript(), LoopOptions{}, ch.tool)
	canceled := e.cancelHeld(t, core.Budget{MaxToolCalls: 2})
	if diff := cmp.Diff([]string{testWorkflowID + "/1/call_ask"}, canceled); diff != "" || ch.refunds.Load() != 1 {
		t.Errorf("child workflows canceled (-want +got):\n%s(refunds %d, want 1)", diff, ch.refunds.Load())
	}
}

// newNestedRefunds returns a parent, its agent "outer" (the middle, its
// budget b), and the middle's agent "ask" (the grandchild), each of which
// refunds once, then calls its agent, then answers quoting it (the
// grandchild: its refund).
func newNestedRefunds(t *testing.T, b core.Budget) (e *env, middle, inner *agentChild) {
	t.Helper()
	inner = newAgentChild(t, func(context.Context) (string, error) { return "refunded", nil })
	middle = newAgentMiddle(t, []coretest.Step{refundStep,
		{Calls: []coretest.Call{{Name: "ask", Arguments: json.RawMessage(`{"input":"refund order 7"}`), ID: "call_ask"}}},
		{Text: `middle: {{output "ask"}}`},
	}, inner, b)
	e = newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{refundStep,
		{Calls: []coretest.Call{{Name: "outer", Arguments: json.RawMessage(`{"input":"go deeper"}`), ID: "call_outer"}}},
		{Text: `parent: {{output "outer"}}`},
	}}}}, LoopOptions{}, middle.tool)
	return e, middle, inner
}

// TestAgentChildGrandparentBudget: with nested agents (the parent, its
// agent "outer", whose agent "ask" is the grandchild), each first
// refunding once, the grandchild runs under the tighter of the middle's
// own budget and what the middle's cap leaves it: the parent's budget of
// 4 calls leaves the middle 2 once the parent's calls are counted, and
// the grandchild none once the middle's are. The grandchild stops before
// its refund runs, the middle's turn and the parent's with it, the
// parent's with ErrBudgetExceeded; a resume with the same budget stops
// all three again; one with a raised budget (6) reaches the grandchild
// through the middle, and all three go on to their answers, each refund
// run once and each agent's turn begun once.
func TestAgentChildGrandparentBudget(t *testing.T) {
	e, middle, inner := newNestedRefunds(t, core.Budget{})
	refunds := func() []int32 { return []int32{e.refunds.Load(), middle.refunds.Load(), inner.refunds.Load()} }
	var run, same, raised outcome
	var atStop, atSame []int32
	four := core.Budget{MaxToolCalls: 4}
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: four})
	e.te.RegisterDelayedCallback(func() { atStop = refunds() }, 1500*time.Millisecond)
	e.update(2*time.Second, UpdateResume, &same, resumeRequest{Budget: four})
	e.te.RegisterDelayedCallback(func() { atSame = refunds() }, 2500*time.Millisecond)
	e.update(3*time.Second, UpdateResume, &raised, resumeRequest{Budget: core.Budget{MaxToolCalls: 6}})
	e.run()
	for _, c := range []struct {
		name    string
		o       outcome
		refunds []int32
	}{{"run", run, atStop}, {"resume with the same budget", same, atSame}} {
		if c.o.err != nil || c.o.res == nil || c.o.res.Err == nil {
			t.Fatalf("%s = %+v, %v; want the turn stopped on its budget", c.name, c.o.res, c.o.err)
		}
		if err := c.o.res.Err.Err(); !errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted || len(c.o.res.Calls) != 1 {
			t.Errorf("%s: %v (results %d); want ErrBudgetExceeded, ResourceExhausted, only the parent's refund's result sent", c.name, err, len(c.o.res.Calls))
		}
		if diff := cmp.Diff([]int32{1, 1, 0}, c.refunds); diff != "" {
			t.Errorf("%s: refunds of the parent, the middle and the grandchild (-want +got):\n%s", c.name, diff)
		}
	}
	if raised.err != nil || raised.res == nil || raised.res.Err != nil || raised.res.Text != "parent: middle: child: refunded" || raised.res.ToolCalls != 5 {
		t.Fatalf("resume with a raised budget = %+v, %v; want the answers nested, 5 tool calls counted", raised.res, raised.err)
	}
	if diff := cmp.Diff([]int32{1, 1, 1}, refunds()); diff != "" {
		t.Errorf("refunds of the parent, the middle and the grandchild (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"go deeper"}, {"refund order 7"}}, [][]string{middle.inputs(), inner.inputs()}); diff != "" {
		t.Errorf("the inputs of the middle's and the grandchild's backends (-want +got):\n%s", diff)
	}
}

// TestAgentChildGrandparentBudgetCanceled: the cancel signal ends a turn
// stopped on its grandchild held on its budget (see
// TestAgentChildGrandparentBudget): both child workflows are canceled,
// and the turn ends Canceled, the grandchild's refund never run.
func TestAgentChildGrandparentBudgetCanceled(t *testing.T) {
	e, middle, inner := newNestedRefunds(t, core.Budget{})
	canceled := e.cancelHeld(t, core.Budget{MaxToolCalls: 4})
	slices.Sort(canceled)
	want := []string{testWorkflowID + "/1/call_outer", testWorkflowID + "/1/call_outer/1/call_ask"}
	if diff := cmp.Diff(want, canceled); diff != "" {
		t.Errorf("child workflows canceled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{1, 1, 0}, []int32{e.refunds.Load(), middle.refunds.Load(), inner.refunds.Load()}); diff != "" {
		t.Errorf("refunds of the parent, the middle and the grandchild (-want +got):\n%s", diff)
	}
}

// TestAgentChildGrandparentOwnBudget: a grandchild held on what the
// middle's own budget (2 calls) had left stops the parent's turn, which
// has no budget, with ErrBudgetExceeded, as on core's Runner, rather than
// leave it waiting; a resume with a budget of the parent's stops again
// (it raises no budget of the middle's), and the cancel signal ends the
// turn Canceled, the grandchild's refund never run.
func TestAgentChildGrandparentOwnBudget(t *testing.T) {
	e, middle, inner := newNestedRefunds(t, core.Budget{MaxToolCalls: 2})
	var run, raised, wait outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	e.update(2*time.Second, UpdateResume, &raised, resumeRequest{Budget: core.Budget{MaxToolCalls: 100}})
	e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, 3*time.Second)
	e.update(4*time.Second, UpdateWait, &wait)
	e.run()
	for _, c := range []struct {
		name string
		o    outcome
	}{{"run", run}, {"resume with a budget of the parent's", raised}} {
		if c.o.err != nil || c.o.res == nil || c.o.res.Err == nil {
			t.Fatalf("%s = %+v, %v; want the turn stopped on its budget", c.name, c.o.res, c.o.err)
		}
		if err := c.o.res.Err.Err(); !errors.Is(err, core.ErrBudgetExceeded) {
			t.Errorf("%s: %v; want ErrBudgetExceeded", c.name, err)
		}
	}
	if wait.err != nil || wait.res == nil || wait.res.Err == nil || errcode.Of(wait.res.Err.Err()) != errcode.Canceled {
		t.Fatalf("wait after the cancel = %+v, %v; want the turn ended Canceled", wait.res, wait.err)
	}
	if diff := cmp.Diff([]int32{1, 1, 0}, []int32{e.refunds.Load(), middle.refunds.Load(), inner.refunds.Load()}); diff != "" {
		t.Errorf("refunds of the parent, the middle and the grandchild (-want +got):\n%s", diff)
	}
}

// TestAgentChildCap: the cap of an agent call's child is, in each field,
// the tighter of what the turn's budget leaves and what the agent's own
// cap leaves once the agent's spend is counted; a field below zero, and
// a Remaining not Set, set no limit.
func TestAgentChildCap(t *testing.T) {
	const un = core.Unlimited
	rem := func(in, out, total, calls int64, cost float64) *core.Remaining {
		return &core.Remaining{Set: true, InputTokens: in, OutputTokens: out, TotalTokens: total, ToolCalls: calls, Cost: cost}
	}
	spent := driver.Spent{Usage: driver.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, ToolCalls: 2, Cost: 0.5}
	for _, c := range []struct {
		name   string
		budget core.Budget     // the turn's
		cap    *core.Remaining // the agent's, nil in a thread's workflow
		want   core.Remaining
	}{
		{"no budget, no cap", core.Budget{}, nil, core.Remaining{}},
		{"the budget alone", core.Budget{MaxToolCalls: 5}, nil, *rem(un, un, un, 3, un)},
		{"a cap not set", core.Budget{MaxToolCalls: 5}, &core.Remaining{}, *rem(un, un, un, 3, un)},
		{"the cap alone", core.Budget{}, rem(100, un, 20, 4, 2), *rem(90, un, 5, 2, 1.5)},
		{"the cap spent past", core.Budget{}, rem(5, un, un, 1, 0.25), *rem(0, un, un, 0, 0)},
		{"each field the tighter", core.Budget{MaxInputTokens: 50, MaxTotalTokens: 100, MaxToolCalls: 3, MaxCost: 1}, rem(100, 50, 20, un, 2), *rem(40, 45, 5, 1, 0.5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := &thread{cap: c.cap}
			if diff := cmp.Diff(c.want, th.childCap(&turnRun{budget: c.budget}, spent)); diff != "" {
				t.Errorf("childCap (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentChildApprovalTimeLimit: the parent's time limit (a minute)
// does not run while its turn is paused on its child's approval, as it
// does not on its own calls': a decision ten minutes after the pause lets
// the turn go on, the refund run once; and the time limit starts again
// in full once the pause ends. The parent first refunds, then asks its
// agent, whose refund awaits a decision; each call takes d: the minute
// after the decision holds two calls of 25 s (though the pause came after
// the first of the parent's, which a time limit that went on from where
// it stopped would count), not two of 35 s.
func TestAgentChildApprovalTimeLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		d    time.Duration // each call's
		// text is the parent's answer, "" for a turn that passed its
		// time limit.
		text string
	}{
		{"instant calls", 0, "parent: child: refunded"},
		{"calls of 25s", 25 * time.Second, "parent: child: refunded"},
		{"calls of 35s", 35 * time.Second, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := newAgentChildWith(t, func(context.Context) (string, error) { return "refunded", nil }, &core.ToolOptions{Approval: core.ApprovalAlways("every refund")})
			e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{refundStep,
				{Calls: []coretest.Call{{Name: "ask", Arguments: json.RawMessage(`{"input":"refund order 7"}`), ID: "call_ask"}}},
				{Text: `parent: {{output "ask"}}`},
			}}}}, LoopOptions{RunTimeout: time.Minute, ApprovalTimeout: time.Hour}, ch.tool)
			if c.d > 0 {
				a := &activities{r: e.runner, hooks: e.runner.Hooks()}
				e.te.OnActivity(activityCall, mock.Anything, mock.Anything).After(c.d).Return(a.Call)
			}
			var run, decide, wait outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
			paused := time.Second + c.d // after the parent's refund
			e.update(paused+10*time.Minute, UpdateDecide, &decide, decideRequest{CallID: "call_ask/call_1", Decision: core.Decision{Approved: true, Actor: "ops"}})
			e.update(paused+15*time.Minute, UpdateWait, &wait)
			e.run()
			if run.err != nil || run.res == nil || run.res.Done || len(run.res.Pending) != 1 {
				t.Fatalf("run = %+v, %v; want a pause on the child's refund", run.res, run.err)
			}
			if decide.err != nil {
				t.Fatalf("decide ten minutes after the pause: %v", decide.err)
			}
			if wait.err != nil || wait.res == nil || !wait.res.Done {
				t.Fatalf("wait = %+v, %v; want the turn ended", wait.res, wait.err)
			}
			var err error
			if wait.res.Err != nil {
				err = wait.res.Err.Err()
			}
			if c.text != "" && (err != nil || wait.res.Text != c.text) {
				t.Errorf("the turn ended with %q, %v; want %q", wait.res.Text, err, c.text)
			}
			if c.text == "" && (!errors.Is(err, context.DeadlineExceeded) || errcode.Of(err) != errcode.DeadlineExceeded) {
				t.Errorf("the turn ended with %q, %v; want its time limit's error (DeadlineExceeded)", wait.res.Text, err)
			}
			if n := []int32{e.refunds.Load(), ch.refunds.Load()}; !slices.Equal(n, []int32{1, 1}) {
				t.Errorf("refunds of the parent and the child: %v, want one each", n)
			}
		})
	}
}

// TestAgentChildApprovalCarried: a turn that continues as new after a
// pause on its child's approval carries the deadline of its time limit
// started again when the pause ended (the decision), not the one of its
// start, which passed during the pause.
func TestAgentChildApprovalCarried(t *testing.T) {
	ch := newAgentChildWith(t, func(context.Context) (string, error) { return "refunded", nil }, &core.ToolOptions{Approval: core.ApprovalAlways("every refund")})
	e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{
			{Name: "ask", Arguments: json.RawMessage(`{"input":"refund order 7"}`), ID: "call_ask"},
			{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		}},
		{Text: `parent: {{output "ask"}}`},
	}}}}, LoopOptions{RunTimeout: time.Minute, ApprovalTimeout: time.Hour, Concurrency: 1}, ch.tool)
	var run, decide outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
	// The history asks for a new run as the decision comes: the turn
	// continues before its next call, once the agent's has ended.
	e.te.RegisterDelayedCallback(func() { e.te.SetContinueAsNewSuggested(true) }, 10*time.Minute)
	e.update(10*time.Minute, UpdateDecide, &decide, decideRequest{CallID: "call_ask/call_1", Decision: core.Decision{Approved: true, Actor: "ops"}})
	st := e.continued()
	if run.err != nil || run.res == nil || len(run.res.Pending) != 1 || decide.err != nil {
		t.Fatalf("run = %+v, %v; decide: %v; want a pause on the child's refund, decided", run.res, run.err, decide.err)
	}
	ts := st.Running
	if ts == nil || len(ts.Pending) != 1 || ts.Pending[0].Decision == nil {
		t.Fatalf("carried turn = %+v; want one with the decided copy of the child's approval", ts)
	}
	if want := ts.Pending[0].Decision.At.Add(time.Minute); !ts.Deadline.Equal(want) {
		t.Errorf("carried deadline %v, want %v (a minute after the decision)", ts.Deadline, want)
	}
	if diff := cmp.Diff([]int{1}, ts.Calls); diff != "" || ch.refunds.Load() != 1 {
		t.Errorf("calls left (-want +got):\n%s(the child's refunds %d, want 1)", diff, ch.refunds.Load())
	}
}
