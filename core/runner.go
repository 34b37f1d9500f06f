package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/runnerhook"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Defaults of [Options].
const (
	DefaultConcurrency      = 16
	DefaultMaxSteps         = 10
	DefaultLease            = time.Minute
	DefaultToolTimeout      = 5 * time.Minute
	DefaultRunTimeout       = 30 * time.Minute
	DefaultMaxArgumentBytes = 1 << 20 // 1 MiB
	DefaultMaxOutputBytes   = 4 << 20 // 4 MiB
)

// Options configure a [Runner]. The zero value (or nil) is usable.
type Options struct {
	// Concurrency bounds how many calls of one step run at once; 1 runs them
	// one after the other. Zero means DefaultConcurrency.
	Concurrency int
	// MaxSteps bounds the steps (rounds of calls) of one run; a run that
	// reaches it fails with an error matching ErrMaxSteps. A resumed run
	// counts its turn's steps from the start (see [Result]). Zero means
	// DefaultMaxSteps.
	MaxSteps int
	// ToolTimeout bounds each handler that has no timeout of its own
	// (see [ToolOptions]): past it, the call gets a failed result saying
	// it timed out (outcome TimedOut), and a handler that ignores its
	// context is left behind. Zero (or less) means DefaultToolTimeout;
	// there is no unbounded setting (set a long one).
	ToolTimeout time.Duration
	// RunTimeout bounds each run ([Runner.Run], [Runner.Resume]), from its
	// start to its answer, unless the caller's context ends sooner. A run
	// past it ends with an error whose code is DeadlineExceeded (it
	// matches context.DeadlineExceeded), as when the caller's context
	// ends: no handler starts after it; the handlers still running are
	// interrupted, and those that give up (return) have their calls left
	// to run again, while a handler that does not return within a moment
	// is left behind, its call left started (a resume decides it as in
	// doubt once its lease passed: it may still take effect). The
	// service's turn is left waiting, and the Result holds the thread:
	// [Runner.Resume] picks the turn up, sending the results the journal
	// kept ([Runner.Cancel] abandons it instead). The limit holds also
	// when the run cannot act on it at once (a [Stream] whose reader
	// stopped reading holds the run where it is): from the limit on, the
	// runner renews neither the run's lease nor its calls', so that
	// another worker sharing the journal can take the run over
	// ([Runner.TakeOver]) at most a lease after it, and the reader, when
	// it reads again, gets the time limit's error. Zero (or less) means
	// DefaultRunTimeout; RunOptions.Timeout overrides it for one run.
	RunTimeout time.Duration
	// MaxArgumentBytes bounds the arguments of one call, as the service
	// sent them. A call whose arguments are longer gets a failed result
	// "arguments too large (N bytes; the limit is M)" (outcome TooLarge)
	// without its arguments being parsed or its handler run; it is
	// journaled like any failed call, its digest that of the bytes as
	// received. Zero (or less) means DefaultMaxArgumentBytes.
	MaxArgumentBytes int
	// MaxOutputBytes bounds the output of one call: a string's bytes, a
	// content array's contents, or the JSON encoding of any other value.
	// An output past it gives a failed result "output too large (N bytes;
	// the limit is M)" (outcome TooLarge), unless TruncateOutput (or the
	// tool's) is set. A value serialised as JSON is measured before it is
	// encoded, so that one past the limit is refused without being copied:
	// besides the handler's own value, the runner allocates less than
	// 4 × MaxOutputBytes for an output. The exception is what only
	// encoding can measure, the output of a type's own MarshalJSON or
	// MarshalText method (and JSON string escapes): a value made mostly of
	// such parts is encoded whole before it is refused. Zero (or less)
	// means DefaultMaxOutputBytes.
	MaxOutputBytes int
	// TruncateOutput cuts a text output (a string result) past
	// MaxOutputBytes to its first bytes, never inside a UTF-8 sequence,
	// followed by a note saying it was truncated and how long it was, in
	// MaxOutputBytes in all; the result is not marked failed. Content
	// arrays and values serialised as JSON are never cut (a cut JSON
	// document is not JSON): past the limit they fail as above.
	TruncateOutput bool
	// Journal keeps every result (see [journaldriver.Journal]). Nil means a new
	// [journaldriver.Memory] of the runner's own, which forgets the calls of a run
	// once the run has its answer (so that it does not grow with every
	// run); a journal set here keeps its entries until they are pruned.
	Journal journaldriver.Journal
	// Owner names this runner in the journal, so that workers sharing a
	// journal can tell their claims apart. Empty means a random name.
	Owner string
	// Lease is how long a claim on a call lasts before another owner may
	// take the call over; it is renewed while the handler runs. Zero means
	// DefaultLease.
	Lease time.Duration
	// Logger receives the run's events: routine ones at Debug, failed calls
	// and pauses at Info, panics (with their stack) at Error. Nil means
	// slog.Default(). The internal error of a failed call (what its
	// handler or a middleware returned, a panic's value, a Verify hook's
	// error), which may hold anything the program's code put in it, is
	// logged only when the logger is enabled at Debug, or LogCallErrors
	// is set. Every error logged is cut to 2 KiB and passes the redaction
	// of secrets (URL passwords, password=… and other secret settings,
	// bearer tokens).
	Logger *slog.Logger
	// LogCallErrors logs the internal error of a failed call with its
	// event at every level (see Logger).
	LogCallErrors bool
	// OnEvent, if set, is called with every event, one at a time (never
	// concurrently), in the goroutine that produced it.
	OnEvent func(Event)
	// Middleware wraps the running of every call, the first outermost,
	// around the tool's own (see [Middleware]).
	Middleware []Middleware
	// Hooks, if set, follow the runner's runs, steps and calls with their
	// contexts (tracing, metrics; see [Hooks] and package telemetry).
	Hooks *Hooks
	// ApprovalTimeout is how long a call awaits a person's decision (see
	// [ToolOptions.Approval]); a call still undecided when a resume finds
	// it past that time is denied ("no decision in time"). Zero means
	// DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Budget bounds what each run may spend (see [Budget]); a run's
	// RunOptions.Budget overrides it field by field. The zero Budget sets
	// no limit.
	Budget Budget
}

