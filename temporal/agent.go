package temporal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// An agent tool's call (core.NewAgentTool) runs its child as a child
// workflow of the call's thread (AgentWorkflowName): the child's turn, its
// steps and calls activities over the child's runner, which the worker
// finds by the agent's path, the names of the agent tools from the
// worker's runner down to it, joined by "/" (see activities.at). Once the
// child's turn ended, the call's activity makes the call's result of its
// outcome (core.CallRequest.Child).

// versionAgentChild marks the runs that run an agent tool's call as a
// child workflow (workflow.GetVersion, called when a step has such a
// call): before, its call activity ran the child.
const versionAgentChild = "agent-child"

// versionHoldParent marks the runs in which an agent's turn stopped on a
// child held on its cap tells the agent's parent (workflow.GetVersion,
// called when such a turn stops so, see holdParent): before, the parent
// was not told, and a workflow that did not tell it replays without the
// signal.
const versionHoldParent = "agent-hold-parent"

// versionPauseTimer marks the runs whose turn paused on its children's
// approvals stops its time limit until the pause ends, then starts it
// again in full (workflow.GetVersion, called when such a pause begins,
// see childPaused): before, the time limit went on running, and a
// workflow paused so replays without stopping its timer.
const versionPauseTimer = "agent-pause-timer"

// versionHoldTimer marks the runs whose turn, stopped on its budget while
// it still runs (a child held on what the turn left it, see childHeld; an
// agent's turn held on its cap, see parentBudget), stops its time limit
// until it goes on, then starts it again in full (workflow.GetVersion,
// called when such a stop begins): before, the time limit went on
// running, and a resume after it passed found the turn timed out.
const versionHoldTimer = "agent-hold-timer"

// holdTimer stops the time limit of the turn, which waits for a raised
// budget as a paused one waits for decisions (see pauseTimer); nothing
// on a history made before it did (versionHoldTimer).
func (t *thread) holdTimer(ctx workflow.Context) {
	if workflow.GetVersion(ctx, versionHoldTimer, workflow.DefaultVersion, 1) >= 1 {
		t.turn.pauseTimer()
	}
}

// goOnTimer starts the time limit of the turn that a pause or a hold
// stopped again, in full, as its own calls' pause does (see
// restartTimer).
func (t *thread) goOnTimer() {
	if tr := t.running; tr != nil && tr.u == t.turn {
		t.turn.restartTimer(tr.timeout)
	}
}

// joinAgent returns the path of the agent tool name of the runner at
// path.
func joinAgent(path, name string) string {
	if path == "" {
		return name
	}
	return path + "/" + name
}

// agentRequest returns the child's turn of a call of tool with args, if
// tool is an agent tool and args fit it; nil otherwise (the call goes as
// any other, and fails as any other on arguments that do not fit).
func agentRequest(tool *core.Tool, args []byte) *runRequest {
	_, ro, ok := tool.Agent()
	if !ok {
		return nil
	}
	input, err := tool.AgentInput(args)
	if err != nil {
		return nil
	}
	req := &runRequest{Input: input, MaxSteps: ro.MaxSteps, Timeout: ro.Timeout, Budget: ro.Budget}
	if f := ro.Format; f != nil {
		req.Format = &driver.Format{Name: f.Name(), Schema: f.Schema(), Strict: f.Strict()}
	}
	return req
}

// at returns the activities over the runner of the agent at path ("":
// the worker's own; see agentRunner).
func (a *activities) at(path string) (*activities, error) {
	if path == "" {
		return a, nil
	}
	r, up, err := agentRunner(a.r, path)
	if err != nil {
		return nil, err
	}
	return &activities{r: r, hooks: r.Hooks(), id: a.id, up: up}, nil
}

// agentRunner returns the runner of the agent at path ("": r): the child
// runner of the agent tool of each name of the path, from r down, as its
// toolbox has it now; and the runners of those agent tools, from r.
func agentRunner(r *core.Runner, path string) (*core.Runner, []*core.Runner, error) {
	if path == "" {
		return r, nil, nil
	}
	var up []*core.Runner
	for name := range strings.SplitSeq(path, "/") {
		var (
			child *core.Runner
			ok    bool
		)
		if tool := r.Toolbox().Lookup(name); tool != nil {
			child, _, ok = tool.Agent()
		}
		if !ok {
			return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("temporal: the worker's runner has no agent %q (no agent tool %q)", path, name), errcode.NotFound.String(), nil)
		}
		up, r = append(up, r), child
	}
	return r, up, nil
}

