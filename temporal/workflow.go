package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// Thread is the workflow of one thread: it waits for turns (the run
// update), runs each as core's Runner runs a run (start → step → the
// step's calls, concurrently, one result per call in call order → submit
// → …), and keeps the last turn's outcome and the current turn's events.
// It continues as new before its history grows past the server's limits:
// between turns, and inside a long turn before its next call (see
// State.Running), the turn going on in the new run.
//
// It is workflow code: deterministic, no wall clock, no goroutines but
// the workflow's own, no map iteration. Each backend request and each
// call is an activity.
func Thread(ctx workflow.Context, st State) error { return runThread(ctx, st, nil) }

// runThread runs the thread workflow, calling a worker's Run hook (see
// runHooks) if hooks is not nil.
func runThread(ctx workflow.Context, st State, hooks *runHooks) error {
	t := &thread{st: st, set: st.Settings.withDefaults(), hooks: hooks, turn: &turn{}}
	running := t.st.Running
	t.st.Running = nil
	if running != nil {
		t.restore(running)
	}
	if err := t.register(ctx); err != nil {
		return err
	}
	t.deltaCh = workflow.GetSignalChannel(ctx, SignalDeltas)
	t.claimCh = workflow.GetSignalChannel(ctx, SignalClaim)
	t.takeCancels(ctx)
	t.takeChildPauses(ctx)
	if running != nil {
		if err := t.goOn(ctx, running); err != nil {
			return err
		}
		if end, err := t.between(ctx); end {
			return err
		}
	}
	for {
		queued := func() bool { return t.queued != nil }
		if t.set.Idle > 0 {
			ok, err := workflow.AwaitWithTimeout(ctx, t.set.Idle, queued)
			if err != nil {
				return err
			}
			if !ok {
				return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			}
		} else if err := workflow.Await(ctx, queued); err != nil {
			return err
		}
		req := *t.queued
		t.queued = nil
		if err := t.runTurn(ctx, req); err != nil {
			return err
		}
		if end, err := t.between(ctx); end {
			return err
		}
	}
}

// takeCancels takes the cancel signals for the workflow's life: one ends
// the turn running (its phase stopped, see turn.phase) or paused (see
// turnRun.await), or abandons a last turn held on its budget.
func (t *thread) takeCancels(ctx workflow.Context) {
	cancels := workflow.GetSignalChannel(ctx, SignalCancel)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			cancels.Receive(ctx, nil)
			switch h := t.st.Held; {
			case t.turn.running && t.turn.stop != nil:
				t.turn.canceled = true
				if t.turn.budgetHeld || t.turn.agentPaused {
					// Its outcome so far is the budget's, or a pause on
					// its children's approvals: the turn ends Canceled
					// once its children did.
					t.turn.budgetHeld, t.turn.agentPaused, t.turn.paused, t.turn.outcome = false, false, false, nil
				}
				t.turn.stop()
			case t.turn.running && t.turn.paused && !t.turn.canceled && cancelsPause(ctx):
				// The pause (see await) ends the turn, Canceled.
				t.turn.canceled = true
			case !t.turn.running && t.queued == nil && h != nil:
				// A turn held on its budget is abandoned.
				t.st.Held = nil
				t.cancelService(ctx, h.Step.Step.Thread)
			}
		}
	})
}

// between continues the workflow as new after a turn, when the server
// suggests it or the history passed MaxHistoryEvents: end is set when the
// run ends, with its error (the ContinueAsNewError).
func (t *thread) between(ctx workflow.Context) (end bool, err error) {
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > t.set.MaxHistoryEvents {
		// The readers of the last turn's events find them gone, and
		// its outcome in the new run's state. A turn asked for
		// meanwhile runs first.
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) || t.queued != nil }); err != nil {
			return true, err
		}
		if t.queued == nil {
			return true, workflow.NewContinueAsNewError(ctx, WorkflowName, t.st)
		}
	}
	return false, nil
}

// thread is the workflow's state for its whole run: what it carries into
// the next (st), its options, the turn asked for and not begun, the
// channels of its signals, the worker's Run hook, and the current turn.
type thread struct {
	st  State
	set LoopOptions

	queued *runRequest
	// resumeHeld: the queued turn goes on from the held one (st.Held).
	resumeHeld bool
	// turn is the current turn, or the last once it ended (its events
	// and approvals are read until the next begins).
	turn *turn

	deltaCh workflow.ReceiveChannel
	// claimCh receives the claims of local activities (SignalClaim),
	// which turn.claims keeps (see claimed).
	claimCh workflow.ReceiveChannel

	// hooks calls the worker's Run hook; runPart counts the parts of
	// the workflow's turns (a pause ends one).
	hooks   *runHooks
	runPart int

	// agent, in the workflow of an agent tool's call (AgentWorkflowName),
	// is the agent's path (see agentCall), and parentCall the id of the
	// parent's call; "" in a thread's.
	agent      string
	parentCall string
	// path holds the agent calls the agent's workflow came through
	// (agentState.Path).
	path []driver.Call
	// cap, in an agent's workflow, is what its parent's budget has left
	// for it (agentState.Cap); newCap, a raised one its parent sent.
	cap, newCap *core.Remaining
	// running is the turn as it runs in this run of the workflow.
	running *turnRun
}