// A Runner runs the tool loop over a [driver.Backend]: it sends the user's input,
// runs the calls the model asks for with the tools of its [Toolbox], sends
// their results back, and repeats until the model answers. A Runner is safe
// for concurrent use by several runs. Its runs on one thread are taken one
// at a time: a run (or resume) of a thread that another run of the runner
// works on waits for it to end, within its own time limit (runners in
// other processes are kept apart by the journal's claims).
type Runner struct {
	b     driver.Backend
	tools *Toolbox
	opts  Options

	emitMu  sync.Mutex
	leases  leases
	threads threadLocks
	// own is the journal when the runner made it: it forgets the calls
	// of each run that ends with an answer.
	own *journaldriver.Memory
	// closer is closed after the backend (see package internal/runnerhook).
	closer io.Closer
}

// NewRunner returns a runner over b that calls the tools of tools (which
// may be nil: then every call fails as unknown). opts may be nil.
func NewRunner(b driver.Backend, tools *Toolbox, opts *Options) *Runner {
	r := &Runner{b: b, tools: tools}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.Journal == nil {
		r.own = journaldriver.NewMemory()
		o.Journal = r.own
	}
	if o.Owner == "" {
		var b [8]byte
		rand.Read(b[:])
		o.Owner = "runner-" + hex.EncodeToString(b[:])
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = DefaultToolTimeout
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = DefaultRunTimeout
	}
	if o.MaxArgumentBytes <= 0 {
		o.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = DefaultApprovalTimeout
	}
	return r
}

// Backend returns the runner's backend.
func (r *Runner) Backend() driver.Backend { return r.b }

// Toolbox returns the runner's toolbox.
func (r *Runner) Toolbox() *Toolbox { return r.tools }

// Journal returns the runner's journal.
func (r *Runner) Journal() journaldriver.Journal { return r.opts.Journal }

// Hooks returns the runner's hooks (Options.Hooks), nil if none: a loop
// run elsewhere (see [Runner.Call]) calls Hooks.Step around the backend
// requests it makes itself.
func (r *Runner) Hooks() *Hooks { return r.opts.Hooks }

// Close closes the backend, and then what was opened for the runner alone
// (such as the journal package adapter opens from configuration).
func (r *Runner) Close() error {
	r.leases.close()
	err := r.b.Close()
	if r.closer != nil {
		err = errors.Join(err, r.closer.Close())
	}
	return err
}

func init() {
	runnerhook.OnClose = func(r any, c io.Closer) { r.(*Runner).closer = c }
}

// RunOptions configure one run. nil is usable.
type RunOptions struct {
	// Thread continues an existing thread; empty starts a new one.
	Thread string
	// MaxSteps overrides the runner's step limit for this run.
	MaxSteps int
	// Timeout overrides the runner's time limit (Options.RunTimeout) for
	// this run.
	Timeout time.Duration
	// Parts are images and files sent with the input, after its text, in
	// the same user message (see [ImagePart], [ImageData], [FilePart],
	// [FileData], [FileURL]). A backend that cannot carry a kind of part
	// refuses the run with an InvalidArgument error, sending nothing;
	// driver.Capabilities tells which kinds it carries. A resume ignores
	// them.
	Parts []Part
	// Format, if set, asks the model for an answer of a JSON schema
	// (see [NewFormat]); [Decode] reads it. A backend that cannot set a
	// run's format refuses the run with an InvalidArgument error.
	Format *Format
	// Budget bounds what this run may spend (see [Budget]): its fields
	// override those of Options.Budget that they set, [Unlimited] lifting
	// one. A resume, or a worker taking the run over, counts from the
	// turn's start; a resume with a raised budget goes on past the one
	// that stopped the run.
	Budget Budget
	// NoWait makes a run on a thread another run works on (in this
	// runner, or recorded running in the journal by a live worker of
	// another process) fail at once with an error matching
	// ErrThreadBusy, sending nothing, instead of waiting for it (a
	// resume), or going on beside it (a run continuing the thread).
	NoWait bool
	// Held, if set, is called once, before the run asks the service for
	// anything, when the run holds its thread (none for a new thread): a
	// run that ends without calling it did nothing.
	Held func()
}

// Result is the outcome of a run. A run that resumes a turn (with
// [Runner.Resume], or taken over: [Runner.TakeOver]) counts its steps,
// calls and usage, and numbers its steps in its events, from the turn's
// start, what earlier runs of the turn did included, in this process or
// another: the runner notes them in the journal after each step (in a
// journal that keeps notes: memory, SQLite, PostgreSQL); the results an
// earlier run sent are read back from the journal, without their
// arguments (one pruned meanwhile is left out). A note lost to a crash or
// a power loss only makes the counts start later.
type Result struct {
	// Text is the model's final answer.
	Text string
	// Thread names the thread to this runner, for a later run
	// (RunOptions.Thread), a resume and Decide: here the service's thread
	// (on a chain of responses, the last response), the thread of the
	// run's calls. The runner of module toolrelay/temporal gives the same
	// meaning a different value: its thread is a workflow id, and the
	// service's thread is the Thread of its calls.
	Thread string
	// Turn is the service's id of the run's last turn (or response), if
	// the backend has one; from the runner of module toolrelay/temporal,
	// the same id.
	Turn string
	// Steps counts the rounds of calls of the turn.
	Steps int
	// Calls holds the results sent, in the order they were sent.
	Calls []driver.ToolResult
	// Usage adds up the tokens the service reported for the turn.
	Usage Usage
	// Pending lists the calls awaiting a person's decision when the run
	// paused for them (its error matches ErrAwaitingApproval).
	Pending []Approval
	// ToolCalls counts the calls whose results the turn sent (as Calls,
	// those pruned from the journal included).
	ToolCalls int
	// Cost is the cost of Usage at the budget's prices (Budget.Prices);
	// 0 without a price table.
	Cost float64
	// Remaining is what the run's budget has left (Set false without
	// one).
	Remaining Remaining
}

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