// agentRuns keeps, on a worker, the Run hooks of the agents its runner's
// agent tools lead to (see runHooks), by path, made when an agent's
// workflow first runs there.
type agentRuns struct {
	r  *core.Runner
	mu sync.Mutex
	by map[string]agentRun
}

// An agentRun is an agent's runner and its Run hooks.
type agentRun struct {
	r     *core.Runner
	hooks *runHooks
}

// hooks returns the Run hooks of the agent at path: nil when its runner
// has no Run hook (or the worker's runner no such agent: its activities
// fail so).
func (a *agentRuns) hooks(path string) *runHooks {
	r, _, err := agentRunner(a.r, path)
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ar, ok := a.by[path]; ok && ar.r == r {
		return ar.hooks
	}
	if a.by == nil {
		a.by = map[string]agentRun{}
	}
	h := newRunHooks(r)
	a.by[path] = agentRun{r: r, hooks: h}
	return h
}

// parents returns the agent calls of path, which led to the agent's
// runner, each with the runner that made it (core.CallRequest.Parents);
// none when path does not match the runners (a request of an older
// workflow, made without it).
func (a *activities) parents(path []driver.Call) []core.Parent {
	if len(path) == 0 || len(path) != len(a.up) {
		return nil
	}
	ps := make([]core.Parent, len(path))
	for i, c := range path {
		c.Arguments = unwrapArgs(c.Arguments)
		ps[i] = core.Parent{Runner: a.up[i], Call: c}
	}
	return ps
}

// CancelAgent is Cancel on the backend of an agent.
func (a *activities) CancelAgent(ctx context.Context, req cancelRequest) error {
	a, err := a.at(req.Agent)
	if err != nil {
		return err
	}
	return a.Cancel(ctx, req.Thread)
}

// agentCalls reports whether the workflow runs agent tools' calls as
// child workflows: not on a history made before it did.
func agentCalls(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionAgentChild, workflow.DefaultVersion, 1) >= 1
}

// runsAsChild reports whether call req, whose worker described it as need,
// runs its child as a child workflow: an agent tool's call that no
// person denied or gave other arguments.
func runsAsChild(ctx workflow.Context, req *callRequest, need approvalNeed) bool {
	if need.Agent == nil {
		return false
	}
	if d := req.Decision; d != nil && (!d.Approved || len(edited(d.Arguments)) > 0) {
		return false
	}
	return agentCalls(ctx)
}

// agentWorkflowID returns the id of the child workflow of the agent call
// c of the current turn: the same wherever and however often the turn's
// workflow runs it, so that the call has one child turn.
func (t *thread) agentWorkflowID(ctx workflow.Context, c *driver.Call) string {
	return fmt.Sprintf("%s/%d/%s", workflow.GetInfo(ctx).WorkflowExecution.ID, t.st.Turns, c.ID)
}

// agentCall runs the call req of an agent tool (need.Agent): its child's
// turn as a child workflow, then the call's activity on its outcome (in
// actx, or a local activity). The future gets the call's result.
// Canceling ctx cancels the child workflow, and waits for it to end.
func (t *thread) agentCall(ctx, actx workflow.Context, req *callRequest, need approvalNeed, sr *stepResult) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	c := &req.Call
	u, tr := t.turn, t.running
	// What the parent had left when the call started, its step's calls
	// counted, is the child's cap (see childCap).
	base := tr.res.Spent
	base.ToolCalls += len(sr.Step.Calls)
	st := agentState{Settings: t.set, Agent: joinAgent(t.agent, c.Name), Request: *need.Agent, CallID: c.ID, Path: append(slices.Clip(t.path), *c)}
	// The child's budget is its own and what the parent has left, not
	// the parent's loop's default. Its steps and calls are activities:
	// as local activities, the workflow of an agent on a backend whose
	// threads live in the process (a stateless chain) was seen run again
	// from its start in the middle of a submit, which then went twice.
	st.Settings.Budget = core.Budget{}
	st.Settings.LocalActivities = false
	if rem := t.childCap(tr, base); rem.Set {
		st.Cap = &rem
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          t.agentWorkflowID(ctx, c),
		WaitForCancellation: true,
	})
	child := workflow.ExecuteChildWorkflow(cctx, AgentWorkflowName, st)
	if u.children == nil {
		u.children = map[string]*childCall{}
	}
	u.children[c.ID] = &childCall{call: *c, backend: sr.Backend, wf: child, base: base}
	workflow.Go(ctx, func(ctx workflow.Context) {
		var out turnResult
		err := child.Get(ctx, &out)
		t.childEnded(ctx, c.ID)
		if err != nil {
			set.Set(nil, err)
			return
		}
		// The child's spend is the parent's turn's.
		tr.res.Usage.Add(out.Usage)
		tr.res.ToolCalls += out.ToolCalls
		tr.res.Cost += out.Cost
		req.Child = &out
		var cf workflow.Future
		if t.localCall(need) {
			cf = t.local(ctx, activityCall, req)
		} else {
			cf = workflow.ExecuteActivity(actx, activityCall, req)
		}
		var tr driver.ToolResult
		if err := cf.Get(ctx, &tr); err != nil {
			set.Set(nil, err)
			return
		}
		set.Set(tr, nil)
	})
	return f
}

