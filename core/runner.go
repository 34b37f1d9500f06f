package core

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/defaults"
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
	workers *workers // run the calls of a step side by side
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
	r.leases.opts = &r.opts
	o := &r.opts
	defaults.Positive(&o.Concurrency, DefaultConcurrency)
	defaults.Positive(&o.MaxSteps, DefaultMaxSteps)
	r.workers = newWorkers(o.Concurrency)
	if o.Journal == nil {
		r.own = journaldriver.NewMemory()
		o.Journal = r.own
	}
	if o.Owner == "" {
		var b [8]byte
		rand.Read(b[:])
		o.Owner = "runner-" + hex.EncodeToString(b[:])
	}
	defaults.Positive(&o.Lease, DefaultLease)
	defaults.Positive(&o.ToolTimeout, DefaultToolTimeout)
	defaults.Positive(&o.RunTimeout, DefaultRunTimeout)
	defaults.Positive(&o.MaxArgumentBytes, DefaultMaxArgumentBytes)
	defaults.Positive(&o.MaxOutputBytes, DefaultMaxOutputBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	defaults.Positive(&o.ApprovalTimeout, DefaultApprovalTimeout)
	return r
}

// Backend returns the runner's backend.
func (r *Runner) Backend() driver.Backend { return r.b }

// Toolbox returns the runner's toolbox.
func (r *Runner) Toolbox() *Toolbox { return r.tools }

// ToolTimeout returns the time limit of one run of tool's handler: its own
// Timeout, else the runner's Options.ToolTimeout.
func (r *Runner) ToolTimeout(tool *Tool) time.Duration {
	if tool != nil && tool.opts.Timeout > 0 {
		return tool.opts.Timeout
	}
	return r.opts.ToolTimeout
}

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
	r.workers.close()
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
	// turn's start, and keeps the turn's budget: a resume's fields
	// override those of the turn's budget that they set (a resume with a
	// raised budget goes on past the one that stopped the run; one
	// without keeps it). A budget that fails [Budget.Check], here or in
	// Options.Budget, fails the run with an InvalidArgument error before
	// anything is sent.
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
	// HandOver, if set, is asked, when the run fails (not when it pauses
	// for a decision), whether to hand it over rather than record it
	// failed: if it says true, the run's record in a journal shared with
	// other workers (one that keeps runs) is left running, its lease
	// ended, as a dead worker's is, so that [Runner.TakeOver] goes on with
	// it (or a resume does). It is for failures that may pass, such as a
	// service unavailable (errcode.Unavailable): a run handed over on a
	// failure that stays is taken over, and fails, again and again. A
	// worker taking the run over does not ask it (the record keeps no
	// function).
	HandOver func(err error) bool
}

// runOptions returns the options of a run: opts (nil is usable), the
// runner's defaults filled in.
func (r *Runner) runOptions(opts *RunOptions) RunOptions {
	var ro RunOptions
	if opts != nil {
		ro = *opts
	}
	defaults.Positive(&ro.MaxSteps, r.opts.MaxSteps)
	defaults.Positive(&ro.Timeout, r.opts.RunTimeout)
	return ro
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

// key returns the journal key of call c: the backend's name, and the
// call's thread, turn and id.
func (r *Runner) key(c *Call) journaldriver.Key {
	return journaldriver.Key{Backend: r.b.Name(), Thread: c.Thread, Turn: c.Turn, Call: c.ID}
}

// keys returns the journal keys of the calls results answer.
func (r *Runner) keys(results []driver.ToolResult) []journaldriver.Key {
	keys := make([]journaldriver.Key, len(results))
	for i := range results {
		keys[i] = r.key(&results[i].Call)
	}
	return keys
}
