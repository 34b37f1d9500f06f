package core

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// A run is one run of a [Runner] (Run, Resume, their streams, a run taken
// over), from its beginning to its answer: what its steps share. exec
// makes it; begin gets its first step, loop runs its steps (step, one
// of them) and end ends it: the one place its finished event is sent.
type run struct {
	r  *Runner
	ro RunOptions // the run's, the runner's defaults filled in
	// thread is the thread the run was started or resumed on, if known,
	// for a step that does not name one.
	thread  string
	resumed bool        // the run picks up a turn (Resume, TakeOver)
	sk      *sink       // the stream the run's events go to, if any
	info    *RunInfo    // the run as its hook knows it (see hookRun), if any
	hold    *threadHold // the threads the run works on (see threadLocks)
	rec     *runRecord  // the run's record in the journal, once made
	cap     *Remaining  // what the run may spend of its parent's budget, if it is a child (see NewAgentTool)

	// Set as the loop starts:
	t0  time.Time // when the loop started
	res *Result   // the run's result, as the steps go
	sp  spend     // the run's budget (see spend)
	// counted holds the calls earlier runs of the turn counted.
	counted map[journaldriver.Key]bool
	// noted: totals of the turn are noted in the journal, to clear once
	// it is over; led is what they note of its calls.
	noted bool
	led   ledger
	// childCalls counts the calls of the turn's agent calls' children,
	// which its spend counts (see charge).
	childCalls int
	// st is the step whose calls run (see step): one at a time.
	st stepRun
}

// A beginning is how a run gets its first step: [start] or [resume].
type beginning struct {
	input  string
	thread string // the thread resumed; "" for a start
	// A start taken over from a worker that stopped before its thread
	// existed goes on under that worker's record of it (see recordStart).
	startRecord string
	takenOver   bool // taken over by TakeOver
	// onThread, if set, is told the thread a start creates, as soon as
	// the backend names it (an agent tool notes its child's: see
	// NewAgentTool).
	onThread func(thread string)
	// cap, if set, is what the run may spend of the budget of the run it
	// is the child of (see NewAgentTool), besides its own budget.
	cap *Remaining
	// child: the run is an agent call's child (see NewAgentTool), whose
	// start is not recorded before its thread exists (see recordStart).
	child bool
}

// start is the beginning of a run on input; resume, that of a run picking
// up the turn waiting on thread.
func start(input string) beginning   { return beginning{input: input} }
func resume(thread string) beginning { return beginning{thread: thread} }

// exec runs a run from its beginning: Run, Resume and their streamed forms
// are this, the latter with a sink for their events. It makes the [run],
// which holds the run's thread until it ends.
func (r *Runner) exec(ctx context.Context, ro RunOptions, b beginning, sk *sink) (*Result, error) {
	ctx, cancel := runContext(ctx, ro.Timeout)
	defer cancel()
	ctx = r.withBackendNotes(ctx)
	if sk != nil {
		ctx = sk.bind(ctx)
		defer sk.unbind()
	} else if driver.ObserverFrom(ctx) != nil {
		// A run inside a tool of a streamed run: its deltas are its own.
		ctx = driver.WithObserver(ctx, nil)
	}
	ru := &run{r: r, ro: ro, thread: ro.Thread, resumed: b.thread != "", sk: sk, hold: r.threads.hold(), cap: b.cap}
	if ru.resumed {
		ru.thread = b.thread
	}
	defer ru.hold.release()
	return ru.exec(ctx, b)
}

// exec checks the run's options, takes its thread and runs it, inside
// its Run hook.
func (ru *run) exec(ctx context.Context, b beginning) (*Result, error) {
	if ru.thread != "" {
		ru.res = &Result{Thread: ru.thread}
	}
	if err := checkBudgets(&ru.ro.Budget, &ru.r.opts.Budget); err != nil {
		return ru.end(ctx, err)
	}
	if !ru.resumed {
		// A run that starts a turn: its record keeps its budget whole. A
		// resume's is laid over the turn's in loop.
		ru.ro.Budget = ru.ro.Budget.Over(ru.r.opts.Budget)
	}
	ru.hold.noWait = ru.ro.NoWait
	if err := ru.hold.take(ctx, ru.thread); err != nil {
		return ru.end(ctx, err)
	}
	ctx, end := ru.hookRun(ctx, b.takenOver)
	res, err := ru.begin(ctx, b)
	if end != nil {
		end(res, err)
	}
	return res, err
}