// runAgent is the agent workflow: the child's one turn, whose outcome it
// returns; canceled, it ends the turn Canceled and ends canceled.
func runAgent(ctx workflow.Context, st agentState, hooks *runHooks) (*turnResult, error) {
	t := &thread{st: State{Settings: st.Settings, Turns: 1}, set: st.Settings.withDefaults(), turn: &turn{running: true}, agent: st.Agent, parentCall: st.CallID, path: st.Path, cap: st.Cap, hooks: hooks}
	// A stream of the parent's reads the child's events (see follower).
	if err := t.eventsQuery(ctx); err != nil {
		return nil, err
	}
	// Without a cap too: a child held on the agent's own budget holds
	// the parent (see holdParent), whose resume sends one.
	caps := workflow.GetSignalChannel(ctx, SignalAgentBudget)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var rem core.Remaining
			caps.Receive(ctx, &rem)
			t.raised(ctx, rem)
		}
	})
	t.deltaCh = workflow.GetSignalChannel(ctx, SignalDeltas)
	t.claimCh = workflow.GetSignalChannel(ctx, SignalClaim)
	t.takeChildPauses(ctx)
	t.takeDecisions(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx.Done().Receive(ctx, nil)
		t.turn.canceled = true
	})
	if err := t.runTurn(ctx, st.Request); err != nil {
		return nil, err
	}
	if h := t.st.Held; h != nil && h.Step != nil && h.Step.Step != nil {
		// Stopped on its own budget: the call's result is final, and no
		// one will resume the child's turn, which is canceled rather than
		// left waiting, as core's Runner does.
		t.cancelService(ctx, h.Step.Step.Thread)
	}
	if ctx.Err() != nil {
		return nil, temporal.NewCanceledError()
	}
	return t.st.Last, nil
}

// A childCall is an agent call of the turn whose child runs as a child
// workflow: the call, the parent's backend (which keys the copies of the
// child's approvals), and the child workflow.
type childCall struct {
	call    driver.Call
	backend string
	wf      workflow.ChildWorkflowFuture
	// base is the parent's spend when the call started (its step's
	// calls counted), which its cap is counted from; held: the child
	// waits for a raised one.
	base driver.Spent
	held bool
}

// takeChildPauses takes, for the workflow's life, the signals of its
// children's pauses (SignalAgentPaused).
func (t *thread) takeChildPauses(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SignalAgentPaused)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p agentPause
			ch.Receive(ctx, &p)
			t.childPaused(ctx, p)
		}
	})
	held := workflow.GetSignalChannel(ctx, SignalAgentHeld)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var h agentHeld
			held.Receive(ctx, &h)
			t.childHeld(ctx, h)
		}
	})
}

// takeDecisions takes, in an agent's workflow, for its life, the
// decisions its parent took about its turn's calls (SignalAgentDecide),
// as the decide update takes them: a call decided before keeps its
// decision.
func (t *thread) takeDecisions(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SignalAgentDecide)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req decideRequest
			ch.Receive(ctx, &req)
			a := t.turn.approval(req.CallID)
			if a == nil || a.Decision != nil {
				continue
			}
			d := req.Decision
			d.Arguments = nil
			if d.At.IsZero() {
				d.At = workflow.Now(ctx)
			}
			a.Decision = &d
			t.forward(ctx, req.CallID, d)
		}
	})
}

