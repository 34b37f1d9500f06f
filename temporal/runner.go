package temporal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// Options configure a [Runner].
type Options struct {
	// TaskQueue is the task queue the workers poll (see [Register]).
	TaskQueue string
	// Loop are the loop's options for the threads this runner starts (a
	// thread keeps those it started with).
	Loop LoopOptions
	// Settings are the loop's options when Loop is zero.
	//
	// Deprecated: use Loop. Settings is kept for one release.
	Settings Settings
	// WorkflowTaskTimeout bounds a workflow task; a worker that dies with
	// one is noticed after it. Zero means 10 s (Temporal's default).
	WorkflowTaskTimeout time.Duration
}

// A Runner is the client side of the loop on Temporal: it starts and
// reaches the thread workflows that workers run (see [Register]), with the
// surface of core's Runner. A thread here is a workflow id: Run on a new
// thread makes one, and Result.Thread names it, for Resume, Decide and
// the next turn (the meaning core's Result.Thread has for core's Runner,
// where the value is the service's thread); the service's own thread is
// the Thread of its calls. Result.Turn is the service's id of the last
// turn, as from core's Runner.
//
// Unlike core's Runner, a turn does not live in the caller: the caller's
// context bounds only its wait. A turn whose caller stopped waiting goes
// on, durably, to its answer, which Resume returns; [Runner.Cancel] ends it.
type Runner struct {
	c    client.Client
	opts Options
}

// NewRunner returns a runner that starts and reaches thread workflows with
// c, on opts.TaskQueue.
func NewRunner(c client.Client, opts *Options) *Runner {
	r := &Runner{c: c}
	if opts != nil {
		r.opts = *opts
	}
	return r
}

// loop returns the loop's options: Loop, or the deprecated Settings when
// Loop is zero.
func (o *Options) loop() LoopOptions {
	if reflect.ValueOf(o.Loop).IsZero() {
		return o.Settings
	}
	return o.Loop
}

// Client returns the runner's Temporal client.
func (r *Runner) Client() client.Client { return r.c }

// NewThread returns a new thread's name: a workflow id no other thread
// has.
func NewThread() string {
	var b [12]byte
	rand.Read(b[:])
	return "toolrelay-" + hex.EncodeToString(b[:])
}

// Run runs a turn: it sends input on a new thread (or opts.Thread) and
// waits for the model's final answer, as core's Runner.Run does. The turn
// is the run update of the thread's workflow, which it starts if none
// runs (update-with-start, so that a stateless front end can start or
// continue a thread by its name alone). A turn paused on calls awaiting a
// decision returns its Pending calls and an error matching
// core.ErrAwaitingApproval; [Runner.Decide], then [Runner.Resume], go on.
// On error, the Result holds the Thread once it exists.
func (r *Runner) Run(ctx context.Context, input string, opts *core.RunOptions) (*core.Result, error) {
	thread, req := r.request(input, opts, false)
	h, err := r.startTurn(ctx, thread, req, client.WorkflowUpdateStageCompleted)
	if err != nil && ctx.Err() != nil {
		// The caller stopped waiting: the turn may have started, and
		// goes on if it did.
		return &core.Result{Thread: thread}, err
	}
	if err != nil {
		return nil, err
	}
	tr, err := r.outcome(ctx, thread, h)
	if err != nil {
		return &core.Result{Thread: thread}, waitError(ctx, "run", err)
	}
	return result(thread, tr)
}

// waitError is the error of a wait for a turn's outcome: when the
// caller's context ended, its cause, with the cause's code (as core's
// Runner gives it: context.Canceled is Canceled), saying that the turn
// goes on; otherwise the client's error, coded.
func waitError(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil {
		return clientError(op, err)
	}
	cause := context.Cause(ctx)
	return &errcode.Error{Code: errcode.Of(cause), Op: "temporal: " + op,
		Err: fmt.Errorf("the caller stopped waiting (the turn goes on: Resume waits for it, Cancel ends it): %w", cause)}
}

// outcome returns the outcome of the turn whose run, wait or resume
// update h is, following the turn into the workflow's next runs when it
// continued as new in the middle (TurnResult.Continued).
func (r *Runner) outcome(ctx context.Context, thread string, h client.WorkflowUpdateHandle) (*turnResult, error) {
	var tr turnResult
	if err := h.Get(ctx, &tr); err != nil {
		return nil, err
	}
	for tr.Continued {
		h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: thread, UpdateName: UpdateWait, Args: []any{waitRequest{Turn: tr.Turn}},
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return nil, err
		}
		tr = turnResult{}
		if err := h.Get(ctx, &tr); err != nil {
			return nil, err
		}
	}
	return &tr, nil
}