// A turn is the state of one turn of the thread, from the update that
// asked for it until the next turn's: whether it runs or is paused, its
// phases, its approvals and its events, read by the updates and queries
// (see thread.register) also once it ended. (A turnRun is the same turn
// as the workflow's code runs it.)
type turn struct {
	running bool
	paused  bool
	// outcome is the turn's outcome once it ended or paused.
	outcome *turnResult
	// stop cancels the current phase of the turn (its time limit, or
	// the cancel signal), which ends at deadline when its timer fires
	// (nil between phases); canceled says it was the signal.
	stop     func()
	timer    *phaseTimer
	deadline time.Time
	canceled bool
	timedOut bool
	// noContinue: the turn's state did not fit in what a new run starts
	// with; the step goes on in this run.
	noContinue bool

	// pending holds the approvals of the turn's calls, decided or not.
	pending []*core.Approval

	// The turn's events (after the dropped first ones, which the run
	// before kept), and what the reader was given of each message's text
	// (bytes; -1 once done).
	events  []event
	dropped int
	items   map[string]int
	texts   int
	stream  bool
	// submitted is the results-submitted event of a submit under way.
	submitted *event

	// claims holds the claims of the turn's local activities (see
	// thread.claimed).
	claims map[string]string

	// children holds the turn's agent calls running as child workflows,
	// by call id; agentPaused: the turn is paused on the approvals of
	// their children (see thread.childPaused).
	children    map[string]*childCall
	agentPaused bool
	// budgetHeld: the turn stopped on its budget, a child held on what
	// it had left (see thread.childHeld), until a resume raises it (in
	// an agent's workflow, its parent's, see thread.raised). parentHeld:
	// the agent's parent was told so, and has not sent a raised cap yet.
	budgetHeld bool
	parentHeld bool
}

// versionCancelPaused marks the runs whose cancel signal ends a turn
// paused on calls awaiting a decision (workflow.GetVersion, called when
// the signal meets such a turn): before, the signal left the pause
// going, and a workflow that took it so replays without it.
const versionCancelPaused = "cancel-paused"

// cancelsPause reports whether the cancel signal ends a paused turn: not
// on a history made before it did.
func cancelsPause(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionCancelPaused, workflow.DefaultVersion, 1) >= 1
}

// checkBudget refuses a turn's budget that core.Budget.Check refuses
// (the Runner checks it before it sends the update; the validator holds
// it for any client).
func checkBudget(b core.Budget) error {
	if err := b.Check(); err != nil {
		return temporal.NewApplicationError(err.Error(), errcode.InvalidArgument.String())
	}
	return nil
}

// register sets the updates and the query.
func (t *thread) register(ctx workflow.Context) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRun, func(ctx workflow.Context, req runRequest) (*turnResult, error) {
		if t.turn.running || t.queued != nil {
			return nil, busy()
		}
		return t.queue(ctx, req, false)
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req runRequest) error {
		if t.turn.running || t.queued != nil {
			return busy()
		}
		return checkBudget(req.Budget)
	}})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandler(ctx, UpdateWait, t.wait)
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateResume, func(ctx workflow.Context, req resumeRequest) (*turnResult, error) {
		if t.turn.running && t.turn.budgetHeld {
			t.raiseChildren(ctx, req.Budget)
			return t.wait(ctx, waitRequest{})
		}
		h := t.st.Held
		if h == nil || t.turn.running || t.queued != nil {
			return t.wait(ctx, waitRequest{})
		}
		run := h.Request
		// The resume's budget over the turn's, field by field, as core's
		// Runner lays a resume's over the budget its turn noted.
		run.Budget, run.Stream = req.Budget.Over(h.Request.Budget), req.Stream
		return t.queue(ctx, run, true)
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req resumeRequest) error {
		return checkBudget(req.Budget)
	}})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, func(ctx workflow.Context, req decideRequest) error {
		a := t.turn.approval(req.CallID)
		if a == nil || a.Decision != nil {
			return t.checkDecision(ctx, req) // decided meanwhile
		}
		d := req.Decision
		d.Arguments = edited(d.Arguments)
		if d.At.IsZero() {
			d.At = workflow.Now(ctx)
		}
		a.Decision = &d
		t.forward(ctx, req.CallID, d)
		return nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req decideRequest) error { return t.checkDecision(ctx, req) }})
	if err != nil {
		return err
	}
	err = workflow.SetQueryHandler(ctx, QueryApprovals, func() ([]core.Approval, error) {
		list := make([]core.Approval, 0, len(t.turn.pending))
		for _, a := range t.turn.pending {
			list = append(list, *a)
		}
		return list, nil
	})
	if err != nil {
		return err
	}
	return t.eventsQuery(ctx)
}

// eventsQuery sets the handler of the events query: a page of the
// events of the turn asked for.
func (t *thread) eventsQuery(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, QueryEvents, func(req eventsRequest) (*eventsPage, error) {
		turn := req.Turn
		if turn == 0 {
			turn = t.st.Turns
		}
		if turn != t.st.Turns || !t.turn.running && len(t.turn.events) == 0 && t.turn.dropped == 0 {
			// A later turn began, or the run before ended with the turn
			// and continued as new without its events.
			return &eventsPage{Turn: turn, Gone: true}, nil
		}
		after := min(max(req.After, 0), t.turn.dropped+len(t.turn.events))
		skipped := max(t.turn.dropped-after, 0)
		evs := t.turn.events[after+skipped-t.turn.dropped:]
		if len(evs) > maxPage {
			evs = evs[:maxPage]
		}
		return &eventsPage{Turn: turn, Events: evs, Skipped: skipped}, nil
	})
}