// childPaused pauses the turn on copies of the approvals the child of its
// agent call p.CallID awaits, keyed by the parent's call: its id, "/" and
// the child's call's id, as core's Runner keeps them. The turn's outcome
// is then a pause, as on its own calls' approvals, until every one is
// decided (see forward).
func (t *thread) childPaused(ctx workflow.Context, p agentPause) {
	u, tr := t.turn, t.running
	cc := u.children[p.CallID]
	if cc == nil || tr == nil || !u.running || tr.u != u {
		return
	}
	for _, a := range p.Pending {
		id := p.CallID + agentSep + a.Key.Call
		if a.Decision != nil || u.approval(id) != nil {
			continue
		}
		m := a
		m.Key.Backend, m.Key.Thread, m.Key.Turn, m.Key.Call = cc.backend, cc.call.Thread, cc.call.Turn, id
		u.pending = append(u.pending, &m)
		call := cc.call
		call.ID, call.Name, call.Arguments = id, a.Tool, a.Arguments
		u.emit(event{Kind: core.EventApprovalRequested, Thread: call.Thread, Turn: call.Turn, Step: tr.res.Steps, Call: &call, Text: a.Why})
	}
	if u.agentPaused || u.decided() {
		return
	}
	res := tr.res
	u.agentPaused, u.paused = true, true
	if workflow.GetVersion(ctx, versionPauseTimer, workflow.DefaultVersion, 1) >= 1 {
		u.pauseTimer()
	}
	paused := *res
	paused.Pending = nil
	for _, a := range u.pending {
		if a.Decision == nil {
			paused.Pending = append(paused.Pending, *a)
		}
	}
	paused.Remaining = tr.budget.Remaining(res.Spent)
	u.outcome = &paused
	t.endRun(ctx, &paused)
	u.emit(event{Kind: core.EventRunFinished, Thread: res.Thread, Turn: res.ServiceTurn, Step: res.Steps, Usage: res.Usage, Remaining: paused.Remaining,
		Err: errorInfo(&errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf("the run paused: %d call(s) await a decision: %w", len(paused.Pending), core.ErrAwaitingApproval)})})
	t.tellParent(ctx, paused.Pending)
}

// agentSep joins the id of an agent tool's call and the id of a call of
// its child in the call id of the copy of the child's approval (as in
// core's Runner).
const agentSep = "/"

// mirrored reports whether callID is that of a copy of a child's
// approval.
func mirrored(callID string) bool { return strings.Contains(callID, agentSep) }

// forward hands the decision d about the copy callID of a child's
// approval to the child, and lets the turn go on once every approval it
// awaits is decided.
func (t *thread) forward(ctx workflow.Context, callID string, d core.Decision) {
	parent, child, ok := strings.Cut(callID, agentSep)
	cc := t.turn.children[parent]
	if !ok || cc == nil {
		return
	}
	if err := cc.wf.SignalChildWorkflow(ctx, SignalAgentDecide, decideRequest{CallID: child, Decision: d}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("toolrelay: could not hand a decision to an agent call's child", "call_id", callID, "error", err)
	}
	t.goOnFromChildren(ctx)
}

// childEnded forgets the agent call callID's child, which ended: the
// copies of its approvals still undecided (its timers decided them) are
// decided so, and the turn goes on if they paused it.
func (t *thread) childEnded(ctx workflow.Context, callID string) {
	u := t.turn
	if cc := u.children[callID]; cc != nil && cc.held {
		cc.held = false
		if u.budgetHeld && !u.childrenHeld() {
			u.budgetHeld, u.outcome = false, nil
		}
	}
	delete(u.children, callID)
	for _, a := range u.pending {
		if a.Decision == nil && strings.HasPrefix(a.Key.Call, callID+agentSep) {
			a.Decision = &core.Decision{Reason: "decided in the agent's turn", Actor: "toolrelay", At: workflow.Now(ctx)}
		}
	}
	t.goOnFromChildren(ctx)
}

