package core

import (
	"context"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
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

// originNote names the journal note that keeps a run's Origin, and
// conversationNote the one that keeps the Conversation of a thread that is
// not its own (a chain's).
const (
	originNote       = "origin"
	conversationNote = "conversation"
)

// journalWrite makes the journal write write, named op, and returns its
// error. When a hook wants to know how long journal writes take
// (Hooks.JournalWrite), it times the write and reports it.
func (h *Hooks) journalWrite(ctx context.Context, op string, write func() error) error {
	if h == nil || h.JournalWrite == nil {
		return write()
	}
	t0 := time.Now()
	err := write()
	h.JournalWrite(ctx, op, time.Since(t0), err)
	return err
}
