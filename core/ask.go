package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// A Question is something a tool's handler asks people to decide while it
// runs ([Ask]): an approval of the run, as a call's that needs one.
type Question struct {
	// ID names the question among those of its call: not empty, unique
	// among the call's questions, and the same each time the call runs
	// (a question of a new ID is a new question). The approval's call id
	// is the call's id, "/" and ID.
	ID string
	// Tool is what the approval names as the tool called; empty means
	// the call's tool.
	Tool string
	// Arguments, if set, are JSON shown with the approval (the
	// arguments of what is to be decided).
	Arguments json.RawMessage
	// Why says what is to be decided, and why.
	Why string
}

// askSep joins the id of a call and the id of a question its handler
// asked (an agent tool's child's call id, for an agent tool) in the call
// id of the approval the run's journal keeps.
const askSep = "/"

// Ask asks people to decide qs, for the call whose handler runs with
// ctx, through the approvals of the call's run, and returns the
// decisions, in the order of qs, once every one is decided.
//
// Until then, Ask records each question not yet asked as an approval of
// the run, keyed as the call is (its backend, thread and turn) with the
// call's id, "/" and the question's ID as call id, whose Tool, Arguments
// and Why are the question's, and which expires after the runner's
// Options.ApprovalTimeout; it reports each new one as an
// [EventApprovalRequested]; and it returns an error matching
// [ErrAwaitingApproval] (code FailedPrecondition), which the handler
// returns (it may wrap it): the run then pauses as for a call whose tool
// needs approval, the call's result not recorded. [Runner.Approvals]
// lists the questions, [Result.Pending] too; [Runner.Decide] decides
// them, approving or denying (edited arguments are refused, code
// InvalidArgument); and [Runner.Resume], once every approval of the step
// is decided, runs the call again, in this process or another sharing
// the journal: its handler, run from its start, asks again, and this
// time Ask returns the decisions. What the handler did before it asked,
// it does again: it must be safe to run again (do the work after the
// decisions, or make what comes before idempotent). A question left
// undecided past its time is decided as denied, with the reason "no
// decision in time", by the Ask that finds it so ([Runner.ResumeExpired]
// resumes runs parked on such approvals).
//
// Only a handler running for a call of a step of a runner's run
// ([Runner.Run], [Runner.Resume], their streams, a takeover) can ask: in
// a call of [Runner.Call] (as module toolrelay/temporal answers calls),
// outside a handler, or with a journal that keeps no approvals, Ask
// returns an error whose code is FailedPrecondition and that does not
// match ErrAwaitingApproval, so that the tool can do without. Questions
// that are empty, without an ID, with one ID twice, or with arguments
// that are not JSON give an error whose code is InvalidArgument. A
// failure of the journal is returned with its code.
func Ask(ctx context.Context, qs ...Question) ([]Decision, error) {
	s, _ := ctx.Value(askKey{}).(*askStep)
	call, _ := ctx.Value(callKey{}).(*Call)
	if s == nil || call == nil || !s.has(call) {
		return nil, errcode.Errorf(errcode.FailedPrecondition, "core: ask: no one can be asked here: only the handler of a call of a runner's step (Run, Resume, their streams) can ask for a decision, not one of Runner.Call")
	}
	if err := checkQuestions(qs); err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "core: ask", Err: err}
	}
	r := s.r
	c := &callRun{r: r, call: call, step: s.n, mode: stepCall}
	ap, ok := r.opts.Journal.(journaldriver.Approvals)
	if !ok {
		return nil, errcode.Errorf(errcode.FailedPrecondition, "core: ask: the journal (%T) keeps no approvals, so no one can be asked: use the memory journal", r.opts.Journal)
	}
	list, err := ap.ListApprovals(ctx, r.b.Name(), call.Thread)
	if err != nil {
		return nil, journalError(ctx, err)
	}
	mine := make(map[string]Approval)
	for _, a := range askedBy(list, call) {
		mine[a.Key.Call] = a
	}
	now := time.Now()
	out := make([]Decision, len(qs))
	var (
		asking  []Approval
		waiting int
	)
	base := r.key(call)
	for i, q := range qs {
		key := base
		key.Call += askSep + q.ID
		a, ok := mine[key.Call]
		switch {
		case !ok:
			tool := q.Tool
			if tool == "" {
				tool = call.Name
			}
			asking = append(asking, Approval{Key: key, Tool: tool, Arguments: q.Arguments, Why: q.Why, Requested: now, Expires: now.Add(r.opts.ApprovalTimeout)})
		case a.Decision == nil && a.Pending(now):
			waiting++
		case a.Decision == nil:
			out[i] = c.expire(ctx, ap, a)
		default:
			out[i] = *a.Decision
		}
	}
	if len(asking) == 0 && waiting == 0 {
		return out, nil
	}
	events, err := c.requestApprovals(ctx, ap, asking)
	if err != nil {
		return nil, err
	}
	n := waiting + len(asking)
	return nil, &callStop{paused: true, asked: events, err: &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: ask",
		Err: fmt.Errorf("%d question(s) of call %s await a decision (Runner.Decide, then Runner.Resume): %w", n, call.ID, ErrAwaitingApproval)}}
}