// wait waits for the current turn to end or pause, and returns it (the
// last turn's, when none runs): the wait update. A turn asked for by its
// number (req.Turn) that is neither is refused.
func (t *thread) wait(ctx workflow.Context, req waitRequest) (*turnResult, error) {
	if req.Turn != 0 && req.Turn != t.st.Turns {
		return nil, refusal(errcode.FailedPrecondition, fmt.Sprintf("turn %d is not the thread's current or last turn (%d): its outcome is no longer kept", req.Turn, t.st.Turns))
	}
	if err := workflow.Await(ctx, func() bool { return !t.turn.running || t.turn.outcome != nil }); err != nil {
		return nil, err
	}
	if t.turn.running && t.turn.paused && t.turn.expired(workflow.Now(ctx)) {
		// Every call still undecided is past its time: its timer is
		// about to deny it, and the turn to go on.
		if err := workflow.Await(ctx, func() bool { return !t.turn.paused }); err != nil {
			return nil, err
		}
		if err := workflow.Await(ctx, func() bool { return !t.turn.running || t.turn.outcome != nil }); err != nil {
			return nil, err
		}
	}
	if t.turn.running {
		return t.turn.outcome, nil
	}
	if t.st.Last == nil {
		return nil, refusal(errcode.FailedPrecondition, "no turn has run on this thread")
	}
	return t.st.Last, nil
}

// queue queues a turn (resume: going on from the held one) and waits for
// its outcome: the run update, and the resume update of a held turn.
func (t *thread) queue(ctx workflow.Context, req runRequest, resume bool) (*turnResult, error) {
	t.st.Turns++
	n := t.st.Turns
	t.queued, t.resumeHeld = &req, resume
	t.turn = &turn{running: true, stream: req.Stream}
	if err := workflow.Await(ctx, func() bool { return t.st.Turns != n || t.turn.outcome != nil }); err != nil {
		return nil, err
	}
	return t.turn.outcome, nil
}

// maxPage bounds the events one query returns.
const maxPage = 1000

// checkDecision refuses, before anything is recorded, a decision about a
// call that awaits none, a second decision, and edited arguments that are
// not a JSON object.
func (t *thread) checkDecision(ctx workflow.Context, req decideRequest) error {
	a := t.turn.approval(req.CallID)
	switch {
	case a == nil:
		return refusal(errcode.NotFound, fmt.Sprintf("no call %q awaits a decision on this thread", req.CallID))
	case a.Decision != nil:
		return refusal(errcode.FailedPrecondition, fmt.Sprintf("call %q was decided before", req.CallID))
	case mirrored(req.CallID) && len(edited(req.Decision.Arguments)) > 0:
		return refusal(errcode.InvalidArgument, fmt.Sprintf("call %q is an agent's: its arguments cannot be edited", req.CallID))
	case !workflow.Now(ctx).Before(a.Expires):
		// Its timer has not fired yet, but the time is up.
		return refusal(errcode.FailedPrecondition, fmt.Sprintf("call %q: the time to decide passed at %s", req.CallID, a.Expires.Format(time.RFC3339)))
	case len(edited(req.Decision.Arguments)) > 0:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(req.Decision.Arguments, &obj); err != nil || obj == nil {
			return refusal(errcode.InvalidArgument, fmt.Sprintf("the edited arguments of call %q are not a JSON object", req.CallID))
		}
	}
	return nil
}

// edited returns a decision's edited arguments, nil for none (a JSON
// null, as a decision without them arrives).
func edited(args json.RawMessage) json.RawMessage {
	if string(args) == "null" {
		return nil
	}
	return args
}

func (u *turn) approval(callID string) *core.Approval {
	for _, a := range u.pending {
		if a.Key.Call == callID {
			return a
		}
	}
	return nil
}

// refusal is an error a client reads with its code (see clientError).
func refusal(code errcode.Code, msg string) error {
	return temporal.NewApplicationError(msg, code.String())
}

// busy refuses a turn asked for while another runs on the thread: its
// details name core.ErrThreadBusy, which the client's error matches (see
// clientError).
func busy() error {
	return temporal.NewApplicationError("a turn is running on this thread", errcode.FailedPrecondition.String(), errorInfo(core.ErrThreadBusy).Is)
}

// emit appends an event of the current turn.
func (u *turn) emit(e event) { u.events = append(u.events, e) }

// deltas takes a batch of a step's streamed text: each message's text
// once, completing on TextDone what the pieces left out (core's rule for a
// stream: no repeat, no gap, also when a retried step streams again).
func (u *turn) deltas(b deltaBatch) {
	if !u.running || !u.stream {
		return
	}
	if u.items == nil {
		u.items = map[string]int{}
	}
	u.flushSubmitted()
	for _, d := range b.Deltas {
		n := u.items[d.Item]
		switch d.Kind {
		case driver.TextDelta:
			if n < 0 || d.Text == "" {
				continue
			}
			u.items[d.Item] = n + len(d.Text)
			u.emit(event{Kind: core.EventTextDelta, Item: d.Item, Text: d.Text, Commentary: d.Commentary})
		case driver.TextDone:
			if n < 0 {
				continue
			}
			u.items[d.Item] = -1
			u.done(d.Item, d.Text, n, d.Commentary)
		case driver.ReasoningDelta:
			u.emit(event{Kind: core.EventReasoningDelta, Item: d.Item, Text: d.Text})
		}
	}
}

