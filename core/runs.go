package core

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// TakeOver takes over the runs of the runner's backend whose worker died
// (their record's lease expired without being renewed: a process killed,
// a machine lost) and resumes them here, as [Runner.Resume] does: the
// calls the journal holds results for are not run again. A run is
// recorded before the request that creates its thread (with its input,
// unless it has parts or a format): one whose worker died before its
// thread existed, or before the thread was recorded, is started again
// here, on a new thread (none of its calls having run; a thread the dead
// worker may have created is left as it is); so is a run recorded with
// [Runner.Enqueue]. It claims one run at a time, the longest dead first,
// and runs it before it claims the next, at most 100 runs per call: a
// worker holds no run it is not working on, so that the other workers
// take the rest meanwhile, and a worker that dies strands one run, not
// its backlog. It returns their results; the errors of the runs that
// failed are joined. Of several workers taking over at once, each run goes
// to one. It needs a journal that keeps runs (SQLite, PostgreSQL, or a
// memory journal shared in one process); runs are recorded by runners
// over such a journal.
func (r *Runner) TakeOver(ctx context.Context) ([]*Result, error) {
	runs, ok := r.opts.Journal.(journaldriver.Runs)
	if !ok {
		return nil, nil
	}
	var g gathered
	for range maxTakenOver {
		due, err := runs.ClaimRuns(ctx, r.b.Name(), r.opts.Owner, r.opts.Lease, 1)
		if err != nil {
			g.errs = append(g.errs, journalError(ctx, err))
			break
		}
		if len(due) == 0 {
			break
		}
		run := due[0]
		var o runOptionsJSON
		json.Unmarshal([]byte(run.Options), &o)
		r.opts.Logger.InfoContext(ctx, "toolrelay: taking over a run whose worker stopped", "thread", run.Thread, "previous_owner", run.Owner)
		b := beginning{thread: run.Thread, takenOver: true}
		if strings.HasPrefix(run.Thread, startPrefix) {
			// Its thread did not exist, or was not recorded: start again.
			b = beginning{input: o.Input, startRecord: run.Thread, takenOver: true}
		}
		if g.add(r.exec(ctx, r.runOptions(o.options()), b, nil)); ctx.Err() != nil {
			break
		}
	}
	return g.results()
}

// Enqueue records a run of input on a new thread, for a worker sharing
// the runner's journal to start ([Runner.TakeOver], [Runner.KeepTakingOver]),
// and returns the name of its record (as journaldriver.Runs lists it until the
// run's thread exists). It runs nothing itself: once it returns, the run
// is in the journal, and survives this process, which may hand runs to a
// fleet and exit; the first worker's TakeOver starts it, as [Runner.Run]
// would, with opts' step limit, time limit and budget (the worker's own
// when they are zero), and returns its result. Enqueue needs a journal that
// keeps runs and that the runner did not make itself (an error whose code
// is FailedPrecondition otherwise); a run that continues a thread
// (opts.Thread), or whose input has parts or a format, cannot be
// enqueued, nor one whose budget fails [Budget.Check] (InvalidArgument).
func (r *Runner) Enqueue(ctx context.Context, input string, opts *RunOptions) (string, error) {
	runs, ok := r.opts.Journal.(journaldriver.Runs)
	if !ok || r.own != nil {
		return "", errcode.Errorf(errcode.FailedPrecondition, "core: enqueue: the runner's journal keeps no runs that other workers share (open a SQLite or PostgreSQL journal)")
	}
	var o runOptionsJSON
	if opts != nil {
		if opts.Thread != "" || len(opts.Parts) > 0 || opts.Format != nil {
			return "", errcode.Errorf(errcode.InvalidArgument, "core: enqueue: a run enqueued starts a new thread with text input (no thread, parts or format)")
		}
		if err := opts.Budget.check(); err != nil {
			return "", &errcode.Error{Code: errcode.InvalidArgument, Op: "core: enqueue", Err: fmt.Errorf("RunOptions.Budget: %w", err)}
		}
		o = optionsJSON(opts, "")
	}
	o.Input = input
	b, _ := json.Marshal(o)
	name := startPrefix + rand.Text()
	// No worker holds it: its lease ended as it was written.
	err := runs.PutRun(ctx, journaldriver.Run{Backend: r.b.Name(), Thread: name, State: journaldriver.RunRunning, LeaseUntil: time.Now(), Options: string(b)})
	if err != nil {
		return "", journalError(ctx, err)
	}
	return name, nil
}

