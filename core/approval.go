package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// DefaultApprovalTimeout is how long a call awaits a decision unless
// Options.ApprovalTimeout says otherwise.
const DefaultApprovalTimeout = 24 * time.Hour

type (
	// An Approval is a call that needs a person's decision before it runs
	// (see [ToolOptions.Approval]).
	Approval = journaldriver.Approval
	// A Decision is what a person decided about a call (see
	// [Runner.Decide]).
	Decision = journaldriver.Decision
)

// ErrAwaitingApproval is matched by the error of a run that paused because
// calls of its step await a decision ([Result.Pending] lists them), and of a
// resume made before every one was decided. Its code is FailedPrecondition.
var ErrAwaitingApproval = errors.New("awaiting approval")

// An ApprovalRule says whether a call needs a person's approval before it
// runs, and why. It gets the call and its arguments (canonical, valid
// against the schema). A rule that fails is taken to mean that the call
// needs approval.
type ApprovalRule func(ctx context.Context, call Call, args json.RawMessage) (need bool, why string, err error)

// ApprovalAlways returns a rule by which every call needs approval, for
// why: the rule of [ApprovalIf] whose answer is always yes.
func ApprovalAlways(why string) ApprovalRule {
	return func(context.Context, Call, json.RawMessage) (bool, string, error) { return true, why, nil }
}

// Always returns a rule by which every call needs approval, for why.
//
// Deprecated: use ApprovalAlways, named as one family with ApprovalIf.
// Always is kept for one release.
func Always(why string) ApprovalRule { return ApprovalAlways(why) }

// ApprovalIf returns a rule that decodes a call's arguments into an In (the
// tool's input type) and asks f, as in "refunds over 100 need approval".
func ApprovalIf[In any](f func(ctx context.Context, in In) (need bool, why string)) ApprovalRule {
	return func(ctx context.Context, _ Call, args json.RawMessage) (bool, string, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return false, "", err
		}
		need, why := f(ctx, in)
		return need, why, nil
	}
}

// awaitingError is the error of a run that pauses (or a resume refused)
// while n calls of thread await a decision.
func awaitingError(thread string, n int, what string) error {
	msg := "the run paused: %d call(s) of thread %s await a decision (Runner.Decide, then Runner.Resume): %w"
	if what == "resume" {
		msg = "cannot resume: %d call(s) of thread %s still await a decision (Runner.Decide): %w"
	}
	return &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf(msg, n, thread, ErrAwaitingApproval)}
}

// approvals returns the journal's approvals, or an error saying it keeps
// none.
func (r *Runner) approvals() (journaldriver.Approvals, error) {
	if a, ok := r.opts.Journal.(journaldriver.Approvals); ok {
		return a, nil
	}
	return nil, errcode.Errorf(errcode.FailedPrecondition, "core: a tool needs approval, but the journal (%T) keeps no approvals: use the memory journal", r.opts.Journal)
}

// errPaused is a call's "error" when it awaits a decision.
var errPaused = errors.New("core: the call awaits a decision")

// approvalRule returns the rule that says whether call, of tool (nil if
// none has its name), needs approval: its tool's, or, for the service's
// own approval request, one that always does; nil when none applies.
func approvalRule(call *Call, tool *Tool) ApprovalRule {
	if call.Kind == ServiceApproval {
		return ApprovalAlways("the service asks a person to approve " + call.Name)
	}
	if tool != nil {
		return tool.opts.Approval
	}
	return nil
}

// Approvals returns the approvals of the runner's backend on thread, oldest
// first: those awaiting a decision and those decided.
func (r *Runner) Approvals(ctx context.Context, thread string) ([]Approval, error) {
	ap, err := r.approvals()
	if err != nil {
		return nil, err
	}
	return ap.ListApprovals(ctx, r.b.Name(), thread)
}

// A decision is one [Runner.Decide]: a person's decision about a call of
// thread, recorded in the journal's approvals ap, and the paused run of
// the thread it hands on.
type decision struct {
	r      *Runner
	ap     journaldriver.Approvals
	thread string
}