// done ends a message of which n bytes were given, marked as commentary
// or not (commentary is no part of the answer: texts does not count it).
func (u *turn) done(item, text string, n int, commentary bool) {
	if !commentary {
		u.texts++
	}
	if n < len(text) {
		u.emit(event{Kind: core.EventTextDelta, Item: item, Text: text[n:], Commentary: commentary})
	}
	u.emit(event{Kind: core.EventTextDone, Item: item, Text: text, Commentary: commentary})
}

// drain takes the delta signals already received, so that a step's text
// comes before what the step's answer reports.
func (t *thread) drain() {
	var b deltaBatch
	for t.deltaCh.ReceiveAsync(&b) {
		t.turn.deltas(b)
		b = deltaBatch{}
	}
}

// phase returns the context of a phase of a turn, canceled at d (its
// time limit, see startTimer) or on the cancel signal; end stops its
// timer.
func (u *turn) phase(ctx workflow.Context, d time.Duration) (_ workflow.Context, end func()) {
	pctx, cancel := workflow.WithCancel(ctx)
	pt := &phaseTimer{ctx: ctx, cancel: cancel}
	u.stop, u.timer = cancel, pt
	u.startTimer(pt, d)
	return pctx, func() {
		pt.halt()
		if u.timer == pt {
			u.timer = nil
		}
		u.stop = nil
	}
}

// A phaseTimer is the time limit of a phase of a turn (see phase): the
// timer that cancels the phase when it fires. It stops while the turn is
// paused on its children's approvals, the phase going on, and starts
// again in full after (see pauseTimer).
type phaseTimer struct {
	// ctx is the context the timer runs in, cancel cancels the phase,
	// and stop the timer (nil once stopped).
	ctx    workflow.Context
	cancel func()
	stop   func()
}

// halt stops the timer, if it runs.
func (pt *phaseTimer) halt() {
	if pt.stop != nil {
		pt.stop()
		pt.stop = nil
	}
}

// startTimer starts the timer of the phase pt, which ends at d from now
// (the turn's deadline): it cancels the phase when it fires.
func (u *turn) startTimer(pt *phaseTimer, d time.Duration) {
	tctx, stop := workflow.WithCancel(pt.ctx)
	pt.stop, u.deadline = stop, workflow.Now(tctx).Add(d)
	workflow.Go(tctx, func(c workflow.Context) {
		if workflow.NewTimer(c, d).Get(c, nil) == nil {
			u.timedOut = true
			pt.cancel()
		}
	})
}

// pauseTimer stops the time limit of the turn's phase, which goes on: a
// pause on its children's approvals is not counted in it, as a pause on
// its own calls' is not (see turnRun.calls). restartTimer starts it
// again.
func (u *turn) pauseTimer() {
	if u.timer != nil {
		u.timer.halt()
	}
}

// restartTimer starts the time limit of the turn's phase that pauseTimer
// stopped again, in full (d from now), as a new phase after a pause on
// the turn's own calls starts; nothing if it runs, or if the phase ended
// or was canceled.
func (u *turn) restartTimer(d time.Duration) {
	pt := u.timer
	if pt == nil || pt.stop != nil || u.stop == nil || u.canceled || u.timedOut {
		return
	}
	u.startTimer(pt, d)
}

// A turnRun is a turn as it runs in this run of the workflow: its request,
// its outcome so far, its budget and bounds, and the context of its
// current phase (see phase).
type turnRun struct {
	t *thread
	// u is the thread's turn (thread.turn) that this is.
	u        *turn
	req      runRequest
	res      *turnResult
	budget   core.Budget
	maxSteps int
	timeout  time.Duration
	pctx     workflow.Context
	end      func()
	// afterPause: the step's calls paused for decisions, on the worker
	// pausedOn names (see stepRequest.AfterPause), until its submit.
	afterPause bool
	pausedOn   string
}

// newTurnRun returns the turn of req, its outcome so far res.
func (t *thread) newTurnRun(req runRequest, res *turnResult) *turnRun {
	tr := &turnRun{t: t, u: t.turn, req: req, res: res, budget: req.Budget.Over(t.set.Budget), maxSteps: t.set.MaxSteps, timeout: t.set.RunTimeout}
	t.running = tr
	if req.MaxSteps > 0 {
		tr.maxSteps = req.MaxSteps
	}
	if req.Timeout > 0 {
		tr.timeout = req.Timeout
	}
	return tr
}