// A run is one run of a [Runner] (Run, Resume, their streams, a run taken
// over), from its beginning to its answer: what its steps share. exec
// makes it; begin gets its first step, loop runs its steps and finish
// ends it.
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

	// Set as the loop starts:
	t0  time.Time // when the loop started
	res *Result   // the run's result, as the steps go
	sp  spend     // the run's budget, and what the turn spent
	// counted holds the calls earlier runs of the turn counted.
	counted map[journaldriver.Key]bool
	// noted: totals of the turn are noted in the journal, to clear once
	// it is over.
	noted bool
}

// A beginning is how a run gets its first step: [start] or [resume].
type beginning struct {
	input  string
	thread string // the thread resumed; "" for a start
	// A start taken over from a worker that stopped before its thread
	// existed goes on under that worker's record of it (see recordStart).
	startRecord string
	takenOver   bool // taken over by TakeOver
}

func start(input string) beginning   { return beginning{input: input} }
func resume(thread string) beginning { return beginning{thread: thread} }

// exec runs a run from its beginning: Run, Resume and their streamed forms
// are this, the latter with a sink for their events. It makes the [run],
// which holds the run's thread until it ends.
func (r *Runner) exec(ctx context.Context, ro RunOptions, b beginning, sk *sink) (*Result, error) {
	ctx, cancel := runContext(ctx, ro.Timeout)
	defer cancel()
	if sk != nil {
		ctx = sk.bind(ctx)
		defer sk.unbind()
	} else if driver.ObserverFrom(ctx) != nil {
		// A run inside a tool of a streamed run: its deltas are its own.
		ctx = driver.WithObserver(ctx, nil)
	}
	thread := ro.Thread
	if b.thread != "" {
		thread = b.thread
	}
	ru := &run{r: r, ro: ro, thread: thread, resumed: b.thread != "", sk: sk, hold: r.threads.hold()}
	ru.hold.noWait = ro.NoWait
	defer ru.hold.release()
	if err := ru.hold.take(ctx, thread); err != nil {
		ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
		return &Result{Thread: thread}, err
	}
	ctx, info, end := r.hookRun(ctx, thread, ru.resumed, b.takenOver)
	ru.info = info
	res, err := ru.begin(ctx, b)
	if end != nil {
		end(res, err)
	}
	return res, err
}

// begin gets a run's first step, from its beginning, and runs the loop.
func (ru *run) begin(ctx context.Context, b beginning) (*Result, error) {
	r, ro, thread := ru.r, &ru.ro, ru.thread
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
		if ru.rec, err = r.acquireRun(ctx, thread, *ro); err != nil {
			ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
			return &Result{Thread: thread}, err
		}
		ro.held()
		sctx, end := r.hookStep(ctx, StepInfo{Thread: thread, Op: op})
		step, err = r.b.Resume(sctx, thread)
		if end != nil {
			end(step, err)
		}
	} else if err = checkParts(ro.Parts); err != nil {
		ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
		return nil, err
	} else {
		if ro.Thread != "" && ro.NoWait {
			// Continued only if no live worker runs the thread.
			if ru.rec, err = r.claimRun(ctx, ro.Thread, *ro); err != nil {
				ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
				return &Result{Thread: thread}, err
			}
		} else if ro.Thread != "" {
			ru.rec = r.recordRun(ctx, ro.Thread, *ro)
		} else {
			ru.rec = r.recordStart(ctx, b, *ro)
		}
		ro.held()
		r.saveOrigin(ctx, ru.info, thread)
		sctx, end := r.hookStep(ctx, StepInfo{Thread: thread, Op: op})
		req := &driver.StartRequest{Thread: ro.Thread, Input: b.input, Parts: ro.Parts, Format: ro.Format.driverFormat()}
		if ro.Thread != "" {
			req.Created = func(t string) {
				// A chain's new response: the run goes on there.
				if t != "" && t != thread {
					created = t
					ru.hold.take(ctx, t) // new: nobody else holds it
					ru.rec.move(ctx, t)
				}
			}
		} else {
			req.Created = func(t string) {
				created = t
				ru.hold.take(ctx, t) // new: nobody else holds it
				if ru.rec == nil {
					ru.rec = r.recordRun(ctx, t, *ro)
				} else if err := ru.rec.move(ctx, t); err != nil {
					moveErr = err
				}
			}
		}
		step, err = r.b.Start(sctx, req)
		if end != nil {
			end(step, err)
		}
		if err == nil && step != nil && thread == "" {
			if ru.info != nil {
				ru.info.Conversation = step.Thread // a new thread: the run's conversation
			}
			r.saveOrigin(ctx, ru.info, step.Thread)
		}
	}
	if err != nil {
		err = r.backendError(ctx, op, err)
		switch {
		case step != nil && step.Thread != "":
			thread = step.Thread
		case created != "":
			thread = created
		}
		if ctx.Err() != nil {
			r.keepThread(thread) // the turn may have started: it is resumed
		}
		var res *Result
		if thread != "" {
			res = &Result{Thread: thread}
		}
		ru.rec.end(ctx, err)
		ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
		return res, err
	}
	if ru.rec == nil && step != nil {
		ru.rec = r.recordRun(ctx, step.Thread, *ro)
	}
	if step != nil && moveErr == nil {
		moveErr = ru.rec.move(ctx, step.Thread) // a backend that did not say when it created the thread
	}
	if moveErr != nil {
		// Another worker took the start over (this one was stuck past its
		// lease) and starts the run again: this thread must not go on.
		if step != nil {
			thread = step.Thread
		}
		r.cancelTurn(ctx, thread)
		err := r.journalError(ctx, moveErr)
		ru.send(ctx, &Event{Kind: EventRunFinished, Thread: thread, Err: err})
		return &Result{Thread: thread}, err
	}
	if step != nil {
		if err := ru.hold.take(ctx, step.Thread); err != nil {
			ru.send(ctx, &Event{Kind: EventRunFinished, Thread: step.Thread, Err: err})
			return &Result{Thread: step.Thread}, err
		}
	}
	return ru.loop(ctx, step)
}

// held tells the run's caller that the run holds its thread, once.
func (ro *RunOptions) held() {
	if ro.Held != nil {
		ro.Held()
		ro.Held = nil
	}
}