// check returns why d cannot be recorded for a: a reason the
// model could not read whole (past Options.MaxOutputBytes), or edited
// arguments the model could not have sent: not a JSON object, past
// Options.MaxArgumentBytes, invalid against the schema of a's tool, or
// for a call of no tool of the runner's (a service's approval request).
func (dc *decision) check(a *Approval, d *Decision) error {
	r := dc.r
	if n := len(d.Reason); n > r.opts.MaxOutputBytes {
		return &tooLargeError{what: "reason", size: n, limit: r.opts.MaxOutputBytes}
	}
	if len(d.Arguments) == 0 {
		return nil
	}
	if n := len(d.Arguments); n > r.opts.MaxArgumentBytes {
		return fmt.Errorf("the edited arguments: %w", &tooLargeError{what: "arguments", size: n, limit: r.opts.MaxArgumentBytes})
	}
	if raw := trimJSONSpace(d.Arguments); len(raw) == 0 || raw[0] != '{' {
		return errors.New("the edited arguments must be a JSON object")
	}
	if strings.Contains(a.Key.Call, askSep) {
		return errors.New("the call is a question a tool's handler asked (see Ask), or an agent tool's child's call (see NewAgentTool): approve or deny it; its arguments cannot be edited")
	}
	tool := r.tools.Lookup(a.Tool)
	if tool == nil {
		return fmt.Errorf("the edited arguments: %q is not a tool of this runner, and a service's approval request takes none", a.Tool)
	}
	canon, obj, err := parseArgs(d.Arguments)
	if err == nil {
		_, err = tool.prepareArgs(canon, obj)
	}
	if err != nil {
		return fmt.Errorf("the edited arguments are not valid for tool %q: %w", a.Tool, err)
	}
	return nil
}

// owner is the owner under which this runner holds a run while it
// records a decision (see Decide): not the runner's own, so that the hold
// is told apart from a run of this runner on the same thread (a Resume
// in this process), whose lease a decision must never end or shorten.
func (dc *decision) owner() string { return dc.r.opts.Owner + "/decision" }

// wake records the run paused on the thread as running, held by this
// runner's decider (see owner) for lease, not renewed: if the decider stops, another
// worker takes the run over once the lease passes (see
// [journaldriver.Runs]); with a lease of 0, any worker's Resume or
// TakeOver takes it at once. It reports whether it did; it does nothing
// in a journal that keeps no runs.
func (dc *decision) wake(ctx context.Context, lease time.Duration) bool {
	r, thread := dc.r, dc.thread
	runs, ok := r.opts.Journal.(journaldriver.Runs)
	if !ok || r.own != nil {
		return false
	}
	woke, err := runs.WakeRun(context.WithoutCancel(ctx), r.b.Name(), thread, dc.owner(), lease)
	if err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the decided run", "thread", thread, errorAttr(err))
	}
	return woke
}

// letGo ends the decider's hold on the run of the thread (see wake) at
// once, the run left running with its lease over: any worker's Resume
// takes it without waiting, and so does a worker's TakeOver. A hold that
// another worker took over meanwhile is left to it; one the journal
// fails to end passes with its lease.
func (dc *decision) letGo(ctx context.Context, runs journaldriver.Runs) {
	r, thread := dc.r, dc.thread
	err := runs.RenewRun(ctx, r.b.Name(), thread, dc.owner(), 0)
	if err != nil && !errors.Is(err, journaldriver.ErrLeaseLost) {
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not hand on the decided run", "thread", thread, errorAttr(err))
	}
}