// begin gets a run's first step, from its beginning, and runs the loop.
func (ru *run) begin(ctx context.Context, b beginning) (*Result, error) {
	var (
		step *driver.Step
		err  error
		op   = "start"
		// moveErr is why the record of a start could not move to its
		// thread: the run must not go on.
		moveErr error
		// created is the thread the backend said it made (see
		// driver.StartRequest.Created), if it did.
		created string
	)
	if ru.resumed {
		op = "resume"
		// Recorded before the thread is read, once no other worker runs
		// it: the read is not stale, and while the run is recorded
		// running, Prune keeps every result of the thread.
		if ru.rec, err = ru.acquireRun(ctx, ru.thread); err != nil {
			return ru.end(ctx, err)
		}
		ru.ro.held()
		sctx, end := ru.hookStep(ctx, StepInfo{Thread: ru.thread, Op: op})
		step, err = ru.r.b.Resume(sctx, ru.thread)
		if end != nil {
			end(step, err)
		}
	} else if err = checkParts(ru.ro.Parts); err != nil {
		ru.res = nil
		return ru.end(ctx, err)
	} else {
		if ru.ro.Thread != "" && ru.ro.NoWait {
			// Continued only if no live worker runs the thread.
			if ru.rec, err = ru.claimRun(ctx, ru.ro.Thread); err != nil {
				return ru.end(ctx, err)
			}
		} else if ru.ro.Thread != "" {
			ru.rec = ru.recordRun(ctx, ru.ro.Thread)
		} else {
			ru.rec = ru.recordStart(ctx, b)
		}
		ru.ro.held()
		ru.saveOrigin(ctx, ru.thread)
		sctx, end := ru.hookStep(ctx, StepInfo{Thread: ru.thread, Op: op})
		req := &driver.StartRequest{Thread: ru.ro.Thread, Input: b.input, Parts: ru.ro.Parts, Format: ru.ro.Format.driverFormat()}
		if ru.ro.Thread != "" {
			req.Created = func(t string) {
				// A chain's new response: the run goes on there.
				if t != "" && t != ru.thread {
					created = t
					ru.move(ctx, t, false) // new: nobody else holds it
				}
			}
		} else {
			req.Created = func(t string) {
				created = t
				if b.onThread != nil && t != "" {
					b.onThread(t)
					b.onThread = nil
				}
				if ru.rec == nil {
					ru.rec = ru.recordRun(ctx, t)
				}
				// New: nobody else holds it.
				if err, _ := ru.move(ctx, t, false); err != nil {
					moveErr = err
				}
			}
		}
		step, err = ru.r.b.Start(sctx, req)
		if end != nil {
			end(step, err)
		}
		if step != nil && step.Thread != "" && b.onThread != nil {
			b.onThread(step.Thread) // a backend that did not say when it created the thread
			b.onThread = nil
		}
		if err == nil && step != nil && ru.thread == "" {
			if ru.info != nil {
				ru.info.Conversation = step.Thread // a new thread: the run's conversation
			}
			ru.saveOrigin(ctx, step.Thread)
		}
	}
	if err != nil {
		err = ru.backendError(ctx, op, err)
		switch {
		case step != nil && step.Thread != "":
			ru.thread = step.Thread
		case created != "":
			ru.thread = created
		}
		if ctx.Err() != nil {
			ru.keepThread(ru.thread) // the turn may have started: it is resumed
		}
		ru.res = nil
		if ru.thread != "" {
			ru.res = &Result{Thread: ru.thread}
		}
		ru.rec.end(ctx, err)
		return ru.end(ctx, err)
	}
	if ru.rec == nil && step != nil {
		ru.rec = ru.recordRun(ctx, step.Thread)
	}
	if step != nil && moveErr == nil {
		moveErr = ru.rec.move(ctx, step.Thread) // a backend that did not say when it created the thread
	}
	if moveErr != nil {
		// Another worker took the start over (this one was stuck past its
		// lease) and starts the run again, or the journal failed: this
		// thread must not go on. The start's record ends failed, unless it
		// is another worker's now: left running, it would be taken over,
		// and the run its caller is told failed started again.
		if step != nil {
			ru.thread = step.Thread
		}
		ru.cancelTurn(ctx, ru.thread)
		err := journalError(ctx, moveErr)
		ru.rec.end(ctx, err)
		ru.res = &Result{Thread: ru.thread}
		return ru.end(ctx, err)
	}
	if step != nil {
		if err := ru.hold.take(ctx, step.Thread); err != nil {
			ru.thread = step.Thread
			ru.res = &Result{Thread: step.Thread}
			return ru.end(ctx, err)
		}
	}
	return ru.loop(ctx, step)
}