// runTurn runs one turn and records its outcome: a new turn, or one that
// goes on from the held one (resumeHeld). Its error is the
// ContinueAsNewError of a turn that goes on in the workflow's next run.
func (t *thread) runTurn(ctx workflow.Context, req runRequest) error {
	res := &turnResult{Turn: t.st.Turns, Thread: t.st.Thread}
	var from *heldTurn // the held turn this one goes on from
	if t.resumeHeld {
		from = t.st.Held
	}
	t.st.Held, t.resumeHeld = nil, false
	resume := from != nil
	if resume {
		last := t.st.Last
		res.Thread, res.ServiceTurn, res.Steps, res.Calls, res.Spent = last.Thread, last.ServiceTurn, last.Steps, slices.Clone(last.Calls), last.Spent
	}
	tr := t.newTurnRun(req, res)
	tr.pctx, tr.end = t.turn.phase(ctx, tr.timeout)
	t.beginRun(ctx, resume)
	if len(req.Input) > t.set.MaxPayloadBytes {
		tr.finish(ctx, errcode.Errorf(errcode.InvalidArgument, "temporal: the input (%d bytes) passes the limit of what the history keeps (%d bytes)", len(req.Input), t.set.MaxPayloadBytes))
		return nil
	}
	sr, err := tr.first(tr.pctx, from)
	return tr.loop(ctx, sr, err, resume) // the held step's usage was counted before
}

// finish ends the turn with err (nil: its answer).
func (tr *turnRun) finish(ctx workflow.Context, err error) {
	t, res := tr.t, tr.res
	tr.end()
	res.Done = true
	if err != nil {
		res.Err = errorInfo(err)
	}
	t.st.Thread = res.Thread
	res.Remaining = tr.budget.Remaining(res.Spent)
	tr.u.emit(event{Kind: core.EventRunFinished, Thread: res.Thread, Turn: res.ServiceTurn, Step: res.Steps, Err: res.Err, Usage: res.Usage, Remaining: res.Remaining})
	fitResult(res, t.set.MaxPayloadBytes)
	t.endRun(ctx, res)
	t.st.Last = res
	tr.u.outcome = res
	tr.u.running = false
}

// loop goes on from the step sr (or the error err of the request that
// asked for it; counted: its usage was counted before) to the turn's end.
// Its error is the ContinueAsNewError of a turn that goes on in the
// workflow's next run.
func (tr *turnRun) loop(ctx workflow.Context, sr *stepResult, err error, counted bool) error {
	t, res := tr.t, tr.res
	for {
		if err != nil {
			if th := failedThread(err); th != "" {
				// The request failed after the service made (or, on a
				// chain, moved to) this thread: the turn resumes there.
				res.Thread, res.ServiceTurn = th, ""
			}
			if res.Thread != "" && (tr.u.canceled || tr.u.timedOut) {
				t.cancelService(ctx, res.Thread)
			}
			tr.finish(ctx, tr.u.turnError(err))
			return nil
		}
		now, later, results, done := tr.arrive(ctx, sr, counted)
		if done {
			return nil
		}
		counted = false
		if done, err := tr.calls(ctx, sr, now, later, results); done || err != nil {
			return err
		}
		sr, err = tr.submit(sr.Step, results)
	}
}

// arrive takes the step sr as the turn's next (counted: its usage was
// counted before): its answer ends the turn (done), as do a step past
// MaxSteps, calls that are not well formed and the budget; otherwise it
// returns the calls to run now, those to run once decided (later), and
// the results to fill.
func (tr *turnRun) arrive(ctx workflow.Context, sr *stepResult, counted bool) (now, later []int, results []driver.ToolResult, done bool) {
	t, res := tr.t, tr.res
	step := sr.Step
	tr.u.noContinue = false
	if step == nil {
		t.cancelService(ctx, res.Thread)
		tr.finish(ctx, errcode.Errorf(errcode.Internal, "%s: step: the backend returned no step", sr.Backend))
		return nil, nil, nil, true
	}
	res.Thread, res.ServiceTurn = step.Thread, step.Turn
	t.st.Thread = step.Thread
	if !counted {
		tr.budget.Charge(&res.Spent, step)
	}
	tr.u.stepArrived(step, res.Steps)
	if len(step.Calls) == 0 {
		res.Text = step.Text
		tr.finish(ctx, nil)
		return nil, nil, nil, true
	}
	if res.Steps >= tr.maxSteps {
		t.cancelService(ctx, step.Thread)
		tr.finish(ctx, &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: fmt.Errorf("%w (%d)", core.ErrMaxSteps, tr.maxSteps)})
		return nil, nil, nil, true
	}
	if err := driver.CheckCalls(step.Calls); err != nil {
		t.cancelService(ctx, step.Thread)
		tr.finish(ctx, &errcode.Error{Code: errcode.Internal, Op: sr.Backend + ": step", Err: err})
		return nil, nil, nil, true
	}
	if err := tr.budget.Exceeded(res.Spent, len(step.Calls)); err != nil {
		// Before any call of the step runs: the service's turn
		// waits for their results, and a resume goes on from here.
		hr := tr.req
		hr.Input, hr.Parts = "", nil
		t.st.Held = &heldTurn{Request: hr, Step: sr}
		tr.finish(ctx, err)
		return nil, nil, nil, true
	}
	if err := t.parentBudget(ctx, res.Spent, len(step.Calls)); err != nil {
		t.cancelService(ctx, step.Thread)
		tr.finish(ctx, err)
		return nil, nil, nil, true
	}
	res.Steps++
	tr.u.emit(event{Kind: core.EventStepStarted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(step.Calls), Remaining: tr.budget.Remaining(res.Spent)})
	results = make([]driver.ToolResult, len(step.Calls))
	for i, c := range step.Calls {
		if i < len(sr.Approvals) && sr.Approvals[i].Need {
			later = append(later, i)
			a := &core.Approval{Key: core.Approval{}.Key, Tool: c.Name, Arguments: c.Arguments, Why: sr.Approvals[i].Why, Requested: workflow.Now(ctx)}
			a.Key.Backend, a.Key.Thread, a.Key.Turn, a.Key.Call = sr.Backend, c.Thread, c.Turn, c.ID
			a.Expires = a.Requested.Add(t.set.ApprovalTimeout)
			tr.u.pending = append(tr.u.pending, a)
			tr.u.emit(event{Kind: core.EventApprovalRequested, Thread: c.Thread, Turn: c.Turn, Step: res.Steps, Call: &step.Calls[i], Text: a.Why})
		} else {
			now = append(now, i)
		}
	}
	return now, later, results, false
}