// checkQuestions returns why qs cannot be asked, if they cannot.
func checkQuestions(qs []Question) error {
	if len(qs) == 0 {
		return errors.New("no question")
	}
	seen := make(map[string]bool, len(qs))
	for _, q := range qs {
		switch {
		case q.ID == "":
			return errors.New("a question without an ID")
		case seen[q.ID]:
			return fmt.Errorf("question %q asked twice", q.ID)
		case len(q.Arguments) > 0 && !json.Valid(q.Arguments):
			return fmt.Errorf("question %q: its arguments are not JSON", q.ID)
		}
		seen[q.ID] = true
	}
	return nil
}

// askKey keys the *askStep of a step's calls in their context (see
// stepRun.runCalls).
type askKey struct{}

// An askStep is what [Ask] needs of the step whose call's handler asks:
// its runner, its number and its calls, which tell a handler of one of
// them from one of a call of [Runner.Call] whose context derives from a
// step's call's. It does not change while the step's calls run (a
// handler left behind may read it after).
type askStep struct {
	r     *Runner
	n     int
	calls []Call
}

// has reports whether call is one of the step's calls.
func (s *askStep) has(call *Call) bool {
	for i := range s.calls {
		if &s.calls[i] == call {
			return true
		}
	}
	return false
}

// withAsk returns ctx for the handlers of the step's calls: where [Ask]
// finds them.
func (s *stepRun) withAsk(ctx context.Context) context.Context {
	return context.WithValue(ctx, askKey{}, &askStep{r: s.r, n: s.n, calls: s.step.Calls})
}

// askedBy returns the approvals, in list, of the questions the handler of
// call asked (an agent tool's: its child's approvals), by their keys.
func askedBy(list []Approval, call *Call) []Approval {
	var out []Approval
	prefix := call.ID + askSep
	for _, a := range list {
		if a.Key.Thread == call.Thread && a.Key.Turn == call.Turn && strings.HasPrefix(a.Key.Call, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// expire records that the approval a, asked by the call's handler and
// left undecided past its time, is denied ("no decision in time"), so
// that ResumeExpired does not find it again and again, and returns the
// decision. A decision recorded meanwhile is returned in its place; a
// failure to record is logged.
func (c *callRun) expire(ctx context.Context, ap journaldriver.Approvals, a Approval) Decision {
	r := c.r
	d := Decision{Reason: "no decision in time", Actor: "toolrelay", At: time.Now()}
	got, err := ap.DecideApproval(ctx, a.Key, d)
	switch {
	case errors.Is(err, journaldriver.ErrDecided) && got.Decision != nil:
		return *got.Decision
	case err != nil && !errors.Is(err, journaldriver.ErrDecided):
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record an expired approval", "call_id", a.Key.Call, errorAttr(err))
	}
	return d
}

// requestApprovals records the approvals as, asked by the call's handler,
// each unless the journal has it, and returns the approval requested
// events of those it recorded, for the call to report (see callStop).
func (c *callRun) requestApprovals(ctx context.Context, ap journaldriver.Approvals, as []Approval) ([]*Event, error) {
	call := c.call
	var events []*Event
	for _, a := range as {
		a.Decision = nil
		_, created, err := ap.RequestApproval(ctx, a)
		if err != nil {
			return nil, journalError(ctx, err)
		}
		if created {
			q := &Call{Thread: call.Thread, Turn: call.Turn, ID: a.Key.Call, Name: a.Tool, Arguments: a.Arguments}
			events = append(events, &Event{Kind: EventApprovalRequested, Thread: q.Thread, Turn: q.Turn, Step: c.step, Call: q, Text: a.Why})
		}
	}
	return events, nil
}

// callStop is the handler's "error" when its call stops its run: it
// awaits decisions (paused: questions of [Ask], or the approvals an agent
// tool's child awaits), or, for an agent tool, its child stopped on the
// run's budget (err; see NewAgentTool). asked holds the approval requested
// events of the questions asked, which the call reports as it stops.
type callStop struct {
	paused bool
	asked  []*Event
	err    error
}

func (e *callStop) Error() string {
	if e.err == nil {
		return "the agent awaits a person's decision"
	}
	return e.err.Error()
}

func (e *callStop) Unwrap() error { return e.err }

// stopOf returns the *callStop in cause, if c is a call of a step (its
// variable, which errors.As puts on the heap, made only then).
func stopOf(c *callRun, cause error) *callStop {
	if c.mode != stepCall || cause == nil {
		return nil
	}
	var stop *callStop
	if errors.As(cause, &stop) {
		return stop
	}
	return nil
}

// tell reports e, an approval requested by the call's handler, as the
// call's events go: to the runner's OnEvent and the call's stream, if
// any; an async view of it is given up on once ctx ends (no one drains
// it then).
func (c *callRun) tell(ctx context.Context, e *Event) {
	c.r.emit(ctx, e)
	switch out := c.out; {
	case out == nil:
	case out.ch == nil:
		out.deliver(e)
	default:
		select {
		case out.ch <- *e:
		case <-ctx.Done():
		}
	}
}