// after leaves the run of the thread, after the decision, running,
// for any worker to go on with at once (a Resume, in any process, or a
// TakeOver), when no call of it awaits a decision any more, and paused
// otherwise; woke says whether the decider woke it before the decision.
// A run it puts back to paused is looked at again: a decision recorded
// meanwhile by another worker may have found it awake, and left it to
// this one. It never leaves the run held by the decider.
func (dc *decision) after(ctx context.Context, woke bool) {
	r, ap, thread := dc.r, dc.ap, dc.thread
	runs, ok := r.opts.Journal.(journaldriver.Runs)
	if !ok || r.own != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for {
		list, err := ap.ListApprovals(ctx, r.b.Name(), thread)
		if err != nil {
			// Left running if woken: a Resume or a takeover goes on
			// with it, and pauses it again if calls still await a
			// decision.
			r.opts.Logger.WarnContext(ctx, "toolrelay: could not read the run's approvals", "thread", thread, errorAttr(err))
			if woke {
				dc.letGo(ctx, runs)
			}
			return
		}
		now := time.Now()
		pending := slices.ContainsFunc(list, func(a Approval) bool { return a.Pending(now) })
		switch {
		case !pending && woke:
			dc.letGo(ctx, runs)
			return
		case !pending:
			dc.wake(ctx, 0)
			return
		case !woke:
			return
		}
		if err := runs.EndRun(ctx, r.b.Name(), thread, dc.owner(), journaldriver.RunAwaiting, ""); err != nil {
			return // another worker took it over
		}
		woke = false
	}
}

// Decide records d about the call callID of thread, which awaits a decision;
// the run then goes on with [Runner.Resume] (once every call of the step is
// decided), in this process or another sharing the journal. An approved
// call runs (with d.Arguments, if set, in place of the model's); a denied
// one gets a failed result telling the model it was denied, and why.
// Edited arguments pass what the model's do (a JSON object within
// Options.MaxArgumentBytes, valid against the tool's schema), and a reason
// fits Options.MaxOutputBytes; otherwise the error's code is
// InvalidArgument. An unknown call gives an error whose code is NotFound;
// a call decided before, or whose time to decide passed,
// FailedPrecondition. No error changes anything.
//
// In a journal that keeps runs, the decision that leaves no call of the
// run awaiting one leaves the run to whoever goes on with it first, at
// once: a Resume in any process sharing the journal (this one, the run's
// own, or another) or a worker's [Runner.TakeOver], so that a run whose
// every call is decided is never left parked. While the decision is
// recorded, the run is held for Options.Lease, not renewed: if the
// process that decides stops then, a worker's TakeOver resumes the run
// once the lease passed.
func (r *Runner) Decide(ctx context.Context, thread, callID string, d Decision) error {
	ap, err := r.approvals()
	if err != nil {
		return err
	}
	list, err := ap.ListApprovals(ctx, r.b.Name(), thread)
	if err != nil {
		return err
	}
	for _, a := range list {
		if a.Key.Call != callID {
			continue
		}
		if a.Decision == nil && !a.Pending(time.Now()) {
			return errcode.Errorf(errcode.FailedPrecondition, "core: call %s of thread %s: the time to decide passed at %v", callID, thread, a.Expires.Format(time.RFC3339))
		}
		if d.At.IsZero() {
			d.At = time.Now()
		}
		dc := &decision{r: r, ap: ap, thread: thread}
		if err := dc.check(&a, &d); err != nil {
			return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: decide", Err: fmt.Errorf("call %s of thread %s: %w", callID, thread, err)}
		}
		// The paused run is held by the decider before the decision is
		// recorded, and let go after: running, or paused again if calls
		// still await a decision (see decision.after). A worker that
		// stops in between leaves it to a takeover.
		woke := dc.wake(ctx, r.opts.Lease)
		_, err := ap.DecideApproval(ctx, a.Key, d)
		dc.after(ctx, woke)
		if errors.Is(err, journaldriver.ErrDecided) {
			return &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: decide", Err: fmt.Errorf("call %s of thread %s: %w", callID, thread, err)}
		}
		if err != nil {
			return &errcode.Error{Code: errcode.Of(err), Op: "core: decide", Err: err}
		}
		return nil
	}
	return &errcode.Error{Code: errcode.NotFound, Op: "core: decide", Err: fmt.Errorf("call %s of thread %s: %w", callID, thread, journaldriver.ErrNoApproval)}
}