// calls runs the calls of the step sr at now, then, after a pause until
// every call at later is decided, those: their results go in results. A
// failed call ends the turn (done). Its error is the ContinueAsNewError
// of a turn that goes on in the workflow's next run.
func (tr *turnRun) calls(ctx workflow.Context, sr *stepResult, now, later []int, results []driver.ToolResult) (done bool, _ error) {
	t, res := tr.t, tr.res
	err := tr.runCalls(ctx, sr, now, later, results)
	if workflow.IsContinueAsNewError(err) {
		return false, err
	}
	if err == nil && len(later) > 0 {
		tr.end()
		res.Remaining = tr.budget.Remaining(res.Spent)
		err = tr.await(ctx)
		res.Pending = nil
		tr.afterPause, tr.pausedOn = true, sr.Worker
		t.beginRun(ctx, true)
		tr.pctx, tr.end = tr.u.phase(ctx, tr.timeout)
		if err == nil {
			err = tr.runCalls(ctx, sr, later, nil, results)
			if workflow.IsContinueAsNewError(err) {
				return false, err
			}
		}
	}
	if err != nil {
		t.cancelService(ctx, sr.Step.Thread)
		tr.finish(ctx, tr.u.turnError(err))
		return true, nil
	}
	return false, nil
}

// runCalls runs the calls of the step sr at idx (see thread.runCalls).
// When the history asks for it before a call, the workflow continues as
// new once the calls started have ended: the ContinueAsNewError is
// returned, the calls left (and later, to run once decided) carried into
// the new run; if the turn's state does not fit, the calls go on here.
func (tr *turnRun) runCalls(ctx workflow.Context, sr *stepResult, idx, later []int, results []driver.ToolResult) error {
	for {
		err := tr.t.runCalls(tr.pctx, sr, tr.res.Steps, idx, results)
		var at *continueAt
		if !errors.As(err, &at) {
			return err
		}
		if err := tr.continueAsNew(ctx, sr, at.left, later, results); err != nil {
			return err
		}
		idx = at.left
	}
}

// submit sends the results of step, and returns the next step.
func (tr *turnRun) submit(step *driver.Step, results []driver.ToolResult) (*stepResult, error) {
	t, res := tr.t, tr.res
	fitResults(results, t.set.MaxPayloadBytes)
	sent := res.Spent
	sent.ToolCalls += len(results)
	tr.u.submitted = &event{Kind: core.EventResultsSubmitted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(results), Remaining: tr.budget.Remaining(sent)}
	sr, err := t.stepActivity(tr.pctx, activitySubmit, &stepRequest{Step: step, Results: results, Format: tr.req.Format, Stream: tr.req.Stream,
		Claim:      t.key(tr.pctx, fmt.Sprintf("submit/%s/%s/%s", step.Thread, step.Turn, step.Calls[0].ID)),
		AfterPause: tr.afterPause, PausedOn: tr.pausedOn})
	tr.afterPause, tr.pausedOn = false, ""
	if err == nil {
		if !res.CallsOmitted { // dropped when the turn went on in a new run
			res.Calls = append(res.Calls, results...)
		}
		res.ToolCalls = sent.ToolCalls
	}
	return sr, err
}

// first returns the turn's first step: the held one, going on from it
// (from), or the answer to the input.
func (tr *turnRun) first(ctx workflow.Context, from *heldTurn) (*stepResult, error) {
	t, req := tr.t, &tr.req
	if from != nil {
		return from.Step, nil
	}
	prevTurn := ""
	if t.st.Last != nil {
		prevTurn = t.st.Last.ServiceTurn
	}
	sreq := &stepRequest{Thread: t.st.Thread, Input: req.Input, Parts: req.Parts, Format: req.Format, PrevTurn: prevTurn, Stream: req.Stream,
		Claim: t.key(ctx, "start")}
	return t.stepActivity(ctx, activityStart, sreq)
}

// stepArrived reports a step: its calls and usage, or for a final answer
// of which no message was streamed, its text in one piece.
func (u *turn) stepArrived(step *driver.Step, steps int) {
	for i := range step.Calls {
		u.emit(event{Kind: core.EventToolCall, Thread: step.Thread, Turn: step.Turn, Step: steps + 1, Call: &step.Calls[i]})
	}
	if step.Usage != (driver.Usage{}) {
		u.emit(event{Kind: core.EventUsage, Thread: step.Thread, Turn: step.Turn, Step: steps, Usage: step.Usage})
	}
	if len(step.Calls) == 0 && u.texts == 0 && step.Text != "" {
		u.done("", step.Text, 0, false)
	}
}