func (r *Runner) runOptions(opts *RunOptions) RunOptions {
	var ro RunOptions
	if opts != nil {
		ro = *opts
	}
	if ro.MaxSteps <= 0 {
		ro.MaxSteps = r.opts.MaxSteps
	}
	if ro.Timeout <= 0 {
		ro.Timeout = r.opts.RunTimeout
	}
	ro.Budget = ro.Budget.Over(r.opts.Budget)
	return ro
}

// runContext returns ctx bounded by a run's time limit d, its cause saying so.
func runContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("the run passed its time limit (%v): %w", d, context.DeadlineExceeded))
}

// loop runs the steps of a turn, from step, until the model answers; a
// resumed run counts from the turn's start (see totals).
func (ru *run) loop(ctx context.Context, step *driver.Step) (*Result, error) {
	r := ru.r
	ru.t0 = time.Now()
	ru.res = &Result{Thread: ru.thread}
	ru.sp = r.newSpend(&ru.ro)
	if ru.resumed {
		ru.counted = r.loadTotals(ctx, ru.thread, ru.res, &ru.sp)
	}
	ru.noted = ru.counted != nil
	res, sp, counted, sk := ru.res, &ru.sp, ru.counted, ru.sk
	for {
		if step == nil {
			// A step cannot be answered: the turn must not stay parked.
			r.cancelTurn(ctx, res.Thread)
			return ru.finish(ctx, &errcode.Error{Code: errcode.Internal, Op: r.b.Name() + ": step", Err: errors.New("the backend returned no step")})
		}
		if step.Thread != res.Thread && res.Thread != "" {
			// A chained thread moves on: its resumes must find the origin,
			// its record follows, and the run holds it.
			r.saveOrigin(ctx, ru.info, step.Thread)
			ru.rec.move(ctx, step.Thread)
			if err := ru.hold.take(ctx, step.Thread); err != nil {
				return ru.finish(ctx, err)
			}
		}
		res.Thread, res.Turn = step.Thread, step.Turn
		if len(step.Calls) > 0 && r.allCounted(step.Calls, counted) {
			// A step an earlier run of the turn counted, given again (its
			// results were sent, but the service's state read was stale):
			// it is counted once.
			res.Steps--
		} else {
			sp.add(r, res, step)
		}
		if sk != nil {
			sk.stepArrived(step, res.Steps)
		}
		if len(step.Calls) == 0 {
			res.Text = step.Text
			r.forget(res.Calls)
			return ru.finish(ctx, nil)
		}
		if res.Steps >= ru.ro.MaxSteps {
			r.cancelTurn(ctx, step.Thread)
			return ru.finish(ctx, &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: fmt.Errorf("%w (%d)", ErrMaxSteps, ru.ro.MaxSteps)})
		}
		if err := checkCalls(step.Calls); err != nil {
			r.cancelTurn(ctx, step.Thread)
			return ru.finish(ctx, &errcode.Error{Code: errcode.Internal, Op: r.b.Name() + ": step", Err: err})
		}
		if err := r.overBudget(ctx, sp, res, step); err != nil {
			return ru.finish(ctx, err)
		}
		if pending, err := r.pause(ctx, ru.rec, step); err != nil || len(pending) > 0 {
			if err == nil {
				res.Pending = pending
				err = awaitingError(step.Thread, len(pending), "resume")
			}
			return ru.finish(ctx, err)
		}
		res.Steps++
		ru.send(ctx, &Event{Kind: EventStepStarted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(step.Calls), Remaining: sp.b.remaining(res)})

		results, err := r.runCalls(ctx, step, res.Steps, sk, ru.rec.fence())
		if err == errPaused {
			// The calls that needed no decision ran, their results
			// journaled; the step's results go when every call is decided.
			if res.Pending, err = r.pause(ctx, ru.rec, step); err == nil && len(res.Pending) == 0 {
				// Every call awaiting a decision was decided, or expired,
				// meanwhile: the step goes again (the journal holds the
				// results of the calls that ran).
				res.Steps--
				continue
			}
			if err == nil {
				err = awaitingError(step.Thread, len(res.Pending), "pause")
				r.keepThread(step.Thread) // another process may decide and resume
			}
			return ru.finish(ctx, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				r.keepThread(step.Thread)
			}
			return ru.finish(ctx, err)
		}
		if err := checkResults(step.Calls, results); err != nil {
			r.cancelTurn(ctx, step.Thread)
			return ru.finish(ctx, &errcode.Error{Code: errcode.Internal, Op: "core: submit", Err: err})
		}
		submitted := &Event{Kind: EventResultsSubmitted, Thread: step.Thread, Turn: step.Turn, Step: res.Steps, Calls: len(results)}
		if sk != nil {
			// The next step's text may stream before Submit returns: the
			// reader learns first that the results went.
			sk.pending = submitted
		}
		sctx, end := r.hookStep(ctx, StepInfo{Thread: step.Thread, Turn: step.Turn, Op: "submit", Step: res.Steps, Results: len(results), Remaining: sp.b.remainingWith(res, len(results))})
		moved := func(t string) {
			// A chain's next response, named before it is complete: the
			// run's thread, its record and its hold move there at once.
			if t == "" || t == res.Thread {
				return
			}
			r.saveOrigin(ctx, ru.info, t)
			ru.rec.move(ctx, t)
			ru.hold.take(ctx, t) // new: nobody else holds it
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
				r.keepThread(step.Thread)
			}
			return ru.finish(ctx, r.backendError(ctx, "submit", err))
		}
		for _, tr := range results {
			if !counted[r.key(&tr.Call)] {
				res.Calls = append(res.Calls, tr)
				res.ToolCalls++
			}
		}
		err = r.journalWrite(ctx, "submitted", func() error { return r.opts.Journal.MarkSubmitted(ctx, r.keys(results)) })
		if err != nil {
			return ru.finish(ctx, &errcode.Error{Code: errcode.Of(err), Op: "core: journal", Err: err})
		}
		on := res.Thread // the thread the turn's next step comes on
		if next != nil && next.Thread != "" {
			on = next.Thread
		}
		r.noteTotals(ctx, on, res)
		ru.noted = true
		submitted.Remaining = sp.b.remaining(res)
		r.emit(ctx, submitted)
		if sk != nil {
			sk.flushPending()
		}
		step = next
	}
}