// goOnFromChildren ends the turn's pause on its children's approvals
// once every one is decided: the turn's time limit, which the pause
// stopped, starts again in full.
func (t *thread) goOnFromChildren(ctx workflow.Context) {
	u := t.turn
	if !u.agentPaused || !u.decided() {
		return
	}
	u.agentPaused, u.paused, u.outcome = false, false, nil
	t.goOnTimer()
	t.beginRun(ctx, true)
}

// tellParent tells the parent of an agent's workflow the approvals its
// turn paused on (SignalAgentPaused); nothing in a thread's workflow.
func (t *thread) tellParent(ctx workflow.Context, pending []core.Approval) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if t.agent == "" || parent == nil {
		return
	}
	if err := workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalAgentPaused, agentPause{CallID: t.parentCall, Pending: pending}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("toolrelay: could not tell an agent call's parent of its pause", "call_id", t.parentCall, "error", err)
	}
}

// parentBudget, in an agent's workflow under its parent's budget (cap),
// checks the child's spend s, and the next calls, against what the
// parent had left for it; past it, the child tells its parent
// (SignalAgentHeld), whose turn stops so (and each above it, see
// holdParent), and waits for a raised cap (SignalAgentBudget, sent once
// a resume of the thread's turn raised its budget), checking again.
// The error is the turn's cancellation, if it comes first.
func (t *thread) parentBudget(ctx workflow.Context, s driver.Spent, next int) error {
	for t.cap != nil && t.cap.Set {
		err := capExceeded(*t.cap, s, next)
		if err == nil {
			return nil
		}
		if parent := workflow.GetInfo(ctx).ParentWorkflowExecution; parent != nil {
			t.signalHeld(ctx, parent.ID, errorInfo(err))
		}
		t.newCap = nil
		t.holdTimer(ctx)
		if err := workflow.Await(ctx, func() bool { return t.newCap != nil || t.turn.canceled }); err != nil || t.turn.canceled {
			return t.turn.turnError(temporal.NewCanceledError())
		}
		t.goOnTimer()
		t.cap = t.newCap
	}
	return nil
}

// capExceeded returns why a child that spent s must stop before its next
// calls, under rem, what its parent's budget had left for it (core's
// rule for an agent tool's child); nil if it may go on.
func capExceeded(rem core.Remaining, s driver.Spent, next int) error {
	var why string
	switch {
	case rem.InputTokens >= 0 && s.Usage.InputTokens >= rem.InputTokens:
		why = fmt.Sprintf("input tokens %d, of the %d", s.Usage.InputTokens, rem.InputTokens)
	case rem.OutputTokens >= 0 && s.Usage.OutputTokens >= rem.OutputTokens:
		why = fmt.Sprintf("output tokens %d, of the %d", s.Usage.OutputTokens, rem.OutputTokens)
	case rem.TotalTokens >= 0 && s.Usage.TotalTokens >= rem.TotalTokens:
		why = fmt.Sprintf("total tokens %d, of the %d", s.Usage.TotalTokens, rem.TotalTokens)
	case rem.ToolCalls >= 0 && int64(s.ToolCalls+next) > rem.ToolCalls:
		why = fmt.Sprintf("tool calls %d, of the %d", s.ToolCalls+next, rem.ToolCalls)
	case rem.Cost >= 0 && s.Cost >= rem.Cost:
		why = fmt.Sprintf("cost %g, of the %g", s.Cost, rem.Cost)
	default:
		return nil
	}
	return &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: fmt.Errorf("%w: %s the parent run's budget had left", core.ErrBudgetExceeded, why)}
}

// signalHeld tells the agent's parent, the workflow parentID, that its
// turn stopped on its cap, with err (SignalAgentHeld).
func (t *thread) signalHeld(ctx workflow.Context, parentID string, err *historyError) {
	if err := workflow.SignalExternalWorkflow(ctx, parentID, "", SignalAgentHeld, agentHeld{CallID: t.parentCall, Err: err}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("toolrelay: could not tell an agent call's parent of its budget", "call_id", t.parentCall, "error", err)
	}
}