// move moves the run to thread t, one it did not start on (a new thread, a
// chain's next response): its resumes find the run's origin there, if
// origin, its record follows (moved: the journal's error, see
// runRecord.move), and the run holds it (held: the error of a wait for
// another run that holds it).
func (ru *run) move(ctx context.Context, t string, origin bool) (moved, held error) {
	if origin {
		ru.saveOrigin(ctx, t)
	}
	moved = ru.rec.move(ctx, t)
	return moved, ru.hold.take(ctx, t)
}

// held tells the run's caller that the run holds its thread, once.
func (ro *RunOptions) held() {
	if ro.Held != nil {
		ro.Held()
		ro.Held = nil
	}
}

// runContext returns ctx bounded by a run's time limit d, its cause saying so.
func runContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("the run passed its time limit (%v): %w", d, context.DeadlineExceeded))
}

// loop runs the steps of a turn, from step, until the model answers; a
// resumed run counts from the turn's start (see totals).
func (ru *run) loop(ctx context.Context, step *driver.Step) (*Result, error) {
	ru.t0 = time.Now()
	ru.res = &Result{Thread: ru.thread}
	var noted *Budget
	if ru.resumed {
		ru.counted, noted = ru.loadTotals(ctx, ru.thread)
	}
	ru.sp.set(ru.ro.Budget, noted, &ru.r.opts.Budget)
	if ru.cap != nil {
		ru.sp.cap, ru.sp.base = ru.cap, ru.sp.spent
	}
	ru.noted = ru.counted != nil
	for {
		next, done, err := ru.step(ctx, step)
		if done || err != nil {
			return ru.end(ctx, err)
		}
		step = next
	}
}

// step runs one step of the run: it counts it, runs its calls, unless the
// run must stop first, and submits their results. It returns the next
// step, or done (the model answered) or the error that ends the run.
func (ru *run) step(ctx context.Context, step *driver.Step) (next *driver.Step, done bool, err error) {
	r, res := ru.r, ru.res
	if step == nil {
		// A step cannot be answered: the turn must not stay parked.
		ru.cancelTurn(ctx, res.Thread)
		return nil, false, &errcode.Error{Code: errcode.Internal, Op: r.b.Name() + ": step", Err: errors.New("the backend returned no step")}
	}
	if step.Thread != res.Thread && res.Thread != "" {
		// A chained thread moves on: its resumes must find the origin,
		// its record follows, and the run holds it.
		if _, err := ru.move(ctx, step.Thread, true); err != nil {
			return nil, false, err
		}
	}
	res.Thread, res.Turn = step.Thread, step.Turn
	if len(step.Calls) > 0 && ru.allCounted(step.Calls, ru.counted) {
		// A step an earlier run of the turn counted, given again (its
		// results were sent, but the service's state read was stale):
		// it is counted once.
		res.Steps--
	} else {
		ru.sp.add(step, ru.sp.held != nil && ru.allCounted(step.Calls, ru.sp.held))
	}
	if ru.sk != nil {
		ru.sk.stepArrived(step, res.Steps)
	}
	if len(step.Calls) == 0 {
		res.Text = step.Text
		ru.forget()
		return nil, true, nil
	}
	if res.Steps >= ru.ro.MaxSteps {
		ru.cancelTurn(ctx, step.Thread)
		return nil, false, &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: fmt.Errorf("%w (%d)", ErrMaxSteps, ru.ro.MaxSteps)}
	}
	if err := driver.CheckCalls(step.Calls); err != nil {
		ru.cancelTurn(ctx, step.Thread)
		return nil, false, &errcode.Error{Code: errcode.Internal, Op: r.b.Name() + ": step", Err: err}
	}
	if err := ru.overBudget(ctx, step); err != nil {
		return nil, false, err
	}
	if ru.sp.unnoted() {
		// The turn's budget is the run's from now on: a resume given
		// none, in this process or another, keeps it. The step's usage
		// is counted: held, it is not counted again when given again.
		ru.noteTotals(ctx, step.Thread, step.Calls)
	}
	// The first step of a resumed run may be one whose calls ran and
	// asked (see Ask).
	if pending, err := ru.pause(ctx, step, ru.resumed && res.Steps == 0); err != nil || len(pending) > 0 {
		if err == nil {
			res.Pending = pending
			err = awaitingError(step.Thread, len(pending), "resume")
		}
		return nil, false, err
	}
	res.Steps++
	ru.send(ctx, &Event{Kind: EventStepStarted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(step.Calls), Remaining: ru.sp.remaining(0)})

	sr := &ru.st // the run's, not a new one each step
	*sr = stepRun{r: r, step: step, n: res.Steps, sk: ru.sk, fence: ru.rec.fence(), remaining: ru.sp.childCap(len(step.Calls))}
	results, err := sr.runCalls(ctx)
	ru.charge(ctx, step)
	for err == errPaused {
		// The calls that needed no decision ran, their results
		// journaled; the step's results go when every call is decided.
		if res.Pending, err = ru.pause(ctx, step, true); err != nil {
			return nil, false, err
		}
		if len(res.Pending) > 0 {
			ru.keepThread(step.Thread) // another process may decide and resume
			return nil, false, awaitingError(step.Thread, len(res.Pending), "pause")
		}
		// Every call awaiting a decision was decided, or expired,
		// meanwhile: the step's calls run again (the journal holds the
		// results of those that ran), the step counted once.
		sr.fence = ru.rec.fence() // the record may have stayed paused
		results, err = sr.runCalls(ctx)
		ru.charge(ctx, step)
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			ru.keepThread(step.Thread)
		case errors.Is(err, ErrBudgetExceeded):
			// An agent tool's child stopped on the run's budget (see
			// NewAgentTool): as a run stopped before its step's calls,
			// its turn is left waiting for a resume (its totals noted
			// by charge).
			ru.keepThread(step.Thread)
		}
		return nil, false, err
	}
	if err := checkResults(step.Calls, results); err != nil {
		ru.cancelTurn(ctx, step.Thread)
		return nil, false, &errcode.Error{Code: errcode.Internal, Op: "core: submit", Err: err}
	}
	return ru.submit(ctx, step, results)
}