// finish ends the run with err (nil: the model answered): the turn's
// totals are cleared once it is over, the run's record ends, and the
// run's last event reports it.
func (ru *run) finish(ctx context.Context, err error) (*Result, error) {
	r, res := ru.r, ru.res
	if err == nil && ru.noted {
		r.clearTotals(ctx, res.Thread)
	}
	ru.rec.end(ctx, err)
	res.Remaining = ru.sp.b.remaining(res)
	ru.send(ctx, &Event{Kind: EventRunFinished, Thread: res.Thread, Turn: res.Turn, Step: res.Steps, Duration: time.Since(ru.t0), Err: err, Usage: res.Usage, Remaining: res.Remaining})
	return res, err
}

// send emits e, and hands it to the run's stream, if any.
func (ru *run) send(ctx context.Context, e *Event) { ru.r.send(ctx, ru.sk, e) }

// checkParts checks the parts of a run's input.
func checkParts(parts []Part) error {
	for i, p := range parts {
		if err := p.Check(); err != nil {
			return &errcode.Error{Code: errcode.InvalidArgument, Op: "core: run", Err: fmt.Errorf("input part %d: %w", i, err)}
		}
	}
	return nil
}

// forget deletes the entries of a run's calls from the runner's own
// journal, once the run has its answer: the turn is over, so no resume
// will ask for them again.
func (r *Runner) forget(calls []driver.ToolResult) {
	if r.own == nil || len(calls) == 0 {
		return
	}
	r.own.Forget(r.keys(calls))
}

// keys returns the journal keys of the calls results answer.
func (r *Runner) keys(results []driver.ToolResult) []journaldriver.Key {
	keys := make([]journaldriver.Key, len(results))
	for i := range results {
		keys[i] = r.key(&results[i].Call)
	}
	return keys
}

// checkCalls refuses a step whose calls repeat a call id or lack one.
func checkCalls(calls []Call) error {
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if c.ID == "" {
			return fmt.Errorf("call to %q has no call id", c.Name)
		}
		if seen[c.ID] {
			return fmt.Errorf("the step repeats call id %q", c.ID)
		}
		seen[c.ID] = true
	}
	return nil
}

// checkResults verifies that each call got exactly one result, in order.
func checkResults(calls []Call, results []driver.ToolResult) error {
	if len(results) != len(calls) {
		return fmt.Errorf("%d results for %d calls", len(results), len(calls))
	}
	for i := range calls {
		if results[i].Call.ID != calls[i].ID {
			return fmt.Errorf("result %d answers call %q, want %q", i, results[i].Call.ID, calls[i].ID)
		}
	}
	return nil
}

// A halt stops the calls of a step from starting their handlers once one
// of them failed (the journal failed, or holds a call it cannot use): a
// handler started then would end in doubt too. The calls it stops are
// left to run on resume.
type halt struct{ stopped atomic.Bool }

func (h *halt) stop() {
	if h != nil {
		h.stopped.Store(true)
	}
}

func (h *halt) halted() bool { return h != nil && h.stopped.Load() }

// errNotStarted is the "error" of a call that a halt kept from starting.
var errNotStarted = errors.New("core: the call was not started")

// mayStart returns nil if a call of the step may start its handler (or
// claim it): not once the run's context is done (its error), nor once the
// step halted (errNotStarted).
func (r *Runner) mayStart(ctx context.Context, c *callRun) error {
	switch {
	case ctx.Err() != nil:
		return r.ctxError(ctx)
	case c.halt.halted():
		return errNotStarted
	}
	return nil
}

// stepStopped is the error of a step whose call failed with first (the
// journal's error, whose code it keeps), saying what became of the step's
// calls: errs holds each call's error (nil for those whose result is
// recorded; calls never launched have errNotStarted).
func stepStopped(first error, errs []error) error {
	var recorded, paused, notStarted, failed int
	for _, err := range errs {
		switch err {
		case nil:
			recorded++
		case errPaused:
			paused++
		case errNotStarted:
			notStarted++
		default:
			failed++
		}
	}
	msg := fmt.Sprintf("the step stopped: of its %d calls, %d failed", len(errs), failed)
	if recorded > 0 {
		msg += fmt.Sprintf(", %d have their result recorded", recorded)
	}
	if paused > 0 {
		msg += fmt.Sprintf(", %d await a decision", paused)
	}
	msg += fmt.Sprintf(", %d were not started (they run when the run is resumed)", notStarted)
	return &errcode.Error{Code: errcode.Of(first), Op: "core: step", Err: fmt.Errorf("%w; %s", first, msg)}
}

// runCalls runs the calls of a step, at most Concurrency at once, and returns
// their results in call order. It returns early, with the context's error,
// when ctx is canceled. Once a call fails (the journal failed), the calls
// not started yet are not started (see halt).
func (r *Runner) runCalls(ctx context.Context, step *driver.Step, n int, sk *sink, fence string) ([]driver.ToolResult, error) {
	if sk != nil {
		// The handlers' own backend calls (a run inside a tool) are not
		// this run's to observe.
		ctx = driver.WithObserver(ctx, nil)
	}
	results := make([]driver.ToolResult, len(step.Calls))
	if len(step.Calls) == 1 {
		// A lone call runs in this goroutine (handing it to another costs
		// more than a quick call): its handler runs in one of its own,
		// which a canceled context or the call's timeout leaves behind
		// (see invoke).
		var err error
		if results[0], err = r.runCall(ctx, &step.Calls[0], n, sk, nil, fence); err != nil && err != errPaused {
			return nil, err
		}
		return results, err
	}
	errs := make([]error, len(step.Calls))
	h := new(halt)
	// Otherwise calls run in goroutines, even one at a time (when the
	// bound is 1), so that a canceled context ends the run at once. Each
	// reports on done when it has finished; their events reach a stream
	// through this goroutine (see sink.async).
	done := make(chan struct{}, len(step.Calls))
	var sem chan struct{}
	if len(step.Calls) > r.opts.Concurrency {
		sem = make(chan struct{}, r.opts.Concurrency)
	}
	ask := sk.async(len(step.Calls))
	launched := 0
launch:
	for i := range step.Calls {
		for sem != nil {
			select {
			case sem <- struct{}{}:
			case e := <-ask.events():
				sk.deliver(&e)
				continue
			case <-ctx.Done():
				break launch
			}
			break
		}
		if h.halted() {
			for j := i; j < len(step.Calls); j++ {
				errs[j] = errNotStarted
			}
			break
		}
		launched++
		go func() {
			results[i], errs[i] = r.runCall(ctx, &step.Calls[i], n, ask, h, fence)
			if errs[i] != nil && errs[i] != errPaused {
				h.stop()
			}
			if sem != nil {
				<-sem
			}
			done <- struct{}{}
		}()
	}
	for launched > 0 {
		select {
		case <-done:
			launched--
		case e := <-ask.events():
			sk.deliver(&e)
		case <-ctx.Done():
			return nil, r.ctxError(ctx)
		}
	}
	sk.flush(ask)
	if err := ctx.Err(); err != nil {
		return nil, r.ctxError(ctx)
	}
	var paused error
	for _, err := range errs {
		switch {
		case err == errPaused:
			paused = err
		case err != nil && err != errNotStarted:
			return nil, stepStopped(err, errs)
		}
	}
	return results, paused
}