func (r *Runner) request(input string, opts *core.RunOptions, stream bool) (string, *runRequest) {
	req := &runRequest{Input: input, Stream: stream}
	thread := ""
	if opts != nil {
		thread = opts.Thread
		req.Parts, req.MaxSteps, req.Timeout, req.Budget = opts.Parts, opts.MaxSteps, opts.Timeout, opts.Budget
		if f := opts.Format; f != nil {
			req.Format = &driver.Format{Name: f.Name(), Schema: f.Schema(), Strict: f.Strict()}
		}
	}
	if thread == "" {
		thread = NewThread()
	}
	return thread, req
}

// startTurn sends the run update to thread's workflow, starting it if
// none runs, and returns once the update reached stage. Input parts no
// service can carry are refused before anything is sent.
func (r *Runner) startTurn(ctx context.Context, thread string, req *runRequest, stage client.WorkflowUpdateStage) (client.WorkflowUpdateHandle, error) {
	if err := driver.CheckParts(req.Parts); err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "temporal: run", Err: err}
	}
	if err := r.checkBudgets("run", req.Budget); err != nil {
		return nil, err
	}
	start := r.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       thread,
		TaskQueue:                r.opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowTaskTimeout:      r.opts.WorkflowTaskTimeout,
	}, WorkflowName, State{Settings: r.opts.loop()})
	h, err := r.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   thread,
			UpdateName:   UpdateRun,
			Args:         []any{req},
			WaitForStage: stage,
		},
	})
	if err != nil {
		return nil, waitError(ctx, "run", err)
	}
	return h, nil
}

// Resume waits for the turn running on thread and returns it as Run
// does; when none runs, it returns the last turn's outcome. A turn that
// stopped on its budget goes on instead, from the step whose calls it did
// not run, with opts.Budget (over the loop's Settings.Budget) counted from
// the turn's start: opts.Budget's fields override those of the turn's
// budget that they set (with a raised budget it runs the step's calls;
// with the same, or none, it stops again). opts' other fields are
// ignored. A thread no workflow has is NotFound; a budget that fails
// core.Budget.Check is InvalidArgument, sending nothing.
func (r *Runner) Resume(ctx context.Context, thread string, opts *core.RunOptions) (*core.Result, error) {
	h, err := r.resume(ctx, thread, opts, false, client.WorkflowUpdateStageCompleted)
	if err != nil {
		return nil, clientError("resume", err)
	}
	tr, err := r.outcome(ctx, thread, h)
	if err != nil {
		return &core.Result{Thread: thread}, waitError(ctx, "resume", err)
	}
	return result(thread, tr)
}

// resume sends the resume update to thread's workflow (stream: the held
// turn's text streamed), with opts' budget, and returns once the update
// reached stage.
func (r *Runner) resume(ctx context.Context, thread string, opts *core.RunOptions, stream bool, stage client.WorkflowUpdateStage) (client.WorkflowUpdateHandle, error) {
	req := resumeRequest{Stream: stream}
	if opts != nil {
		req.Budget = opts.Budget
	}
	if err := r.checkBudgets("resume", req.Budget); err != nil {
		return nil, err
	}
	return r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: thread, UpdateName: UpdateResume, Args: []any{req}, WaitForStage: stage})
}

// checkBudgets refuses, with InvalidArgument and sending nothing, a
// turn whose budget (b, its RunOptions.Budget) or whose loop's default
// fails core.Budget.Check, as core's Runner does.
func (r *Runner) checkBudgets(op string, b core.Budget) error {
	if err := b.Check(); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "temporal: " + op, Err: fmt.Errorf("RunOptions.Budget: %w", err)}
	}
	if err := r.opts.loop().Budget.Check(); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "temporal: " + op, Err: fmt.Errorf("the loop's LoopOptions.Budget: %w", err)}
	}
	return nil
}

// Decide records d about the call callID of thread, which awaits a
// decision; the paused turn goes on by itself once every call of its
// step is decided. The decide update's validator refuses, recording
// nothing, an unknown call (NotFound), a second decision
// (FailedPrecondition), and edited arguments that are not a JSON object
// (InvalidArgument).
func (r *Runner) Decide(ctx context.Context, thread, callID string, d core.Decision) error {
	if len(d.Arguments) > 0 && !json.Valid(d.Arguments) {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "temporal: decide", Err: fmt.Errorf("the edited arguments of call %q are not JSON", callID)}
	}
	h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: thread, UpdateName: UpdateDecide, Args: []any{decideRequest{CallID: callID, Decision: d}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return clientError("decide", err)
}

// Approvals returns the approvals of the calls of thread's current turn
// (or last, when none runs), in the order they were asked for: those
// awaiting a decision and those decided, as core's Runner.Approvals
// does. A thread no workflow has is NotFound.
func (r *Runner) Approvals(ctx context.Context, thread string) ([]core.Approval, error) {
	v, err := r.query(ctx, maxQueries, thread, QueryApprovals)
	if err != nil {
		return nil, clientError("approvals", err)
	}
	var list []core.Approval
	if err := v.Get(&list); err != nil {
		return nil, clientError("approvals", err)
	}
	return list, nil
}