// submit sends the results of step's calls, and returns the next step.
func (ru *run) submit(ctx context.Context, step *driver.Step, results []driver.ToolResult) (*driver.Step, bool, error) {
	r, res, sk := ru.r, ru.res, ru.sk
	submitted := &Event{Kind: EventResultsSubmitted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(results)}
	if sk != nil {
		// The next step's text may stream before Submit returns: the
		// reader learns first that the results went.
		sk.pending = submitted
	}
	sctx, end := ru.hookStep(ctx, StepInfo{Thread: step.Thread, Turn: step.Turn, Op: "submit", Step: res.Steps, Results: len(results), Remaining: ru.sp.remaining(len(results))})
	moved := func(t string) {
		// A chain's next response, named before it is complete: the
		// run's thread, its record and its hold move there at once.
		if t == "" || t == res.Thread {
			return
		}
		ru.move(ctx, t, true) // new: nobody else holds it
		res.Thread, res.Turn = t, ""
	}
	next, err := r.b.Submit(sctx, &driver.SubmitRequest{Step: step, Results: results, Format: ru.ro.Format.driverFormat(), Moved: moved})
	if end != nil {
		end(next, err)
	}
	if sk != nil && err != nil {
		sk.pending = nil // the results may not have gone
	}
	if err != nil {
		if ctx.Err() != nil {
			ru.keepThread(step.Thread)
		}
		return nil, false, ru.backendError(ctx, "submit", err)
	}
	for _, tr := range results {
		if !ru.counted[r.key(&tr.Call)] {
			res.Calls = append(res.Calls, tr)
			ru.sp.spent.ToolCalls++
			ru.led.sent(refOf(&tr.Call))
		}
	}
	err = r.opts.Hooks.journalWrite(ctx, "submitted", func() error { return r.opts.Journal.MarkSubmitted(ctx, r.keys(results)) })
	if err != nil {
		return nil, false, &errcode.Error{Code: errcode.Of(err), Op: "core: journal", Err: err}
	}
	on := res.Thread // the thread the turn's next step comes on
	if next != nil && next.Thread != "" {
		on = next.Thread
	}
	ru.noteTotals(ctx, on, nil)
	submitted.Remaining = ru.sp.remaining(0)
	r.emit(ctx, submitted)
	if sk != nil {
		sk.flushPending()
	}
	return next, false, nil
}

// checkBudgets checks a run's budget (b, its options') and its runner's
// default (def, Options.Budget): see [Budget.Check].
func checkBudgets(b, def *Budget) error {
	if err := b.check(); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: run", Err: fmt.Errorf("RunOptions.Budget: %w", err)}
	}
	if err := def.check(); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: run", Err: fmt.Errorf("the runner's Options.Budget: %w", err)}
	}
	return nil
}

