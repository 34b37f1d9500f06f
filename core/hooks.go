package core

import (
	"context"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Hooks let a program follow a runner's work with the context of each
// piece of it, so that what a piece causes (the service's HTTP requests, a
// handler's own spans) happens inside it: package telemetry makes Hooks
// for OpenTelemetry. Every hook is optional. Run, Step and Call are called
// as their piece begins, and return the context the piece goes on with and
// a function the runner calls once when it ends. Hooks are called from the
// goroutines doing the work, concurrently for the calls of a step; they
// must be quick and must not block.
type Hooks struct {
	// Run is called as a run begins (Run, Resume and their streamed
	// forms); end gets its result and error.
	Run func(ctx context.Context, info *RunInfo) (_ context.Context, end func(*Result, error))
	// Step is called as the runner asks the backend for a step: it sends
	// the user's input (start), a step's results (submit), or reads a
	// thread (resume); end gets the next step, or the error.
	Step func(ctx context.Context, info *StepInfo) (_ context.Context, end func(*driver.Step, error))
	// Call is called as the runner takes up a call of a step, before it
	// looks in the journal; the context it returns is the handler's
	// parent. end says how the call ended.
	Call func(ctx context.Context, info *CallInfo) (_ context.Context, end func(*CallEnd))
	// JournalWrite is called after each write to the journal on a call's
	// path (op: "claim", "finish", "takeover", "release", "submitted"),
	// with how long it took.
	JournalWrite func(ctx context.Context, op string, d time.Duration, err error)
}

// RunInfo describes a run to [Hooks].Run.
type RunInfo struct {
	// Backend is the backend's name.
	Backend string
	// Thread is the thread resumed or continued; "" for a new thread.
	Thread string
	// Resume says whether the run is a resume.
	Resume bool
	// TakenOver says whether the run was taken over from a worker that
	// stopped ([Runner.TakeOver]): a resume of its thread, or, for a run
	// whose worker stopped before its thread existed, its start again.
	TakenOver bool
	// Origin carries a short text from a run to the later resumes of its
	// thread, in this process or another, such as a trace context to link
	// to. On a resume it holds what the hook set for the thread's last
	// started run, if the journal keeps notes ([journaldriver.Notes]); for a
	// run that starts a turn the hook may set it, and the runner records
	// it as soon as the thread is known.
	Origin string
	// Conversation names the conversation the run belongs to, the same
	// from run to run of a thread: the thread itself, or, on a backend
	// whose thread moves on with each response (a chain of responses),
	// the thread the chain began on, as the journal's notes recorded it
	// (a runner with a Run hook records it where a chain moves on, in a
	// journal that keeps notes, [journaldriver.Notes]; without them, it
	// is the thread resumed or continued). It is "" when the hook is
	// called for a run that starts a new thread; the runner sets it to
	// that thread once it is known.
	Conversation string
}

// StepInfo describes a request for a step to [Hooks].Step.
type StepInfo struct {
	// Backend is the backend's name; Thread and Turn locate the step
	// ("" before a new thread is known).
	Backend, Thread, Turn string
	// Op is "start", "submit" or "resume".
	Op string
	// Step counts the steps the run has run so far.
	Step int
	// Results counts the results submitted (Op "submit").
	Results int
	// Remaining is what the run's budget has left once the results of
	// the request are counted (Op "submit"; Set false without a budget,
	// and for other ops).
	Remaining Remaining
}

// CallInfo describes a call to [Hooks].Call.
type CallInfo struct {
	// Backend is the backend's name.
	Backend string
	// Call is the call; hooks must not change it.
	Call *Call
	// Step is the run's step the call belongs to, from 1 (0 for a call
	// outside a run: [Runner.Call]).
	Step int
	// Server is where the tool forwards the call ([ToolOptions.Server]),
	// if anywhere.
	Server string
}

// CallEnd says how a call ended, to the end function of [Hooks].Call.
type CallEnd struct {
	// Result is the result sent to the model; zero when Err ended the call
	// without one, or when the call awaits a decision.
	Result CallResult
	// Reused: the journal held the result; the call did not run here.
	Reused bool
	// Paused: the call awaits a person's decision.
	Paused bool
	// Cause is the internal cause of a failed result; Err an error that
	// ended the call without a result (the journal failed, the run was
	// canceled).
	Cause, Err error
}

// hookRun calls the Run hook, if any, reading the thread's origin note on a
// resume, and its conversation note on a resume or a continuation. It
// returns the run's context, the info (whose Origin the hook may have set)
// and the end function, nil when there is no hook.
func (r *Runner) hookRun(ctx context.Context, thread string, resume, takenOver bool) (context.Context, *RunInfo, func(*Result, error)) {
	h := r.opts.Hooks
	if h == nil || h.Run == nil {
		return ctx, nil, nil
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
	return ctx, info, end
}

// originNote names the journal note that keeps a run's Origin, and
// conversationNote the one that keeps the Conversation of a thread that is
// not its own (a chain's).
const (
	originNote       = "origin"
	conversationNote = "conversation"
)

// saveOrigin records the Origin of a run for thread: the one a Run hook
// set for the run that started a turn, or, for a chained thread that moves
// on, the one the run carries; and, on a thread that is not the run's
// conversation (a chain's next response), the Conversation. A failure
// costs only the link or the name, so it is logged.
func (r *Runner) saveOrigin(ctx context.Context, info *RunInfo, thread string) {
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
func (r *Runner) hookStep(ctx context.Context, info StepInfo) (context.Context, func(*driver.Step, error)) {
	h := r.opts.Hooks
	if h == nil || h.Step == nil {
		return ctx, nil
	}
	p := new(StepInfo) // info itself stays on the stack when no hook runs
	*p = info
	p.Backend = r.b.Name()
	return h.Step(ctx, p)
}

// journalWrite makes the journal write write, named op, and returns its
// error. When a hook wants to know how long journal writes take
// (Hooks.JournalWrite), it times the write and reports it.
func (r *Runner) journalWrite(ctx context.Context, op string, write func() error) error {
	h := r.opts.Hooks
	if h == nil || h.JournalWrite == nil {
		return write()
	}
	t0 := time.Now()
	err := write()
	h.JournalWrite(ctx, op, time.Since(t0), err)
	return err
}