// ctxError returns the error of a run whose context ended: its cause (the
// caller's, or the run's time limit), with the cause's code.
func (r *Runner) ctxError(ctx context.Context) error {
	err := context.Cause(ctx)
	return &errcode.Error{Code: errcode.Of(err), Op: "core: run", Err: err}
}

func (r *Runner) key(c *Call) journaldriver.Key {
	return journaldriver.Key{Backend: r.b.Name(), Thread: c.Thread, Turn: c.Turn, Call: c.ID}
}

// A callRun is one call being run: its journal key, its arguments in
// canonical form (parsed once, for the digest and for the handler), and
// the step it belongs to.
type callRun struct {
	call     *Call
	tool     *Tool // the tool of the call's name; nil if none
	key      journaldriver.Key
	args     []byte         // canonical arguments; nil when argErr is set
	obj      map[string]any // the arguments parsed (numbers as json.Number)
	argErr   error          // why the arguments are not valid
	digest   string
	idem     string
	step     int
	out      *sink  // the stream the call's events go to, if any
	denial   string // set when a person denied the call: the model is told it
	approved bool   // a service's approval request a person approved
	reused   bool   // the journal held the result
	cause    error  // the internal cause of a failed result
	// unsynced: the call's tool may run again, and the journal can write
	// its claim and result without waiting for the disk.
	unsynced journaldriver.Unsynced
	mode     callMode // whose loop the call is answered for
	halt     *halt    // the step's, if it has several calls
	// fence: the thread of the record of the run the call is answered
	// for, which the claim checks is still this runner's; empty: none.
	fence string
}

// A callMode says whose loop a call is answered for, and so whether the
// journal keeps its result and a person may be asked to approve it.
type callMode uint8

const (
	// stepCall is a call of a step of this runner's own run: journaled,
	// under a lease, and a person may be asked to approve it.
	stepCall callMode = iota
	// outsideCall is a journaled call of [Runner.Call]
	// (CallRequest.Journaled): journaled as a step's call, but no person
	// can approve it.
	outsideCall
	// detachedCall is a call answered for a loop run elsewhere
	// ([Runner.Call]), which keeps its result: no journal, no lease.
	detachedCall
)

// event reports an event about the call.
func (r *Runner) event(ctx context.Context, c *callRun, kind EventKind, o Outcome, d time.Duration, err error) {
	r.send(ctx, c.out, &Event{Kind: kind, Thread: c.call.Thread, Turn: c.call.Turn, Step: c.step, Call: c.call, Outcome: o, Duration: d, Err: err})
}

// decided reports the event that decided the call's result tr, and
// returns tr.
func (r *Runner) decided(ctx context.Context, c *callRun, kind EventKind, tr driver.ToolResult, d time.Duration, err error) driver.ToolResult {
	r.send(ctx, c.out, &Event{Kind: kind, Thread: c.call.Thread, Turn: c.call.Turn, Step: c.step, Call: c.call, Outcome: tr.Outcome, Duration: d, Err: err, Result: &tr})
	return tr
}

// runCall produces the result of one call: from the journal when it holds
// one, else by running the handler under a claim. Only journal failures and
// cancellation are errors; everything else is a (possibly failed) result.
// fence is the thread of the run's record, if any: the call is claimed
// only while the record is this runner's (see journaldriver.Fenced).
func (r *Runner) runCall(ctx context.Context, call *Call, step int, out *sink, stop *halt, fence string) (driver.ToolResult, error) {
	return r.hookedAnswer(ctx, &callRun{call: call, tool: r.tools.Lookup(call.Name), key: r.key(call), step: step, out: out, mode: stepCall, halt: stop, fence: fence})
}

// hookedAnswer is answer inside the call hook.
func (r *Runner) hookedAnswer(ctx context.Context, c *callRun) (driver.ToolResult, error) {
	h := r.opts.Hooks
	if h == nil || h.Call == nil {
		return r.answer(ctx, c)
	}
	ctx, end := h.Call(ctx, r.callInfo(c))
	tr, err := r.answer(ctx, c)
	e := &CallEnd{Reused: c.reused, Cause: c.cause}
	switch {
	case err == errPaused:
		e.Paused = true
	case err != nil:
		e.Err = err
	default:
		e.Result = CallResult{Output: tr.Output, Failed: tr.Failed, Error: tr.Error, Outcome: tr.Outcome}
	}
	end(e)
	return tr, err
}

// prepare reads a call's arguments (unless they pass the limit), and
// works out their digest and the call's idempotency key.
func (r *Runner) prepare(c *callRun) {
	call := c.call
	if n := len(call.Arguments); n > r.opts.MaxArgumentBytes {
		// Too large to parse: the handler will not run, and the digest is
		// of the bytes as received.
		c.argErr = &tooLargeError{what: "arguments", size: n, limit: r.opts.MaxArgumentBytes}
	} else {
		c.args, c.obj, c.argErr = parseArgs(call.Arguments)
	}
	c.digest = digestOf(call.Arguments, c.args)
	c.idem = journaldriver.IdempotencyKey(c.key, c.digest)
}