// end ends the run with err (nil: the model answered), and is the one
// place its last event, EventRunFinished, is sent from. A run that got to
// its loop has its turn's totals cleared once the turn is over, and its
// record ended; one that ended before has its result (ru.res, nil
// without a thread) and its record as it failed left them.
func (ru *run) end(ctx context.Context, err error) (*Result, error) {
	res := ru.res
	e := Event{Kind: EventRunFinished, Thread: ru.thread, Err: err}
	if !ru.t0.IsZero() {
		if err == nil && ru.noted {
			ru.r.clearTotals(ctx, res.Thread)
		}
		ru.rec.end(ctx, err)
		res.Usage, res.Cost, res.ToolCalls = ru.sp.spent.Usage, ru.sp.spent.Cost, ru.sp.spent.ToolCalls
		res.Remaining = ru.sp.remaining(0)
		e = Event{Kind: EventRunFinished, Thread: res.Thread, Turn: res.Turn, Step: res.Steps, Duration: time.Since(ru.t0), Err: err, Usage: res.Usage, Remaining: res.Remaining}
	}
	ru.send(ctx, &e)
	return res, err
}

// send emits e, and hands it to the run's stream, if any.
func (ru *run) send(ctx context.Context, e *Event) { ru.r.send(ctx, ru.sk, e) }

// checkParts checks the parts of a run's input.
func checkParts(parts []Part) error {
	if err := driver.CheckParts(parts); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: run", Err: err}
	}
	return nil
}

// forget deletes the entries of the run's calls from the runner's own
// journal, once the run has its answer: the turn is over, so no resume
// will ask for them again.
func (ru *run) forget() {
	r, calls := ru.r, ru.res.Calls
	if r.own == nil || len(calls) == 0 {
		return
	}
	r.own.Forget(r.keys(calls))
}

// keepThread asks the backend, if it can, to keep thread on Close: its
// turn waits to be resumed (in this process or another).
func (ru *run) keepThread(thread string) {
	r := ru.r
	if k, ok := r.b.(driver.Keeper); ok && thread != "" {
		k.KeepThread(thread)
	}
}

// cancelTurn asks the backend, if it can, to cancel the turn waiting on
// thread. It uses a short context of its own, so it works after ctx ended.
func (ru *run) cancelTurn(ctx context.Context, thread string) {
	r := ru.r
	c, ok := r.b.(driver.Canceler)
	if !ok || thread == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Cancel(cctx, thread); err != nil {
		r.opts.Logger.WarnContext(ctx, "toolrelay: cancel turn failed", "thread", thread, errorAttr(err))
		return
	}
	r.clearTotals(ctx, thread)
}

// backendWrap returns the error err of the op of backend b, with the
// code b gives it.
func backendWrap(b driver.Backend, op string, err error) error {
	return wrap(b.Name()+": "+op, err, b.ErrorCode)
}

// backendError returns the error of the backend's op. Once the run's
// context has ended, that is why the run ends, whatever the backend made
// of it: the error then has the code of the context's cause, and wraps
// both.
func (ru *run) backendError(ctx context.Context, op string, err error) error {
	r := ru.r
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) {
		return backendWrap(r.b, op, err)
	}
	return &errcode.Error{Code: errcode.Of(cause), Op: r.b.Name() + ": " + op, Err: fmt.Errorf("%w: %w", cause, err)}
}

// hookRun calls the Run hook, if any, reading the thread's origin note on a
// resume, and its conversation note on a resume or a continuation. It
// sets the run's info (whose Origin the hook may have set) and returns
// the run's context and the end function, nil when there is no hook.
func (ru *run) hookRun(ctx context.Context, takenOver bool) (context.Context, func(*Result, error)) {
	r, thread, resume := ru.r, ru.thread, ru.resumed
	h := r.opts.Hooks
	if h == nil || h.Run == nil {
		return ctx, nil
	}
	info := &RunInfo{Backend: r.b.Name(), Thread: thread, Resume: resume, TakenOver: takenOver, Conversation: thread}
	if n, ok := r.opts.Journal.(journaldriver.Notes); ok && thread != "" {
		if resume {
			if v, found, err := n.Note(ctx, info.Backend, thread, originNote); err == nil && found {
				info.Origin = v
			}
		}
		if v, found, err := n.Note(ctx, info.Backend, thread, conversationNote); err == nil && found && v != "" {
			info.Conversation = v
		}
	}
	ctx, end := h.Run(ctx, info)
	ru.info = info
	return ctx, end
}