// childHeld stops the turn on its budget: the child of its agent call
// h.CallID stopped on what the turn's budget had left for it. The turn's
// outcome is then the budget's error, as when the turn stops on its own
// calls, and [Runner.Resume] with a raised budget goes on (see
// raiseChildren); the child waits meanwhile. In an agent's workflow, the
// agent's parent stops so too (see holdParent).
func (t *thread) childHeld(ctx workflow.Context, h agentHeld) {
	u, tr := t.turn, t.running
	cc := u.children[h.CallID]
	if cc == nil || tr == nil || !u.running || tr.u != u {
		return
	}
	cc.held = true
	if u.budgetHeld {
		return
	}
	u.budgetHeld = true
	t.holdTimer(ctx)
	res := *tr.res
	res.Done, res.Err, res.Pending = true, h.Err, nil
	res.Remaining = tr.budget.Remaining(res.Spent)
	u.outcome = &res
	t.endRun(ctx, &res)
	u.emit(event{Kind: core.EventRunFinished, Thread: res.Thread, Turn: res.ServiceTurn, Step: res.Steps, Usage: res.Usage, Remaining: res.Remaining, Err: h.Err})
	t.holdParent(ctx, h.Err)
}

// holdParent, in an agent's workflow whose turn stopped on a child held
// on its cap (see childHeld), tells the agent's parent, whose turn stops
// so too, with err, as when the agent's own spend passes its cap (see
// parentBudget): a child's hold so reaches the thread's turn, however
// deep, as core's Runner stops each run above a child stopped on what
// its parent had left. The raised cap that the parent's resume sends
// then goes to the held children (see raised). Nothing in a thread's
// workflow, nor on a history made before it did (versionHoldParent).
func (t *thread) holdParent(ctx workflow.Context, err *historyError) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if t.agent == "" || parent == nil || workflow.GetVersion(ctx, versionHoldParent, workflow.DefaultVersion, 1) < 1 {
		return
	}
	t.turn.parentHeld = true
	t.signalHeld(ctx, parent.ID, err)
}

// raised takes rem, a raised cap the agent's parent sent: if the parent
// was told of the turn's held children (see holdParent), it is the
// agent's cap, and the children go on under what it leaves them (see
// goOnHeld); it is the one parentBudget waits for in any case.
func (t *thread) raised(ctx workflow.Context, rem core.Remaining) {
	u := t.turn
	t.newCap = &rem
	if !u.parentHeld {
		return
	}
	u.parentHeld = false
	t.cap = &rem
	if u.budgetHeld && u.running {
		t.goOnHeld(ctx)
	}
}

// childrenHeld reports whether a child of the turn waits for a raised
// budget.
func (u *turn) childrenHeld() bool {
	for _, cc := range u.children {
		if cc.held {
			return true
		}
	}
	return false
}

// raiseChildren lays b, a resume's budget, over the turn's, and lets the
// turn's held children go on (see goOnHeld).
func (t *thread) raiseChildren(ctx workflow.Context, b core.Budget) {
	t.running.budget = b.Over(t.running.budget)
	t.goOnHeld(ctx)
}

// goOnHeld lets the turn stopped on its held children go on: each gets
// the new cap that the turn's budget, and in an agent's workflow the
// agent's cap, leave it (see childCap); the turn stops again if a child's
// spend is still past it.
func (t *thread) goOnHeld(ctx workflow.Context) {
	u, tr := t.turn, t.running
	u.budgetHeld, u.outcome = false, nil
	t.goOnTimer()
	t.beginRun(ctx, true)
	ids := make([]string, 0, len(u.children))
	for id, cc := range u.children {
		if cc.held {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // the signals' order is the history's
	for _, id := range ids {
		cc := u.children[id]
		cc.held = false
		rem := t.childCap(tr, cc.base)
		if err := cc.wf.SignalChildWorkflow(ctx, SignalAgentBudget, rem).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("toolrelay: could not raise an agent call's budget", "call_id", id, "error", err)
		}
	}
}

// childCap returns the cap of the child of an agent call that started
// when the turn tr had spent base (its step's calls counted): what the
// turn's budget has left, and, in an agent's workflow under its parent's
// budget, what the agent's own cap leaves once base is spent (the agent
// counts from its start, see parentBudget), the tighter of the two in
// each field. A grandchild so stays within what each budget above it
// has left.
func (t *thread) childCap(tr *turnRun, base driver.Spent) core.Remaining {
	rem := tr.budget.Remaining(base)
	if t.cap == nil {
		return rem
	}
	return rem.Min(t.cap.Less(base))
}