// KeepTakingOver calls [Runner.TakeOver] every interval until ctx ends,
// handing the result of each run it took over (or the error of a round)
// to handle, which may be nil. It returns ctx's error.
func (r *Runner) KeepTakingOver(ctx context.Context, every time.Duration, handle func(*Result, error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		res, err := r.TakeOver(ctx)
		if handle != nil {
			for _, x := range res {
				handle(x, nil)
			}
			if err != nil && ctx.Err() == nil {
				handle(nil, err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// maxTakenOver bounds the runs one TakeOver takes over.
const maxTakenOver = 100

// Run sends input on a new thread (or on opts.Thread) and runs the loop
// until the model gives its final answer.
//
// Failed calls (unknown tool, invalid arguments, handler errors, panics,
// timeouts) do not end the run: the model is told and the run goes on.
// The run ends with an error when the backend fails, when the step limit is
// reached (ErrMaxSteps), when the context is canceled (the error wraps
// context.Canceled) or the run passes its time limit (Options.RunTimeout;
// the error wraps context.DeadlineExceeded), or when the journal fails.
// No handler starts once the run's context is done, nor, in a step whose
// call could not be recorded (the journal failed), once that happened:
// the calls not started are left to run on resume, and the error says
// what became of the step's calls, with the journal's code. Errors are *[errcode.Error]s whose Code says what kind of failure it was. On
// error, the returned Result is non-nil once a thread exists: it holds the
// Thread, from which [Runner.Resume] can pick the turn up again.
func (r *Runner) Run(ctx context.Context, input string, opts *RunOptions) (*Result, error) {
	return r.exec(ctx, r.runOptions(opts), start(input), nil)
}

// Resume picks up the turn waiting on thread, after a disconnect or in a new
// process: it asks the backend for the calls the service still lists as
// pending, sends the results the journal kept for them (running a handler
// only for calls that have none) and runs the loop to the final answer. If
// no turn waits, it returns the thread's last answer.
func (r *Runner) Resume(ctx context.Context, thread string, opts *RunOptions) (*Result, error) {
	return r.exec(ctx, r.runOptions(opts), resume(thread), nil)
}

// Cancel abandons the turn waiting on thread (the turn of a run that
// stopped when its context ended, or that paused for approval): the
// backend cancels the service's turn where it can, or answers its pending
// calls with a failed output saying the run stopped (see
// [driver.Canceler]), so that the thread takes new input. The results the
// journal kept for the turn's calls are not sent, and approvals still
// pending stay until they expire. A run of this runner on the thread is
// waited for first. A backend that cannot cancel gives an error whose
// code is Unimplemented.
//
// The tools of the turn's pending calls that started work elsewhere are
// told, once the turn is canceled (ToolOptions.Abandon): an agent tool's
// call whose child's turn waits (the child paused for a decision, was
// stopped on the run's budget, or was left by a canceled context) has
// that turn canceled too, by the child's Cancel (and so on down), so that
// no child is left waiting for a parent no one will resume. What such a
// tool cannot end is logged; the turn is canceled all the same.
func (r *Runner) Cancel(ctx context.Context, thread string) error {
	hold := r.threads.hold()
	defer hold.release()
	if err := hold.take(ctx, thread); err != nil {
		return err
	}
	c, ok := r.b.(driver.Canceler)
	if !ok {
		return errcode.Errorf(errcode.Unimplemented, "core: the %s backend cannot cancel a turn", r.b.Name())
	}
	pending := r.abandoned(ctx, thread)
	if err := c.Cancel(ctx, thread); err != nil {
		return backendWrap(r.b, "cancel turn", err)
	}
	r.clearTotals(ctx, thread)
	actx := context.WithValue(ctx, cancelingKey{}, r)
	for _, p := range pending {
		if err := p.abandon(actx, p.call); err != nil {
			r.opts.Logger.WarnContext(ctx, "toolrelay: a tool could not abandon a canceled call", "tool", p.call.Name, "call_id", p.call.ID, errorAttr(err))
		}
	}
	return nil
}

// An abandonedCall is a pending call of a turn Cancel abandons, and its
// tool's Abandon hook.
type abandonedCall struct {
	call    Call
	abandon func(context.Context, Call) error
}

// abandoned returns the pending calls of the turn waiting on thread whose
// tools have an Abandon hook, with the hook (see Cancel). It asks the
// backend only if a tool of r has one; a step it cannot read gives none.
func (r *Runner) abandoned(ctx context.Context, thread string) []abandonedCall {
	if !slices.ContainsFunc(r.tools.Tools(), func(t *Tool) bool { return t.opts.Abandon != nil }) {
		return nil
	}
	step, err := r.b.Resume(ctx, thread)
	if err != nil || step == nil {
		return nil
	}
	var out []abandonedCall
	for _, call := range step.Calls {
		if t := r.tools.Lookup(call.Name); t != nil && t.opts.Abandon != nil {
			out = append(out, abandonedCall{call: call, abandon: t.opts.Abandon})
		}
	}
	return out
}

// Stream starts a run as [Runner.Run] does, but streamed: the run takes
// place as the returned Stream's events are read.
func (r *Runner) Stream(ctx context.Context, input string, opts *RunOptions) *Stream {
	ro := r.runOptions(opts)
	return newStream(ro.Thread, streamed(ctx, r, ro, start(input)))
}

// ResumeStream resumes the turn waiting on thread as [Runner.Resume] does,
// but streamed.
func (r *Runner) ResumeStream(ctx context.Context, thread string, opts *RunOptions) *Stream {
	return newStream(thread, streamed(ctx, r, r.runOptions(opts), resume(thread)))
}

// streamed returns the run of a Stream of r from b: exec, its events
// going to the Stream's reader.
func streamed(ctx context.Context, r *Runner, ro RunOptions, b beginning) func(yield func(Event, error) bool) (*Result, error) {
	return func(yield func(Event, error) bool) (*Result, error) {
		return r.exec(ctx, ro, b, &sink{yield: yield})
	}
}

// maxExpired bounds the approvals one ResumeExpired reads.
const maxExpired = 100

// ResumeExpired resumes the runs of the runner's backend that wait on a
// call whose time to decide passed (Options.ApprovalTimeout), so that no
// run stays parked when nobody decides: each expired call is answered to
// the model as denied ("no decision in time") and the run goes on as
// [Runner.Resume]'s does, here. A program calls it from time to time (a
// ticker, a cron job); it reads at most 100 expired approvals per call,
// oldest first. It returns the results of the runs it resumed, in the
// order of their expired calls; a run that pauses again, on calls still
// awaiting a decision, is among them with its Pending list. The errors of
// the runs that failed are joined.
func (r *Runner) ResumeExpired(ctx context.Context, opts *RunOptions) ([]*Result, error) {
	ap, err := r.approvals()
	if err != nil {
		return nil, err
	}
	due, err := ap.ExpiredApprovals(ctx, r.b.Name(), time.Now(), maxExpired)
	if err != nil {
		return nil, journalError(ctx, err)
	}
	var threads []string
	for _, a := range due {
		if !slices.Contains(threads, a.Key.Thread) {
			threads = append(threads, a.Key.Thread)
		}
	}
	// One after the other, a run that pauses again on calls awaiting a
	// decision among the results; stopped when ctx ends.
	var g gathered
	for _, thread := range threads {
		if g.add(r.exec(ctx, r.runOptions(opts), resume(thread), nil)); ctx.Err() != nil {
			break
		}
	}
	return g.results()
}

// gathered are the outcomes of runs made one after the other (resumed,
// taken over): the results of those that ended or paused, the errors of
// those that failed.
type gathered struct {
	out  []*Result
	errs []error
}

// add adds a run's outcome.
func (g *gathered) add(res *Result, err error) {
	if err == nil || errors.Is(err, ErrAwaitingApproval) {
		g.out = append(g.out, res)
	} else {
		g.errs = append(g.errs, err)
	}
}

// results returns the results gathered, and the errors joined.
func (g *gathered) results() ([]*Result, error) { return g.out, errors.Join(g.errs...) }