// saveOrigin records the Origin of a run for thread: the one a Run hook
// set for the run that started a turn, or, for a chained thread that moves
// on, the one the run carries; and, on a thread that is not the run's
// conversation (a chain's next response), the Conversation. A failure
// costs only the link or the name, so it is logged.
func (ru *run) saveOrigin(ctx context.Context, thread string) {
	r, info := ru.r, ru.info
	if info == nil || thread == "" {
		return
	}
	n, ok := r.opts.Journal.(journaldriver.Notes)
	if !ok {
		return
	}
	if info.Origin != "" {
		if err := n.SetNote(ctx, info.Backend, thread, originNote, info.Origin); err != nil {
			r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run's origin", "thread", thread, errorAttr(err))
		}
	}
	if info.Conversation != "" && info.Conversation != thread {
		if err := n.SetNote(ctx, info.Backend, thread, conversationNote, info.Conversation); err != nil {
			r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run's conversation", "thread", thread, errorAttr(err))
		}
	}
}

// hookStep calls the Step hook, if any; end is nil when there is none.
func (ru *run) hookStep(ctx context.Context, info StepInfo) (context.Context, func(*driver.Step, error)) {
	r := ru.r
	h := r.opts.Hooks
	if h == nil || h.Step == nil {
		return ctx, nil
	}
	p := new(StepInfo) // info itself stays on the stack when no hook runs
	*p = info
	p.Backend = r.b.Name()
	return h.Step(ctx, p)
}

// recordRun records that this runner runs the run on thread, under a lease
// it renews, in a journal that keeps runs and that the runner did not make
// itself (a journal of its own is never shared). It returns nil when there
// is nothing to record.
func (ru *run) recordRun(ctx context.Context, thread string) *runRecord {
	rec := ru.newRecord(ctx)
	rec.move(ctx, thread)
	return rec
}

// newRecord returns the record of the run, with context ctx, not written
// yet; nil when the journal keeps no runs, or is the runner's own.
func (ru *run) newRecord(ctx context.Context) *runRecord {
	r, ro := ru.r, ru.ro
	runs, ok := r.opts.Journal.(journaldriver.Runs)
	if !ok || r.own != nil {
		return nil
	}
	b, _ := json.Marshal(optionsJSON(&ro, ""))
	return &runRecord{r: r, runs: runs, options: string(b), ctx: ctx, handOver: ro.HandOver}
}

// recordStart records a run that starts a new thread before the request
// that creates it, under the thread startPrefix + an id of its own (or
// b.startRecord, the record of a start taken over), with its input: a
// worker that stops before the thread exists, or before the thread's own
// record is written, leaves this record, and the worker that takes it
// over starts the run again (on a new thread; the thread the stopped worker
// may have created is left as it is, none of its calls having run). Once
// the thread exists, the run moves to its record. A run with parts or a
// format is not recorded before its thread exists (the record keeps text
// only).
//
// An agent call's child is not recorded before its thread exists: the
// parent's call is its record (the parent's run taken over runs the call
// again, which starts the child), and a record of its own would be taken
// over by the child runner's TakeOver, as a run of its own: a second
// child turn.
func (ru *run) recordStart(ctx context.Context, b beginning) *runRecord {
	ro := ru.ro
	if b.child {
		return nil
	}
	rec := ru.newRecord(ctx)
	if rec == nil || len(ro.Parts) > 0 || ro.Format != nil {
		return nil
	}
	thread := b.startRecord
	if thread == "" {
		thread = startPrefix + rand.Text()
	}
	opts, _ := json.Marshal(optionsJSON(&ro, b.input))
	if rec.put(ctx, thread, string(opts)) != nil {
		return nil
	}
	rec.thread = thread
	return rec
}

// acquireRun records that this runner runs the run on thread, as
// recordRun does, but waits while another worker runs the thread (its
// record running under a lease): the runs of a thread, in any process,
// are taken one at a time, so that none goes on from a state of the
// thread that another changed meanwhile. It returns an error, with the
// context's code, if ctx ends first; a record that cannot be written
// for another reason is logged, and the run goes on without.
func (ru *run) acquireRun(ctx context.Context, thread string) (*runRecord, error) {
	rec := ru.newRecord(ctx)
	if rec == nil {
		return nil, nil
	}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := rec.put(ctx, thread, rec.options)
		switch {
		case err == nil:
			rec.thread = thread
			return rec, nil
		case !errors.Is(err, journaldriver.ErrLeaseLost):
			return nil, nil
		}
		if ru.ro.NoWait {
			return nil, busyError(thread)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			err := context.Cause(ctx)
			return nil, &errcode.Error{Code: errcode.Of(err), Op: "core: run", Err: fmt.Errorf("another worker runs thread %s: %w", thread, err)}
		}
	}
}

