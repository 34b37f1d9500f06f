package temporal

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// A turn of thousands of calls would grow the history past the server's
// limits, and the server would end the workflow, the turn's answer lost.
// Before a call, when the server suggests it or the history passed
// LoopOptions.MaxHistoryEvents, the workflow waits for the calls it
// started and continues as new, the turn carried into the new run's state
// (State.Running), which goes on from there: the calls left, the pause
// for those awaiting a decision, the step's submit, the next steps. The
// run and wait updates waiting for the turn answer that it continued
// (TurnResult.Continued), and the client waits for it again in the new
// run (the wait update, with the turn's number).

// versionContinueInTurn marks the runs that continue as new inside a turn
// (workflow.GetVersion): a workflow that was inside a long turn when its
// worker was upgraded replays without it.
const versionContinueInTurn = "continue-in-turn"

// A turnState is a turn carried into the workflow's next run in the
// middle of a step's calls (see State.Running).
type turnState struct {
	// Request is the turn's run request, without its input.
	Request runRequest `json:"request"`
	// Result is the turn's outcome so far.
	Result turnResult `json:"result"`
	// Step is the step whose calls run; Done the results of those that
	// ran; Calls the indexes of those to run, and Later of those to run
	// once decided (after a pause), in Step.Step.Calls.
	Step  *stepResult `json:"step"`
	Done  []callDone  `json:"done,omitempty"`
	Calls []int       `json:"calls,omitempty"`
	Later []int       `json:"later,omitempty"`
	// Deadline is the end of the turn's time (RunTimeout, or the run's
	// Timeout, from its start or the end of its last pause).
	Deadline time.Time `json:"deadline"`
	// Canceled: the cancel signal came as the run continued as new.
	Canceled bool `json:"canceled,omitempty"`
	// Pending are the approvals of the turn's calls.
	Pending []core.Approval `json:"pending,omitempty"`
	// Events are the last of the turn's events, after the Dropped first
	// ones; Items and Texts what the reader was given of each message.
	Events  []event        `json:"events,omitempty"`
	Dropped int            `json:"dropped,omitempty"`
	Items   map[string]int `json:"items,omitempty"`
	Texts   int            `json:"texts,omitempty"`
	// RunPart counts the parts of the turn (a pause ends one), which key
	// the worker's Run hook.
	RunPart int `json:"run_part,omitempty"`
	// AfterPause and PausedOn: the step's calls paused for decisions, on
	// that worker (see stepRequest.AfterPause).
	AfterPause bool   `json:"after_pause,omitempty"`
	PausedOn   string `json:"paused_on,omitempty"`
}

// callDone is a call of the step that ran before the run continued as
// new: its index in the step's calls, and its result.
type callDone struct {
	Index  int               `json:"index"`
	Result driver.ToolResult `json:"result"`
}

// continueAt is what runCalls returns when the run is to continue as new
// before the calls left.
type continueAt struct{ left []int }

func (c *continueAt) Error() string { return "temporal: the run continues as new" }

// continuing reports whether the run is to continue as new inside the
// turn: the server suggests it or the history passed MaxHistoryEvents,
// and the workflow is not replaying a history made before runs did.
func (t *thread) continuing(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if t.agent != "" || t.turn.noContinue || (!info.GetContinueAsNewSuggested() && info.GetCurrentHistoryLength() <= t.set.MaxHistoryEvents) {
		return false
	}
	return workflow.GetVersion(ctx, versionContinueInTurn, workflow.DefaultVersion, 1) >= 1
}

// continueAsNew continues the workflow as new inside the turn, before the
// calls of sr at left (and later, to run once decided): the turn's
// updates answer that it continued, and once no handler runs, it returns
// the ContinueAsNewError with the turn carried. When the turn's state does
// not fit in MaxPayloadBytes, the step goes on in this run: it returns nil.
func (tr *turnRun) continueAsNew(ctx workflow.Context, sr *stepResult, left, later []int, results []driver.ToolResult) error {
	t := tr.t
	tr.end()
	tr.u.stop = func() {} // the cancel signal sets the turn's canceled, carried
	tr.u.outcome = &turnResult{Turn: t.st.Turns, Thread: tr.res.Thread, Continued: true}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	st := t.st
	st.Last, st.Held = nil, nil // no turn but this one runs: neither is read before it ends
	st.Running = tr.carry(sr, left, later, results)
	if fitState(&st, t.set.MaxPayloadBytes) {
		return workflow.NewContinueAsNewError(ctx, WorkflowName, st)
	}
	workflow.GetLogger(ctx).Warn("toolrelay: the turn's state does not fit in a new run; the step goes on in this one", "turn", t.st.Turns, "limit", t.set.MaxPayloadBytes)
	tr.u.noContinue, tr.u.outcome = true, nil
	tr.pctx, tr.end = tr.u.phase(ctx, tr.u.deadline.Sub(workflow.Now(ctx)))
	if tr.u.canceled {
		tr.u.stop()
	}
	return nil
}

