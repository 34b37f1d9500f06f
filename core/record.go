package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"

	"github.com/toolrelay/toolrelay/errcode"
)

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