// answer is runCall without its hook.
func (r *Runner) answer(ctx context.Context, c *callRun) (driver.ToolResult, error) {
	j, call := r.opts.Journal, c.call
	if err := r.mayStart(ctx, c); err != nil {
		return driver.ToolResult{}, err
	}
	r.prepare(c)
	if c.tool != nil && c.tool.mayRerun() {
		c.unsynced, _ = j.(journaldriver.Unsynced)
	}
	if rule := approvalRule(call, c.tool); rule != nil && (c.argErr == nil || call.Kind == ServiceApproval) {
		if c.mode == outsideCall {
			// A journaled call of Runner.Call: no one to ask.
			if deny := r.outsideApproval(ctx, c, rule); deny != "" {
				tr := toResult(call, &journaldriver.Result{Failed: true, Error: deny, Outcome: Denied}, c.idem)
				return r.decided(ctx, c, EventCallFinished, tr, 0, nil), nil
			}
		} else if err := r.approve(ctx, c, rule); err != nil {
			return driver.ToolResult{}, err
		}
	}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var (
			entry   journaldriver.Entry
			claimed bool
		)
		err := r.journalWrite(ctx, "claim", func() (err error) {
			fenced, _ := j.(journaldriver.Fenced)
			switch {
			case fenced != nil && c.fence != "":
				entry, claimed, err = fenced.ClaimFenced(ctx, journaldriver.ClaimRequest{Key: c.key, Digest: c.digest, IdempotencyKey: c.idem,
					Owner: r.opts.Owner, Lease: r.opts.Lease, Run: c.fence, Unsynced: c.unsynced != nil})
			case c.unsynced != nil:
				entry, claimed, err = c.unsynced.ClaimUnsynced(ctx, c.key, c.digest, c.idem, r.opts.Owner, r.opts.Lease)
			default:
				entry, claimed, err = j.Claim(ctx, c.key, c.digest, c.idem, r.opts.Owner, r.opts.Lease)
			}
			return err
		})
		if err != nil && c.fence != "" && errors.Is(err, journaldriver.ErrLeaseLost) && ctx.Err() == nil {
			// This runner lost the run (it stalled past its lease, and
			// another worker took it over, or even finished it): the call
			// is that worker's, and this run stops here.
			return driver.ToolResult{}, &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run",
				Err: fmt.Errorf("the run of thread %s is not this worker's any more (another took it over, or it ended): call %s not run: %w", c.fence, c.call.ID, err)}
		}
		if err != nil {
			return driver.ToolResult{}, r.journalError(ctx, err)
		}
		if claimed {
			return r.runClaimed(ctx, c)
		}
		if entry.Digest != c.digest {
			err := fmt.Errorf("call %q is in the journal with other arguments (digest %.12s, now %.12s)", call.ID, entry.Digest, c.digest)
			r.event(ctx, c, EventCallReused, Conflict, 0, err)
			return driver.ToolResult{}, &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: journal", Err: err}
		}
		if entry.State.Finished() {
			if entry.Result == nil {
				err := fmt.Errorf("call %q is in the journal as %v, without its result: the entry is damaged (its handler is not run again)", call.ID, entry.State)
				r.event(ctx, c, EventCallReused, Conflict, 0, err)
				return driver.ToolResult{}, &errcode.Error{Code: errcode.DataLoss, Op: "core: journal", Err: err}
			}
			tr := toResult(call, entry.Result, entry.IdempotencyKey)
			tr.Resend = entry.State == journaldriver.Submitted
			c.reused = true
			return r.decided(ctx, c, EventCallReused, tr, 0, nil), nil
		}
		// Started: wait for its owner to finish, unless its lease expired.
		if !time.Now().Before(entry.LeaseUntil) {
			var took bool
			err := r.journalWrite(ctx, "takeover", func() (err error) {
				took, err = j.TakeOver(ctx, c.key, r.opts.Owner, r.opts.Lease)
				return err
			})
			if err != nil {
				return driver.ToolResult{}, r.journalError(ctx, err)
			}
			if took {
				c.idem = entry.IdempotencyKey
				return r.runInDoubt(ctx, c)
			}
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return driver.ToolResult{}, r.ctxError(ctx)
		}
	}
}

// runClaimed runs the handler of a call this runner claimed and records
// its result.
func (r *Runner) runClaimed(ctx context.Context, c *callRun) (driver.ToolResult, error) {
	if c.denial != "" || c.approved {
		jr := failed(Denied, c.denial)
		if c.approved {
			jr = journaldriver.Result{Output: Output{Text: "approved"}, Outcome: OK}
		}
		if err := r.finish(ctx, c, &jr); err != nil {
			return driver.ToolResult{}, err
		}
		return r.decided(ctx, c, EventCallFinished, toResult(c.call, &jr, c.idem), 0, nil), nil
	}
	if err := r.mayStart(ctx, c); err != nil {
		// The run's context ended, or the step halted, since the claim:
		// the call is left to run on resume.
		if c.mode != detachedCall {
			r.release(ctx, c)
		}
		return driver.ToolResult{}, err
	}
	if c.mode != detachedCall {
		r.holdLease(ctx, c.key)
	}
	r.event(ctx, c, EventCallStarted, OK, 0, nil)
	if ctx.Err() != nil {
		// The run's context ended as the call was reported (a stream's
		// reader stopped there): the handler does not start.
		if c.mode != detachedCall {
			r.dropLease(ctx, c.key)
			r.release(ctx, c)
		}
		r.event(ctx, c, EventCallFinished, Interrupted, 0, context.Cause(ctx))
		return driver.ToolResult{}, r.ctxError(ctx)
	}
	t0 := time.Now()
	jr, cause := r.handle(ctx, c)
	d := time.Since(t0)
	if c.mode != detachedCall {
		r.dropLease(ctx, c.key)
	}
	c.cause = cause
	if jr.Outcome == Interrupted {
		// The run was canceled and the handler gave up: let it run again.
		// A handler left behind may still take effect: its call stays
		// started, and a resume decides it as in doubt (once its lease,
		// no longer renewed, has passed).
		r.event(ctx, c, EventCallFinished, jr.Outcome, d, cause)
		if c.mode == detachedCall || errors.Is(cause, errLeftBehind) {
			return driver.ToolResult{}, r.ctxError(ctx)
		}
		r.release(ctx, c)
		return driver.ToolResult{}, r.ctxError(ctx)
	}
	if err := r.finish(ctx, c, &jr); err != nil {
		return driver.ToolResult{}, err
	}
	return r.decided(ctx, c, EventCallFinished, toResult(c.call, &jr, c.idem), d, c.cause), nil
}