// carry returns the turn as the next run goes on from it.
func (tr *turnRun) carry(sr *stepResult, left, later []int, results []driver.ToolResult) *turnState {
	t := tr.t
	ts := &turnState{Request: tr.req, Result: *tr.res, Step: sr, Calls: left, Later: later, Deadline: tr.u.deadline, Canceled: tr.u.canceled,
		Items: tr.u.items, Texts: tr.u.texts, RunPart: t.runPart, Dropped: tr.u.dropped, Events: tr.u.events, AfterPause: tr.afterPause, PausedOn: tr.pausedOn}
	ts.Request.Input, ts.Request.Parts = "", nil
	ts.Result.Calls = slices.Clone(tr.res.Calls)
	for i := range results {
		if !slices.Contains(left, i) && !slices.Contains(later, i) {
			ts.Done = append(ts.Done, callDone{Index: i, Result: results[i]})
		}
	}
	for _, a := range tr.u.pending {
		ts.Pending = append(ts.Pending, *a)
	}
	if n := len(ts.Events) - maxPage; n > 0 {
		ts.Events, ts.Dropped = ts.Events[n:], ts.Dropped+n
	}
	return ts
}

// fitState keeps st, which carries a turn, within max bytes, dropping what
// the turn can go on without, in this order: its first events (a reader
// not yet given them is told they were skipped), its earlier steps'
// results (CallsOmitted, as an answer too large has them), the approvals
// of calls that ran, the largest outputs of the step's calls that ran (as
// the submit does, see fitResults). It reports whether st fits.
func fitState(st *State, max int) bool {
	ts := st.Running
	for size(st) > max && len(ts.Events) > 0 {
		n := (len(ts.Events) + 1) / 2
		ts.Events, ts.Dropped = ts.Events[n:], ts.Dropped+n
	}
	if size(st) > max && len(ts.Result.Calls) > 0 {
		ts.Result.Calls, ts.Result.CallsOmitted = nil, true
	}
	if size(st) > max {
		ts.Pending = slices.DeleteFunc(ts.Pending, func(a core.Approval) bool { return !ts.leftCall(a.Key.Call) })
	}
	if n := size(st); n > max && len(ts.Done) > 0 {
		rs := make([]driver.ToolResult, len(ts.Done))
		for i, d := range ts.Done {
			rs[i] = d.Result
		}
		if room := max - (n - size(rs)); room > 0 {
			fitResults(rs, room)
			for i := range ts.Done {
				ts.Done[i].Result = rs[i]
			}
		}
	}
	return size(st) <= max
}

// leftCall reports whether the call id is one the turn has still to run.
func (ts *turnState) leftCall(id string) bool {
	for _, i := range slices.Concat(ts.Calls, ts.Later) {
		if i >= 0 && i < len(ts.Step.Step.Calls) && ts.Step.Step.Calls[i].ID == id {
			return true
		}
	}
	return false
}

// restore takes the turn the run before carried, as running.
func (t *thread) restore(ts *turnState) {
	u := &turn{running: true, canceled: ts.Canceled, events: ts.Events, dropped: ts.Dropped, items: ts.Items, texts: ts.Texts, stream: ts.Request.Stream}
	for _, a := range ts.Pending {
		u.pending = append(u.pending, &a)
	}
	t.turn = u
	t.runPart = ts.RunPart
}

// goOn goes on with the turn the run before carried (see restore) to its
// end. Its error is the ContinueAsNewError of a turn that goes on in the
// next run again.
func (t *thread) goOn(ctx workflow.Context, ts *turnState) error {
	res := ts.Result
	tr := t.newTurnRun(ts.Request, &res)
	tr.afterPause, tr.pausedOn = ts.AfterPause, ts.PausedOn
	tr.pctx, tr.end = t.turn.phase(ctx, ts.Deadline.Sub(workflow.Now(ctx)))
	if err := ts.check(); err != nil {
		t.cancelService(ctx, res.Thread)
		tr.finish(ctx, err)
		return nil
	}
	if t.turn.canceled {
		t.cancelService(ctx, ts.Step.Step.Thread)
		tr.finish(ctx, t.turn.turnError(temporal.NewCanceledError()))
		return nil
	}
	results := make([]driver.ToolResult, len(ts.Step.Step.Calls))
	for _, d := range ts.Done {
		results[d.Index] = d.Result
	}
	if done, err := tr.calls(ctx, ts.Step, ts.Calls, ts.Later, results); done || err != nil {
		return err
	}
	sr, err := tr.submit(ts.Step.Step, results)
	return tr.loop(ctx, sr, err, false)
}

// check refuses a carried turn that does not hold together: no step, or
// an index past its calls.
func (ts *turnState) check() error {
	if ts.Step == nil || ts.Step.Step == nil {
		return errcode.Errorf(errcode.Internal, "temporal: the turn carried into this run has no step")
	}
	n := len(ts.Step.Step.Calls)
	for _, i := range slices.Concat(ts.Calls, ts.Later) {
		if i < 0 || i >= n {
			return errcode.Errorf(errcode.Internal, "temporal: the turn carried into this run has call %d of a step of %d", i, n)
		}
	}
	for _, d := range ts.Done {
		if d.Index < 0 || d.Index >= n {
			return errcode.Errorf(errcode.Internal, "temporal: the turn carried into this run has call %d of a step of %d", d.Index, n)
		}
	}
	return nil
}
