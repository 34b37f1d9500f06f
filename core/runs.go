package core

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// maxTakenOver bounds the runs one TakeOver takes over.
const maxTakenOver = 100

// runRecord is the record of a run this runner runs, in a journal that
// keeps runs ([journaldriver.Runs]); nil when there is none.
type runRecord struct {
	r       *Runner
	runs    journaldriver.Runs
	thread  string
	options string
	ended   bool // end recorded how the run ended (see pause)
	// handOver is the run's RunOptions.HandOver.
	handOver func(error) bool
	// ctx is the run's: its lease is renewed while ctx is not done (see
	// leases).
	ctx context.Context
}

// runOptionsJSON is what a run record keeps of a run's options, for the
// worker that takes it over; the record of a start (see recordStart) also
// keeps its input.
type runOptionsJSON struct {
	MaxSteps int           `json:"max_steps,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	Input    string        `json:"input,omitempty"`
	// Budget is the run's (RunOptions over Options); nil without one.
	Budget *Budget `json:"budget,omitempty"`
}

// optionsJSON returns what a run record keeps of ro, and input.
func optionsJSON(ro *RunOptions, input string) runOptionsJSON {
	o := runOptionsJSON{MaxSteps: ro.MaxSteps, Timeout: ro.Timeout, Input: input}
	if !ro.Budget.zero() {
		o.Budget = &ro.Budget
	}
	return o
}

// options returns the run options o keeps.
func (o *runOptionsJSON) options() *RunOptions {
	ro := &RunOptions{MaxSteps: o.MaxSteps, Timeout: o.Timeout}
	if o.Budget != nil {
		ro.Budget = *o.Budget
	}
	return ro
}

// startPrefix begins the thread of the record of a run whose thread does
// not exist yet (see recordStart).
const startPrefix = "toolrelay-start:"

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
func (ru *run) recordStart(ctx context.Context, b beginning) *runRecord {
	ro := ru.ro
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

// put writes the record of the run on thread, running under this runner's
// lease, with options, and holds its lease. It returns the journal's
// error, logged unless it matches journaldriver.ErrLeaseLost (another worker
// runs the thread).
func (rec *runRecord) put(ctx context.Context, thread, options string) error {
	r := rec.r
	err := rec.runs.PutRun(ctx, journaldriver.Run{Backend: r.b.Name(), Thread: thread, State: journaldriver.RunRunning, Owner: r.opts.Owner,
		LeaseUntil: time.Now().Add(r.opts.Lease), Options: options})
	if err != nil {
		if !errors.Is(err, journaldriver.ErrLeaseLost) {
			r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run", "thread", thread, errorAttr(err))
		}
		return err
	}
	r.leases.hold(rec.ctx, rec.key(thread))
	return nil
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

// key is the lease key of the record of a run on thread: a key with no
// call.
func (rec *runRecord) key(thread string) journaldriver.Key {
	return journaldriver.Key{Backend: rec.r.b.Name(), Thread: thread}
}

// move records the run as running on thread (a chain's thread moves on
// with each response), the record of its former thread continued. The
// record of a start (see recordStart) moves to the thread at once, and
// only if it is still this runner's: else move returns an error matching
// journaldriver.ErrLeaseLost (another worker took the start over, and runs it
// again), or the journal's.
func (rec *runRecord) move(ctx context.Context, thread string) error {
	if rec == nil || thread == rec.thread || thread == "" {
		return nil
	}
	r := rec.r
	if strings.HasPrefix(rec.thread, startPrefix) {
		if err := rec.runs.MoveRun(ctx, r.b.Name(), rec.thread, thread, r.opts.Owner, rec.options); err != nil {
			return err
		}
		r.leases.drop(rec.ctx, rec.key(rec.thread))
		r.leases.hold(rec.ctx, rec.key(thread))
		rec.thread = thread
		return nil
	}
	if rec.put(ctx, thread, rec.options) != nil {
		return nil
	}
	if rec.thread != "" {
		r.leases.drop(rec.ctx, rec.key(rec.thread))
		rec.endAs(ctx, journaldriver.RunContinued, "")
	}
	rec.thread = thread
	return nil
}

// fence returns the thread of the run's record, which the run's claims
// check is still this runner's (see journaldriver.Fenced): "" when the
// run has no record.
func (rec *runRecord) fence() string {
	if rec == nil || rec.ended {
		return ""
	}
	return rec.thread
}

// end records how the run ended, and stops renewing its lease; a run
// failed with an error its HandOver says true of is handed over instead.
func (rec *runRecord) end(ctx context.Context, err error) {
	if rec == nil || rec.thread == "" || rec.ended {
		return
	}
	rec.ended = true
	rec.r.leases.drop(rec.ctx, rec.key(rec.thread))
	state, msg := journaldriver.RunFinished, ""
	switch {
	case errors.Is(err, ErrAwaitingApproval):
		state = journaldriver.RunAwaiting
	case err != nil && rec.handOver != nil && rec.handOver(err):
		rec.handOff(context.WithoutCancel(ctx))
		return
	case err != nil:
		state, msg = journaldriver.RunFailed, err.Error()
	}
	rec.endAs(context.WithoutCancel(ctx), state, msg)
}

// handOff leaves the run's record running with its lease ended, for
// TakeOver (see RunOptions.HandOver), unless another worker took it over
// meanwhile. A renewal under way as its lease was dropped may extend it
// once more: TakeOver then finds it a lease later.
func (rec *runRecord) handOff(ctx context.Context) {
	r := rec.r
	err := rec.runs.RenewRun(ctx, r.b.Name(), rec.thread, r.opts.Owner, 0)
	switch {
	case errors.Is(err, journaldriver.ErrLeaseLost):
		r.opts.Logger.InfoContext(ctx, "toolrelay: another worker took the run over", "thread", rec.thread)
	case err != nil:
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not hand the run over", "thread", rec.thread, errorAttr(err))
	default:
		r.opts.Logger.InfoContext(ctx, "toolrelay: run handed over, for a worker's TakeOver", "thread", rec.thread)
	}
}

// pause records that the run waits for decisions on its thread; goOn
// records it running here again (a decision came as it paused), unless
// another worker took it on meanwhile (its error then).
func (rec *runRecord) pause(ctx context.Context) { rec.end(ctx, ErrAwaitingApproval) }

func (rec *runRecord) goOn(ctx context.Context) error {
	if rec == nil || !rec.ended {
		return nil
	}
	r := rec.r
	// Only a run still paused goes on here: one that a decision woke
	// meanwhile is left to whoever takes it (a Resume, a takeover), and
	// may be finished already.
	woke, err := rec.runs.WakeRun(ctx, r.b.Name(), rec.thread, r.opts.Owner, r.opts.Lease)
	switch {
	case err != nil:
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run", "thread", rec.thread, errorAttr(err))
		return nil
	case !woke:
		return &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf("the decision of its calls, made by another worker, woke the run of thread %s: it goes on with a Resume or a takeover, not here: %w", rec.thread, journaldriver.ErrLeaseLost)}
	}
	r.leases.hold(rec.ctx, rec.key(rec.thread))
	rec.ended = false
	return nil
}

// endAs records the run on its thread ended in state, unless another
// worker took it over meanwhile.
func (rec *runRecord) endAs(ctx context.Context, state journaldriver.RunState, msg string) {
	r := rec.r
	err := rec.runs.EndRun(ctx, r.b.Name(), rec.thread, r.opts.Owner, state, msg)
	switch {
	case errors.Is(err, journaldriver.ErrLeaseLost):
		r.opts.Logger.InfoContext(ctx, "toolrelay: another worker took the run over", "thread", rec.thread)
	case err != nil:
		r.opts.Logger.WarnContext(ctx, "toolrelay: could not record the run", "thread", rec.thread, "state", state, errorAttr(err))
	}
}

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