// runInDoubt decides a call found started but not finished, now owned by
// this runner. With a Verify hook: the result it finds is sent; if it finds
// that the call did not take effect, the call runs again; if it cannot tell
// (an error), the call is treated as having no hook. Without one: an
// idempotent tool runs again; any other call gets a failed result saying
// its outcome is unknown.
func (r *Runner) runInDoubt(ctx context.Context, c *callRun) (driver.ToolResult, error) {
	call, tool := c.call, c.tool
	if tool != nil && tool.opts.Verify != nil {
		v, found, err := tool.verify(ctx, call, r.toolTimeout(tool))
		if ctx.Err() != nil {
			// The run ended while the hook looked: the call stays in
			// doubt, for the next owner to decide.
			return driver.ToolResult{}, r.ctxError(ctx)
		}
		switch {
		case err == nil && found:
			out, err := encodeOutput(v, r.outputLimit(tool))
			jr := journaldriver.Result{Output: out, Outcome: OK}
			var tl *tooLargeError
			if errors.As(err, &tl) {
				jr = failed(TooLarge, tl.Error())
			} else if err != nil {
				break
			}
			if err := r.finish(ctx, c, &jr); err != nil {
				return driver.ToolResult{}, err
			}
			return r.decided(ctx, c, EventCallInDoubt, toResult(call, &jr, c.idem), 0, nil), nil
		case err == nil:
			r.event(ctx, c, EventCallInDoubt, OK, 0, nil)
			return r.runClaimed(ctx, c)
		default:
			attrs := []any{"call_id", call.ID, "tool", call.Name}
			if r.opts.LogCallErrors || r.opts.Logger.Enabled(ctx, slog.LevelDebug) {
				attrs = append(attrs, errorAttr(err))
			}
			r.opts.Logger.WarnContext(ctx, "toolrelay: verify failed", attrs...)
		}
	}
	if tool == nil || tool.mayRerun() {
		r.event(ctx, c, EventCallInDoubt, OK, 0, nil)
		return r.runClaimed(ctx, c)
	}
	jr := failed(InDoubt, fmt.Sprintf("the outcome of this call of %q is unknown: it may or may not have taken effect, and it was not run again", call.Name))
	if err := r.finish(ctx, c, &jr); err != nil {
		return driver.ToolResult{}, err
	}
	c.cause = errors.New("call started but not finished; not verified and not idempotent")
	return r.decided(ctx, c, EventCallInDoubt, toResult(call, &jr, c.idem), 0, c.cause), nil
}

// finish bounds the result of call c as the model reads it (see
// [outputLimit.result]: the one check every result passes, whatever
// produced it) and records it in the journal (none for a detached call).
func (r *Runner) finish(ctx context.Context, c *callRun, jr *journaldriver.Result) error {
	var err error
	if *jr, err = r.outputLimit(c.tool).result(*jr); err != nil && c.cause == nil {
		c.cause = err
	}
	if c.mode == detachedCall {
		return nil
	}
	err = r.journalWrite(ctx, "finish", func() error {
		if c.unsynced != nil {
			return c.unsynced.FinishUnsynced(ctx, c.key, r.opts.Owner, *jr)
		}
		return r.opts.Journal.Finish(ctx, c.key, r.opts.Owner, *jr)
	})
	if err != nil {
		return r.journalError(ctx, err)
	}
	return nil
}

// release gives up this runner's claim on call c, whose handler did not
// start or gave up, so that the call runs again; the journal's error, if
// any, only reaches the JournalWrite hook.
func (r *Runner) release(ctx context.Context, c *callRun) {
	r.journalWrite(ctx, "release", func() error {
		return r.opts.Journal.Release(context.WithoutCancel(ctx), c.key, r.opts.Owner)
	})
}

func (r *Runner) journalError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return r.ctxError(ctx)
	}
	return &errcode.Error{Code: errcode.Of(err), Op: "core: journal", Err: err}
}

func toResult(call *Call, jr *journaldriver.Result, idem string) driver.ToolResult {
	return driver.ToolResult{Call: *call, Output: jr.Output, Failed: jr.Failed, Error: jr.Error, Outcome: jr.Outcome, IdempotencyKey: idem}
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
	if err := c.Cancel(ctx, thread); err != nil {
		return r.wrap("cancel turn", err)
	}
	r.clearTotals(ctx, thread)
	return nil
}

// keepThread asks the backend, if it can, to keep thread on Close: its
// turn waits to be resumed (in this process or another).
func (r *Runner) keepThread(thread string) {
	if k, ok := r.b.(driver.Keeper); ok && thread != "" {
		k.KeepThread(thread)
	}
}

// cancelTurn asks the backend, if it can, to cancel the turn waiting on
// thread. It uses a short context of its own, so it works after ctx ended.
func (r *Runner) cancelTurn(ctx context.Context, thread string) {
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

func (r *Runner) wrap(op string, err error) error {
	return wrap(r.b.Name()+": "+op, err, r.b.ErrorCode)
}

// backendError returns the error of the backend's op. Once the run's
// context has ended, that is why the run ends, whatever the backend made
// of it: the error then has the code of the context's cause, and wraps
// both.
func (r *Runner) backendError(ctx context.Context, op string, err error) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) {
		return r.wrap(op, err)
	}
	return &errcode.Error{Code: errcode.Of(cause), Op: r.b.Name() + ": " + op, Err: fmt.Errorf("%w: %w", cause, err)}
}

// send emits e, and hands it to sk, if any.
func (r *Runner) send(ctx context.Context, sk *sink, e *Event) {
	r.emit(ctx, e)
	if sk != nil {
		sk.put(e)
	}
}

func (r *Runner) emit(ctx context.Context, e *Event) {
	e.log(ctx, r.opts.Logger, r.opts.LogCallErrors)
	if r.opts.OnEvent == nil {
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.opts.OnEvent(*e)
}