// await pauses the turn until every call awaiting a decision has one; a
// call still undecided at its expiry is denied.
func (tr *turnRun) await(ctx workflow.Context) error {
	t, u, res := tr.t, tr.u, tr.res
	u.paused = true
	res.Pending = nil
	for _, a := range u.pending {
		if a.Decision == nil {
			res.Pending = append(res.Pending, *a)
		}
	}
	paused := *res
	u.outcome = &paused
	t.endRun(ctx, &paused)
	u.emit(event{Kind: core.EventRunFinished, Thread: res.Thread, Turn: res.ServiceTurn, Step: res.Steps, Usage: res.Usage, Remaining: res.Remaining,
		Err: errorInfo(&errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf("the run paused: %d call(s) await a decision: %w", len(res.Pending), core.ErrAwaitingApproval)})})
	t.tellParent(ctx, res.Pending)
	defer func() { u.paused, u.outcome = false, nil }()
	for {
		var next time.Time
		for _, a := range u.pending {
			if a.Decision == nil && (next.IsZero() || a.Expires.Before(next)) {
				next = a.Expires
			}
		}
		if next.IsZero() {
			return nil
		}
		wait := next.Sub(workflow.Now(ctx))
		if wait > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, wait, func() bool { return u.decided() || u.canceled }); err != nil {
				return err
			}
		}
		if u.canceled {
			return temporal.NewCanceledError()
		}
		now := workflow.Now(ctx)
		for _, a := range u.pending {
			if a.Decision == nil && !now.Before(a.Expires) {
				a.Decision = &core.Decision{Reason: "no decision in time", Actor: "toolrelay", At: now}
			}
		}
	}
}

// expired reports whether every undecided call is past its time at now.
func (u *turn) expired(now time.Time) bool {
	for _, a := range u.pending {
		if a.Decision == nil && now.Before(a.Expires) {
			return false
		}
	}
	return true
}

func (u *turn) decided() bool {
	for _, a := range u.pending {
		if a.Decision == nil {
			return false
		}
	}
	return true
}

// runCalls runs the calls of the step sr at idx, at most Concurrency at
// once, as activities (the short ones as local activities, see local),
// and puts their results in results. When the history asks for a new run
// (see continuing) before a call, it waits for the calls started and
// returns a *continueAt with the calls left.
func (t *thread) runCalls(ctx workflow.Context, sr *stepResult, n int, idx []int, results []driver.ToolResult) error {
	step := sr.Step
	actx := workflow.WithActivityOptions(ctx, t.activityOptions())
	sel := workflow.NewSelector(ctx)
	var (
		inflight int
		firstErr error
	)
	wf := workflow.GetInfo(ctx).WorkflowExecution.ID
	for k, i := range idx {
		if inflight == t.set.Concurrency {
			sel.Select(ctx)
			inflight--
		}
		if firstErr == nil && ctx.Err() == nil && t.continuing(ctx) {
			for ; inflight > 0; inflight-- {
				sel.Select(ctx)
			}
			if firstErr != nil {
				return firstErr
			}
			return &continueAt{left: idx[k:]}
		}
		c := &step.Calls[i]
		req := &callRequest{Call: *c, Step: n, IdempotencyKey: fmt.Sprintf("%s/%d/%d/%s", wf, t.st.Turns, n, c.ID)}
		if a := t.turn.approval(c.ID); a != nil {
			req.Decision = a.Decision
		}
		started := event{Kind: core.EventCallStarted, Thread: c.Thread, Turn: c.Turn, Step: n, Call: c}
		req.Agent, req.Path = t.agent, t.path
		need := sr.need(i)
		child := runsAsChild(ctx, req, need)
		if child {
			started.Child = t.agentWorkflowID(ctx, c)
		}
		t.turn.emit(started)
		var f workflow.Future
		switch {
		case child:
			f = t.agentCall(ctx, actx, req, need, sr)
		case t.localCall(need):
			if !need.Rerun {
				// The call's own name, not its step's number: a start
				// run again may resume the service's turn at a later
				// step.
				req.Claim = t.key(ctx, fmt.Sprintf("call/%s/%s/%s", c.Thread, c.Turn, c.ID))
			}
			f = t.local(ctx, activityCall, req)
		default:
			f = workflow.ExecuteActivity(actx, activityCall, req)
		}
		inflight++
		sel.AddFuture(f, func(f workflow.Future) {
			var tr driver.ToolResult
			if err := f.Get(ctx, &tr); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			results[i] = tr
			kind := core.EventCallFinished
			if tr.Outcome == core.InDoubt {
				kind = core.EventCallInDoubt
			}
			t.turn.emit(event{Kind: kind, Thread: c.Thread, Turn: c.Turn, Step: n, Call: c, Outcome: tr.Outcome, Result: &tr})
		})
	}
	for ; inflight > 0; inflight-- {
		sel.Select(ctx)
	}
	return firstErr
}