// claimRun records a run continuing thread as running, unless a live
// worker records it running: then it fails with an error matching
// ErrThreadBusy. A journal that keeps no runs records nothing.
func (ru *run) claimRun(ctx context.Context, thread string) (*runRecord, error) {
	rec := ru.newRecord(ctx)
	if rec == nil {
		return nil, nil
	}
	switch err := rec.put(ctx, thread, rec.options); {
	case err == nil:
		rec.thread = thread
		return rec, nil
	case errors.Is(err, journaldriver.ErrLeaseLost):
		return nil, busyError(thread)
	default:
		return nil, nil // unrecorded, as recordRun leaves it
	}
}

// noteTotals records the turn's totals on thread, the one its next step
// comes on, with the run's budget, after a step's results were sent, or
// with the calls of a step held (counted, not run: see spend.held). A
// failure costs only the counts of a later run, so it is logged.
func (ru *run) noteTotals(ctx context.Context, thread string, held []Call) {
	res, l := ru.res, &ru.led
	n, ok := ru.r.notes()
	if !ok || thread == "" {
		return
	}
	if len(l.calls) >= totalsPage {
		ref := pageRef{Thread: thread, Name: totalsNote + "." + strconv.Itoa(l.pages)}
		b, _ := json.Marshal(page{Calls: l.calls, Prev: l.last})
		if n.set(ctx, ref.Thread, ref.Name, string(b)) == nil {
			l.last, l.paged, l.pages, l.calls = &ref, l.paged+len(l.calls), l.pages+1, nil
		}
	}
	t := totals{Steps: res.Steps, Usage: ru.sp.spent.Usage, Calls: l.calls, Paged: l.paged, Page: l.last, Cost: ru.sp.spent.Cost, Budget: ru.sp.toNote(), ChildCalls: ru.childCalls}
	for i := range held {
		t.Held = append(t.Held, refOf(&held[i]))
	}
	b, _ := json.Marshal(t)
	n.set(ctx, thread, totalsNote, string(b))
	ru.sp.noted = t.Budget
	ru.noted = true
}

// loadTotals sets the run's totals to those noted on thread by the earlier
// runs of its turn, if any: their steps and usage, and the results they
// sent, read back from the journal (without their arguments; a result
// the journal no longer holds is left out), their calls' count and
// cost, and the turn's budget; the calls of a step they held go to the
// run's spend. It returns the keys of the calls counted, nil when nothing
// was noted, and the budget noted, nil if none.
func (ru *run) loadTotals(ctx context.Context, thread string) (map[journaldriver.Key]bool, *Budget) {
	r, res := ru.r, ru.res
	n, ok := r.notes()
	if !ok {
		return nil, nil
	}
	t, ok := n.read(ctx, thread)
	if !ok {
		return nil, nil
	}
	if t.Budget != nil && t.Budget.Check() != nil {
		t.Budget = nil // not one a runner wrote: the runner's own instead
	}
	res.Steps, ru.sp.spent.Usage, ru.sp.spent.Cost = t.Steps, t.Usage, t.Cost
	ru.childCalls, ru.sp.spent.ToolCalls = t.ChildCalls, t.ChildCalls
	if len(t.Held) > 0 {
		ru.sp.held = make(map[journaldriver.Key]bool, len(t.Held))
		for _, c := range t.Held {
			call := c.call()
			ru.sp.held[r.key(&call)] = true
		}
	}
	var paged [][]callRef // the pages' calls, last page first
	n.pages(ctx, t.Page, func(_ pageRef, p *page) { paged = append(paged, expand(p.Calls)) })
	expand(t.Calls)
	ru.led = ledger{last: t.Page, pages: len(paged)}
	for _, p := range paged {
		ru.led.paged += len(p)
	}
	if len(paged) > 0 && ru.led.paged != t.Paged {
		// A page is missing: the calls the turn sent before the ones
		// read are not counted (the counts start later).
		paged, ru.led = nil, ledger{}
	}
	ru.led.sent(t.Calls...)
	counted := make(map[journaldriver.Key]bool, t.Paged+len(t.Calls))
	add := func(refs []callRef) {
		for i := range refs {
			call := refs[i].call()
			key := r.key(&call)
			counted[key] = true
			ru.sp.spent.ToolCalls++
			e, ok, err := r.opts.Journal.Get(ctx, key)
			if err != nil || !ok || e.Result == nil {
				continue
			}
			tr := toResult(&call, e.Result, e.IdempotencyKey)
			tr.Resend = e.State == journaldriver.Submitted
			res.Calls = append(res.Calls, tr)
		}
	}
	for i := len(paged) - 1; i >= 0; i-- {
		add(paged[i])
	}
	add(t.Calls)
	return counted, t.Budget
}