// query asks thread's workflow the query name, again while it goes
// unanswered for want of a worker (see unanswered), or is canceled by the
// server rather than the caller (as when the worker that ran the
// workflow has just stopped, and another takes it over): at most tries
// times (0: until ctx ends), within ctx.
func (r *Runner) query(ctx context.Context, tries int, thread, name string, args ...any) (converter.EncodedValue, error) {
	wait := pollFirst
	for i := 1; ; i++ {
		v, err := r.c.QueryWorkflow(ctx, thread, "", name, args...)
		var ce *serviceerror.Canceled
		again := unanswered(err) || ctx.Err() == nil && (errors.As(err, &ce) || errors.Is(err, context.Canceled))
		if err == nil || !again || i == tries {
			return v, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		wait = min(2*wait, pollMax)
	}
}

// maxQueries bounds the times a query of the Runner's methods is asked.
const maxQueries = 10

// Cancel ends the turn running on thread: its calls are interrupted, the
// service's turn canceled, and the turn ends with Canceled. A turn paused
// on calls awaiting a decision is abandoned as core's Runner.Cancel
// abandons it: the service's turn is canceled (the step's results are not
// sent, the undecided calls never run), the turn ends with Canceled, and
// its approvals are still listed, undecided. A last turn stopped on its
// budget is abandoned: its service's turn is canceled. Cancel returns once
// the turn ended, as core's Runner.Cancel does, so that the thread takes
// new input at once; ctx bounds that wait. A turn still paused after
// that many waits (a workflow whose history took a cancel signal in a
// pause before the signal ended one, replayed so) fails it with
// FailedPrecondition.
func (r *Runner) Cancel(ctx context.Context, thread string) error {
	if err := r.c.SignalWorkflow(ctx, thread, "", SignalCancel, nil); err != nil {
		return clientError("cancel", err)
	}
	// The wait update returns a paused turn's outcome as it is: the one
	// sent before the workflow took the signal in may still see the
	// turn paused, so wait again until it ended (a few rounds at most).
	for range maxCancelWaits {
		h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: thread, UpdateName: UpdateWait, Args: []any{waitRequest{}},
			WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return waitError(ctx, "cancel", err)
		}
		var tr turnResult
		err = h.Get(ctx, &tr)
		if errcode.Of(clientError("cancel", err)) == errcode.FailedPrecondition {
			return nil // no turn has run on the thread
		}
		if err != nil {
			return waitError(ctx, "cancel", err)
		}
		if tr.Done {
			return nil
		}
	}
	return &errcode.Error{Code: errcode.FailedPrecondition, Op: "temporal: cancel",
		Err: fmt.Errorf("the turn of thread %s still awaits a decision after %d waits for its end: the workflow did not end it", thread, maxCancelWaits)}
}

// maxCancelWaits bounds the waits of Cancel for the canceled turn's end.
const maxCancelWaits = 20

// result is a turn's outcome as core's Runner gives it: its Thread the
// workflow id (thread), its Turn the service's turn.
func result(thread string, tr *turnResult) (*core.Result, error) {
	unwrapResults(tr.Calls)
	for i := range tr.Pending {
		tr.Pending[i].Arguments = unwrapArgs(tr.Pending[i].Arguments)
	}
	res := &core.Result{Text: tr.Text, Thread: thread, Turn: tr.ServiceTurn, Steps: tr.Steps, Calls: tr.Calls, Pending: tr.Pending,
		Usage: tr.Usage, ToolCalls: tr.ToolCalls, Cost: tr.Cost, Remaining: tr.Remaining}
	switch {
	case tr.Err != nil:
		return res, tr.Err.Err()
	case !tr.Done:
		return res, &errcode.Error{Code: errcode.FailedPrecondition, Op: "temporal: run",
			Err: fmt.Errorf("the run paused: %d call(s) of thread %s await a decision (Runner.Decide): %w", len(tr.Pending), thread, core.ErrAwaitingApproval)}
	}
	return res, nil
}

// clientError gives an error of the Temporal client its code: a refusal
// of the workflow's (an application error) has its own; a workflow that
// does not exist is NotFound.
func clientError(op string, err error) error {
	if err == nil {
		return nil
	}
	var (
		ae *temporal.ApplicationError
		nf *serviceerror.NotFound
	)
	switch {
	case errors.As(err, &ae):
		info := historyError{Code: ae.Type(), Message: ae.Message()}
		if ae.HasDetails() {
			_ = ae.Details(&info.Is) // a refusal's names of what it matches (see refusal)
		}
		e := info.Err().(*errcode.Error)
		e.Op = "temporal: " + op
		return e
	case errors.As(err, &nf):
		return &errcode.Error{Code: errcode.NotFound, Op: "temporal: " + op, Err: err}
	}
	return &errcode.Error{Code: errcode.Of(err), Op: "temporal: " + op, Err: err}
}