// stepActivity runs a backend request, taking the text it streams as it
// comes (the signals of a step all come before its result: what is left
// is drained once it is there).
func (t *thread) stepActivity(ctx workflow.Context, name string, req *stepRequest) (*stepResult, error) {
	req.Agent = t.agent
	var f workflow.Future
	if t.set.LocalActivities && !req.Stream {
		// A streamed step stays an activity: the workflow takes its text
		// as it comes, which it cannot while a local activity holds its
		// task.
		f = t.local(ctx, name, req)
	} else {
		req.Claim = ""
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, t.activityOptions()), name, req)
	}
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(f, func(workflow.Future) {})
	sel.AddReceive(t.deltaCh, func(c workflow.ReceiveChannel, _ bool) {
		var b deltaBatch
		c.Receive(ctx, &b)
		t.turn.deltas(b)
	})
	for !f.IsReady() {
		sel.Select(ctx)
	}
	t.drain()
	var sr stepResult
	if err := f.Get(ctx, &sr); err != nil {
		t.turn.submitted = nil // the results may not have gone
		return nil, err
	}
	t.turn.flushSubmitted()
	return &sr, nil
}

// flushSubmitted reports the results of a step as submitted: before the
// next step's first text, or when the submit returns.
func (u *turn) flushSubmitted() {
	if e := u.submitted; e != nil {
		u.submitted = nil
		u.emit(*e)
	}
}

// cancelService cancels the service's turn, with a context of its own (the
// turn's may have ended).
func (t *thread) cancelService(ctx workflow.Context, thread string) {
	if thread == "" {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	o := t.activityOptions()
	o.StartToCloseTimeout = time.Minute
	o.RetryPolicy.MaximumAttempts = 3
	var f workflow.Future
	if t.agent != "" {
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, o), activityCancelAgent, cancelRequest{Agent: t.agent, Thread: thread})
	} else {
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, o), activityCancel, thread)
	}
	if err := f.Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("toolrelay: cancel turn failed", "thread", thread, "error", err)
	}
}

// activityOptions are the options of every activity: retried until the
// turn's time is up (a call started before is decided by core, never run
// twice with effect), a dead worker noticed by its heartbeat.
func (t *thread) activityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: t.set.RunTimeout,
		HeartbeatTimeout:    t.set.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	}
}

// localCall reports whether a call the worker described as need runs as
// a local activity: in a thread with LocalActivities, a call that awaits
// no decision, of a known tool whose time limit is at most MaxLocalCall.
func (t *thread) localCall(need approvalNeed) bool {
	return t.set.LocalActivities && !need.Need && need.Timeout > 0 && need.Timeout <= t.set.MaxLocalCall
}

// need returns what the worker said of call i of the step.
func (sr *stepResult) need(i int) approvalNeed {
	if i < len(sr.Approvals) {
		return sr.Approvals[i]
	}
	return approvalNeed{}
}

// key returns the claim key of a local activity of the current turn: the
// workflow's id, the turn's number and what.
func (t *thread) key(ctx workflow.Context, what string) string {
	if !t.set.LocalActivities {
		return ""
	}
	return fmt.Sprintf("%s/%d/%s", workflow.GetInfo(ctx).WorkflowExecution.ID, t.st.Turns, what)
}

// claimed reports whether the history holds the claim key (see
// SignalClaim): a run of the local activity before took effect, or may
// have; thread is the thread it named, if any.
func (t *thread) claimed(key string) (ok bool, thread string) {
	var c claimSignal
	for t.claimCh.ReceiveAsync(&c) {
		if t.turn.claims == nil {
			t.turn.claims = map[string]string{}
		}
		if c.Thread != "" || t.turn.claims[c.Key] == "" {
			t.turn.claims[c.Key] = c.Thread
		}
		c = claimSignal{}
	}
	if key == "" {
		return false, ""
	}
	thread, ok = t.turn.claims[key]
	return ok, thread
}

// local runs the activity name as a local activity, on a copy of req (a
// local activity gets its input as it is, and may change it), marked
// Again if its claim is in the history.
func (t *thread) local(ctx workflow.Context, name string, req any) workflow.Future {
	switch r := req.(type) {
	case *stepRequest:
		r.Again, r.Prev = t.claimed(r.Claim)
		req = cloneJSON(r)
	case *callRequest:
		r.Again, _ = t.claimed(r.Claim)
		req = cloneJSON(r)
	}
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, t.localOptions()), name, req)
}

// cloneJSON returns a deep copy of v, as the activity's input would be
// decoded from the history.
func cloneJSON[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the types of the activities' inputs encode
	}
	var c T
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// localOptions are the options of every local activity: as an
// activity's, its whole run bounded by the turn's time limit (a worker
// that dies is noticed by its workflow task's timeout).
func (t *thread) localOptions() workflow.LocalActivityOptions {
	o := t.activityOptions()
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: t.set.RunTimeout,
		StartToCloseTimeout:    t.set.RunTimeout,
		RetryPolicy:            o.RetryPolicy,
	}
}

// turnError is the error that ends a turn: the activity's, with its code
// and the errors it matches; the time limit's; or the cancel signal's.
func (u *turn) turnError(err error) error {
	var ce *temporal.CanceledError
	switch {
	case u.timedOut && (errors.As(err, &ce) || errors.Is(err, workflow.ErrCanceled)):
		return &errcode.Error{Code: errcode.DeadlineExceeded, Op: "core: run", Err: fmt.Errorf("the run passed its time limit: %w", context.DeadlineExceeded)}
	case u.canceled:
		return &errcode.Error{Code: errcode.Canceled, Op: "core: run", Err: fmt.Errorf("the turn was canceled: %w", context.Canceled)}
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return (&historyError{Code: ae.Type(), Message: ae.Message(), Is: failed(err).Is}).Err()
	}
	return &errcode.Error{Code: errcode.Unavailable, Op: "temporal", Err: err}
}