// allCounted reports whether counted holds every call of calls.
func (ru *run) allCounted(calls []Call, counted map[journaldriver.Key]bool) bool {
	r := ru.r
	for i := range calls {
		if !counted[r.key(&calls[i])] {
			return false
		}
	}
	return len(counted) > 0
}

// overBudget returns the error of a run whose budget does not let it run
// step's calls, nil if it does. Before it returns one, it notes the
// turn's totals with the step's usage and the step's calls held (not
// run, none of them sent), and leaves the service's turn waiting: a
// resume with a raised budget goes on from the step, counting its usage
// once.
func (ru *run) overBudget(ctx context.Context, step *driver.Step) error {
	err := ru.sp.exceeded(len(step.Calls))
	if err == nil {
		return nil
	}
	ru.noteTotals(ctx, step.Thread, step.Calls)
	ru.keepThread(step.Thread)
	return err
}

// awaiting returns the approvals of step's calls still awaiting a decision.
// asked says the step's calls may have run, and their handlers asked for
// decisions (see Ask): their questions are looked for then, and for
// agent tools' calls.
func (ru *run) awaiting(ctx context.Context, step *driver.Step, asked bool) ([]Approval, error) {
	r := ru.r
	ap, ok := r.opts.Journal.(journaldriver.Approvals)
	if !ok {
		return nil, nil
	}
	var (
		out    []Approval
		list   []Approval // the thread's approvals, for questions
		listed bool
	)
	now := time.Now()
	for i := range step.Calls {
		c := &step.Calls[i]
		tool := r.tools.Lookup(c.Name)
		if asked || (tool != nil && tool.agent != nil) {
			// The questions its handler asked, the approvals an agent
			// tool's child awaits (see Ask, NewAgentTool).
			if !listed {
				var err error
				if list, err = ap.ListApprovals(ctx, r.b.Name(), c.Thread); err != nil {
					return nil, journalError(ctx, err)
				}
				listed = true
			}
			for _, a := range askedBy(list, c) {
				if a.Pending(now) {
					out = append(out, a)
				}
			}
		}
		if approvalRule(c, tool) == nil {
			continue
		}
		a, ok, err := ap.GetApproval(ctx, r.key(c))
		if err != nil {
			return nil, journalError(ctx, err)
		}
		if ok && a.Pending(now) {
			out = append(out, a)
		}
	}
	return out, nil
}

// pause returns the approvals of step's calls still awaiting a decision.
// When some do, it records that the run pauses (in its record, if any) and then
// looks again: a decision recorded while the run was still running did
// not wake it (see Decide), so if every call is decided by then, the run
// is recorded running here again and pause returns none; or, if the
// decision woke the run (leaving it to a Resume or a takeover, which may
// have taken it already), an error: the run must not go on here too.
// asked is as for awaiting.
func (ru *run) pause(ctx context.Context, step *driver.Step, asked bool) ([]Approval, error) {
	rec := ru.rec
	pending, err := ru.awaiting(ctx, step, asked)
	if err != nil || len(pending) == 0 || rec == nil {
		return pending, err
	}
	rec.pause(ctx)
	if pending, err = ru.awaiting(ctx, step, asked); err == nil && len(pending) == 0 {
		err = rec.goOn(ctx)
	}
	return pending, err
}

// charge adds what the children of the step's agent calls spent (see
// NewAgentTool) to the run's spend, and notes the turn's totals with the
// step held (its usage counted, its results not sent): a resume counts
// them, and the step, once.
func (ru *run) charge(ctx context.Context, step *driver.Step) {
	sp := ru.st.charges.take()
	if sp == (driver.Spent{}) {
		return
	}
	s := &ru.sp.spent
	s.Usage.Add(sp.Usage)
	s.Cost += sp.Cost
	s.ToolCalls += sp.ToolCalls
	ru.childCalls += sp.ToolCalls
	ru.noteTotals(ctx, step.Thread, step.Calls)
}
