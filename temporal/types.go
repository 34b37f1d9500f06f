package temporal

import (
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/defaults"
)

// The names the workflow is registered under, and of its updates, query
// and signals. They are part of the workflow's interface: a running
// workflow is reached by them, so they never change.
const (
	// WorkflowName is the thread workflow's name.
	WorkflowName = "toolrelay.Thread"
	// AgentWorkflowName is the workflow of one call of an agent tool
	// (core.NewAgentTool): the child's turn on the call's input, a child
	// workflow of the call's thread (see package doc, Agent tools).
	AgentWorkflowName = "toolrelay.Agent"
	// UpdateRun runs a turn: the user's input, to the final answer or a
	// pause on calls awaiting a decision.
	UpdateRun = "run"
	// UpdateWait waits for the current turn to end or pause, and returns
	// it (the last turn's, when none runs); its argument, a WaitRequest,
	// may name the turn.
	UpdateWait = "wait"
	// UpdateDecide records a person's decision about a call.
	UpdateDecide = "decide"
	// UpdateResume goes on with a turn stopped on its budget (see
	// State.Held), with the budget it is given; otherwise it is the wait
	// update.
	UpdateResume = "resume"
	// QueryEvents returns the events of a turn after a given index.
	QueryEvents = "events"
	// QueryApprovals returns the approvals of the current turn's calls,
	// awaiting a decision or decided.
	QueryApprovals = "approvals"
	// SignalDeltas carries the text a model step streamed, from the step's
	// activity to the workflow.
	SignalDeltas = "deltas"
	// SignalCancel ends the running turn, or the one paused on calls
	// awaiting a decision, canceling the service's turn.
	SignalCancel = "cancel"
	// SignalClaim carries the key of a local activity about to take
	// effect (see LoopOptions.LocalActivities), from the activity to the
	// workflow: a local activity run again after its worker died finds
	// its key in the history, and decides as an activity's second attempt
	// does.
	SignalClaim = "claim"
	// SignalAgentPaused carries, from the workflow of an agent tool's
	// call (AgentWorkflowName) to its parent, the approvals the child's
	// turn paused on: the parent's turn pauses on copies of them.
	SignalAgentPaused = "agent-paused"
	// SignalAgentDecide carries a decision about a call of an agent's
	// turn from its parent, which took it (the decide update), to the
	// workflow of the agent tool's call.
	SignalAgentDecide = "agent-decide"
	// SignalAgentHeld carries, from the workflow of an agent tool's call
	// to its parent, why the child's turn stopped on what the parent's
	// budget had left, or on a child of its own held so: the parent's
	// turn stops so too.
	SignalAgentHeld = "agent-held"
	// SignalAgentBudget carries, from the parent to the workflow of an
	// agent tool's call held on the parent's budget, what the parent's
	// budget, raised by a resume, has left for it (in an agent's
	// workflow, within what its own cap leaves it): its new cap.
	SignalAgentBudget = "agent-budget"
)

// The names of the activities.
const (
	activityStart  = "toolrelay.Start"
	activitySubmit = "toolrelay.Submit"
	activityResume = "toolrelay.Resume"
	activityCancel = "toolrelay.Cancel"
	activityCall   = "toolrelay.Call"
	// activityCancelAgent is activityCancel on an agent's backend.
	activityCancelAgent = "toolrelay.CancelAgent"
)

// LoopOptions are the loop's options, set in code ([Options.Loop]) and
// carried by the workflow (and into the runs that continue it as new). The
// zero value means the defaults of package core. (Options are set in
// code; Settings, in the other packages, are read from a file or the
// environment.)
type LoopOptions struct {
	// MaxSteps bounds the steps of a turn (core.DefaultMaxSteps).
	MaxSteps int `json:"max_steps,omitempty"`
	// Concurrency bounds the calls of a step that run at once
	// (core.DefaultConcurrency).
	Concurrency int `json:"concurrency,omitempty"`
	// RunTimeout bounds each turn, from its start (or the end of a pause
	// for decisions) to its answer (core.DefaultRunTimeout).
	RunTimeout time.Duration `json:"run_timeout,omitempty"`
	// ApprovalTimeout is how long a call awaits a decision before a
	// workflow timer denies it (core.DefaultApprovalTimeout).
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
	// Heartbeat is the activities' heartbeat timeout: a worker that dies
	// in a step or a call is noticed after it, and the activity runs
	// again on another (DefaultHeartbeat).
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// MaxPayloadBytes bounds what one step's results and one turn's
	// answer put in the history (DefaultMaxPayloadBytes): below the
	// server's blob limit.
	MaxPayloadBytes int `json:"max_payload_bytes,omitempty"`
	// MaxHistoryEvents is the history length past which the workflow
	// continues as new (DefaultMaxHistoryEvents), also when the server
	// has not suggested it yet: between turns, and inside a turn before
	// its next call (see State.Running).
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	// Idle, if set, ends the workflow after that long without a turn (a
	// later run on the thread starts a new workflow, and a new thread on
	// the service); zero keeps it waiting.
	Idle time.Duration `json:"idle,omitempty"`
	// Budget bounds what each turn may spend (core.Options.Budget, see
	// core.Budget): a run's RunOptions.Budget overrides it field by field.
	// The zero Budget sets no limit.
	Budget core.Budget `json:"budget,omitzero"`
	// LocalActivities runs the model's steps that do not stream, and the
	// short calls, as local activities: in the workflow task, on the
	// worker that runs it, without the round trips of an activity task
	// (see MODES.md). A call is short when its tool's time limit (its
	// Timeout, else the worker's runner's ToolTimeout) is at most
	// MaxLocalCall; calls that await a decision, longer ones, and
	// streamed steps stay activities. What a local activity does
	// that a second run must not repeat (a call of a tool neither
	// idempotent nor read-only, or with a Verify hook; a submit; a start
	// on a thread) is claimed first (SignalClaim): run again after its
	// worker died, it is decided as an activity's second attempt is
	// (Verify, a rerun if idempotent, else outcome unknown; the service
	// asked before the results go again). Off by default: every step and
	// call is an activity.
	LocalActivities bool `json:"local_activities,omitempty"`
	// MaxLocalCall is the longest tool time limit of a call that runs as
	// a local activity (DefaultMaxLocalCall).
	MaxLocalCall time.Duration `json:"max_local_call,omitempty"`
}

// Settings is the former name of LoopOptions.
//
// Deprecated: use LoopOptions (options are set in code; Settings, in the
// other packages, are read from a file or the environment). Settings is
// kept for one release.
type Settings = LoopOptions

// Defaults of [LoopOptions] that package core does not have.
const (
	DefaultHeartbeat = 10 * time.Second
	// DefaultMaxPayloadBytes stays below the server's default blob limit
	// (2 MiB), leaving room for the rest of an event.
	DefaultMaxPayloadBytes = 1536 << 10
	// DefaultMaxHistoryEvents stays well below the server's history
	// limits (51,200 events by default).
	DefaultMaxHistoryEvents = 10000
	// DefaultMaxLocalCall keeps the calls that run as local activities
	// short: a local activity holds its workflow task, and the queries
	// and updates of the thread wait for it.
	DefaultMaxLocalCall = 30 * time.Second
)

func (s LoopOptions) withDefaults() LoopOptions {
	defaults.Positive(&s.MaxSteps, core.DefaultMaxSteps)
	defaults.Positive(&s.Concurrency, core.DefaultConcurrency)
	defaults.Positive(&s.RunTimeout, core.DefaultRunTimeout)
	defaults.Positive(&s.ApprovalTimeout, core.DefaultApprovalTimeout)
	defaults.Positive(&s.Heartbeat, DefaultHeartbeat)
	defaults.Positive(&s.MaxPayloadBytes, DefaultMaxPayloadBytes)
	defaults.Positive(&s.MaxHistoryEvents, DefaultMaxHistoryEvents)
	defaults.Positive(&s.MaxLocalCall, DefaultMaxLocalCall)
	return s
}

// State is what the thread workflow starts with, and what it carries into
// the run that continues it as new.
type State struct {
	// Settings are the loop's options (named so in the histories of
	// running workflows).
	Settings LoopOptions `json:"settings"`
	// Thread is the service's thread, once the first turn made one.
	Thread string `json:"thread,omitempty"`
	// Turns counts the turns run on the thread.
	Turns int `json:"turns,omitempty"`
	// Last is the last turn's outcome.
	Last *turnResult `json:"last,omitempty"`
	// Held is the last turn if it stopped on its budget.
	Held *heldTurn `json:"held,omitempty"`
	// Running is the turn the run before continued as new in the middle
	// of (its history near the server's limits): the new run goes on with
	// it before any other. Last and Held are not kept then.
	Running *turnState `json:"running,omitempty"`
}

// heldTurn is a turn stopped on its budget before running its step's calls,
// the service's turn waiting for their results: [Runner.Resume] with a
// raised budget goes on from the step (its usage counted once), and a
// new turn, or [Runner.Cancel], abandons it.
type heldTurn struct {
	// Request is the turn's run request, without its input.
	Request runRequest `json:"request"`
	// Step is the step whose calls did not run.
	Step *stepResult `json:"step"`
}

// resumeRequest is the argument of the resume update.
type resumeRequest struct {
	// Budget is laid over the held turn's budget, field by field (a zero
	// field keeps the turn's, core.Unlimited lifts it), as core's Runner
	// lays a resume's over its turn's: the turn's budget from now on,
	// counted from the turn's start.
	Budget core.Budget `json:"budget,omitzero"`
	// Stream asks for the held turn's text as it is written, for a
	// reader of its events (ResumeStream).
	Stream bool `json:"stream,omitempty"`
}

// runRequest is the argument of the run update: one turn.
type runRequest struct {
	Input    string         `json:"input"`
	Parts    []driver.Part  `json:"parts,omitempty"`
	Format   *driver.Format `json:"format,omitempty"`
	MaxSteps int            `json:"max_steps,omitempty"`
	// Timeout overrides Settings.RunTimeout for the turn.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Stream: the model's text is kept as it is written, for a reader of
	// the turn's events (see [Runner.Stream]).
	Stream bool `json:"stream,omitempty"`
	// Budget is the turn's (RunOptions.Budget), over Settings.Budget.
	Budget core.Budget `json:"budget,omitzero"`
}

// A turnResult is how a turn ended (or paused), as the run and wait
// updates return it.
type turnResult struct {
	// Turn numbers the workflow's turns, from 1.
	Turn int `json:"turn"`
	// Done: the turn ended (with an answer or an error); otherwise it
	// paused, its Pending calls awaiting a decision.
	Done bool `json:"done"`
	// Text, Thread (the service's), ServiceTurn, Steps, Calls, Usage,
	// ToolCalls, Cost and Remaining are core.Result's.
	Text        string              `json:"text,omitempty"`
	Thread      string              `json:"thread,omitempty"`
	ServiceTurn string              `json:"service_turn,omitempty"`
	Steps       int                 `json:"steps,omitempty"`
	Calls       []driver.ToolResult `json:"calls,omitempty"`
	driver.Spent
	Remaining core.Remaining  `json:"remaining,omitzero"`
	Pending   []core.Approval `json:"pending,omitempty"`
	// CallsOmitted: the calls' results were left out, to keep the answer
	// below Settings.MaxPayloadBytes.
	CallsOmitted bool `json:"calls_omitted,omitempty"`
	// Err is why the turn failed, if it did.
	Err *historyError `json:"err,omitempty"`
	// Continued: the turn goes on in the workflow's next run (it continued
	// as new in the middle of the turn): the wait update, naming the
	// turn, returns it from there. Nothing else is set but Turn and Thread.
	Continued bool `json:"continued,omitempty"`
}

// waitRequest is the argument of the wait update.
type waitRequest struct {
	// Turn, if set, is the turn waited for: the wait is refused
	// (FailedPrecondition) once another began.
	Turn int `json:"turn,omitempty"`
}

// historyError is an error carried through the history: its code and text.
type historyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Is names the errors the error matches, of those a program tests
	// for: "max_steps" (core.ErrMaxSteps), "budget_exceeded"
	// (core.ErrBudgetExceeded), "deadline" and "canceled" (the context
	// errors), "awaiting_approval" and "thread_busy".
	Is []string `json:"is,omitempty"`
}

// decideRequest is the argument of the decide update.
type decideRequest struct {
	CallID   string        `json:"call_id"`
	Decision core.Decision `json:"decision"`
}

// eventsRequest is the argument of the events query.
type eventsRequest struct {
	// Turn is the turn whose events are read (0: the current or last).
	Turn int `json:"turn"`
	// After is how many of its events the reader has.
	After int `json:"after"`
}

// eventsPage is the answer of the events query.
type eventsPage struct {
	Turn   int     `json:"turn"`
	Events []event `json:"events"`
	// Gone: the turn's events are no longer kept (a later turn began, or
	// the workflow continued as new after the turn).
	Gone bool `json:"gone,omitempty"`
	// Skipped counts the events after the reader's that are no longer
	// kept (the turn continued as new in the middle, keeping its last
	// events): Events come after them.
	Skipped int `json:"skipped,omitempty"`
}

// An event is a [core.Event] as the workflow keeps it for a stream's
// reader: its error as text and code.
type event struct {
	Kind    core.EventKind     `json:"kind"`
	Thread  string             `json:"thread,omitempty"`
	Turn    string             `json:"turn,omitempty"`
	Step    int                `json:"step,omitempty"`
	Call    *driver.Call       `json:"call,omitempty"`
	Calls   int                `json:"calls,omitempty"`
	Outcome driver.Outcome     `json:"outcome,omitempty"`
	Result  *driver.ToolResult `json:"result,omitempty"`
	Item    string             `json:"item,omitempty"`
	Text    string             `json:"text,omitempty"`
	Usage   driver.Usage       `json:"usage,omitzero"`
	Err     *historyError      `json:"err,omitempty"`
	// Commentary marks the text of commentary (core.Event's).
	Commentary bool `json:"commentary,omitempty"`
	// Remaining is what the turn's budget has left (core.Event's).
	Remaining core.Remaining `json:"remaining,omitzero"`
	// Child, on the EventCallStarted of an agent tool's call that runs
	// its child as a child workflow, is that workflow's id: a stream's
	// reader follows its events too (see follower).
	Child string `json:"child,omitempty"`
}

// deltaBatch is what the signal carrying a step's streamed text holds.
type deltaBatch struct {
	Deltas []driver.Delta `json:"deltas"`
}

// stepRequest is the input of the start, submit and resume activities.
type stepRequest struct {
	// Start
	Thread string         `json:"thread,omitempty"`
	Input  string         `json:"input,omitempty"`
	Parts  []driver.Part  `json:"parts,omitempty"`
	Format *driver.Format `json:"format,omitempty"`
	// PrevTurn is the service's last turn on Thread before this start, so
	// that a retried start can tell whether the input went.
	PrevTurn string `json:"prev_turn,omitempty"`
	// Submit
	Step    *driver.Step        `json:"step,omitempty"`
	Results []driver.ToolResult `json:"results,omitempty"`
	// Stream: the step's text goes to the workflow as it is written.
	Stream bool `json:"stream,omitempty"`
	// Claim, on a local activity, is the key it signals (SignalClaim)
	// before the request goes, and with the thread the service names;
	// Again says the history holds it: a run before took effect, or may
	// have; Prev is the thread that run named, as an activity's
	// heartbeat carries it.
	Claim string `json:"claim,omitempty"`
	Again bool   `json:"again,omitempty"`
	Prev  string `json:"prev,omitempty"`
	// AfterPause, on a submit, says the step paused on calls awaiting a
	// decision, on the worker PausedOn names (stepResult.Worker): a
	// worker other than that one takes the thread over (reads it, as a
	// resume does) before it submits.
	AfterPause bool   `json:"after_pause,omitempty"`
	PausedOn   string `json:"paused_on,omitempty"`
	// Agent names the runner whose backend the request goes to: the
	// path of agent tools from the worker's runner ("" for it, see
	// activities.at).
	Agent string `json:"agent,omitempty"`
}

// claimSignal is what SignalClaim carries: a local activity's key, and
// the thread the service named for its request, if any.
type claimSignal struct {
	Key    string `json:"key"`
	Thread string `json:"thread,omitempty"`
}

// stepResult is the answer of the step activities: the step, and for each
// of its calls whether it needs a person's decision.
type stepResult struct {
	// Backend is the backend's name, which keys the calls' approvals.
	Backend   string         `json:"backend"`
	Step      *driver.Step   `json:"step"`
	Approvals []approvalNeed `json:"approvals,omitempty"`
	// Worker names the worker's activities that answered (random, one
	// a worker): the backend that kept the thread when the step pauses.
	Worker string `json:"worker,omitempty"`
}

type approvalNeed struct {
	Need bool   `json:"need,omitempty"`
	Why  string `json:"why,omitempty"`
	// Timeout is the time limit of the call's tool on the worker (zero
	// for an unknown tool), and Rerun says a second run is harmless and
	// unchecked (an idempotent or read-only tool without a Verify hook):
	// what the workflow chooses a local activity by (see
	// LoopOptions.LocalActivities).
	Timeout time.Duration `json:"timeout,omitempty"`
	Rerun   bool          `json:"rerun,omitempty"`
	// Agent, for a call of an agent tool whose arguments fit it, is the
	// child's turn: its input and options (see thread.agentCall).
	Agent *runRequest `json:"agent,omitempty"`
}

// callRequest is the input of the call activity.
type callRequest struct {
	Call           driver.Call    `json:"call"`
	Step           int            `json:"step"`
	IdempotencyKey string         `json:"idempotency_key"`
	Decision       *core.Decision `json:"decision,omitempty"`
	// Claim and Again, on a local activity: see stepRequest.
	Claim string `json:"claim,omitempty"`
	Again bool   `json:"again,omitempty"`
	// Agent: see stepRequest.
	Agent string `json:"agent,omitempty"`
	// Path, in an agent's workflow, holds the agent calls it came
	// through, one a name of Agent: the call's events go to the OnEvent
	// of the runners that made them too (core.CallRequest.Parents).
	Path []driver.Call `json:"path,omitempty"`
	// Child, on a call of an agent tool, is how its child workflow's
	// turn ended (core.CallRequest.Child).
	Child *turnResult `json:"child,omitempty"`
}

// cancelRequest is the input of the cancel activity on an agent's
// backend.
type cancelRequest struct {
	Agent  string `json:"agent"`
	Thread string `json:"thread"`
}

// agentState is what the agent workflow starts with: the loop's options
// (the parent's), the agent's path, the child's turn, and the parent's
// call.
type agentState struct {
	Settings LoopOptions `json:"settings"`
	Agent    string      `json:"agent"`
	Request  runRequest  `json:"request"`
	CallID   string      `json:"call_id"`
	// Path holds the agent calls the child came through, from the
	// thread's, the parent's call last (see callRequest.Path).
	Path []driver.Call `json:"path,omitempty"`
	// Cap, if set, is what the parent's budget had left when the call
	// started (its step's calls counted), and, if the parent is an agent
	// itself, what the parent's own cap left, the tighter of the two in
	// each field: the child may spend at most that (see
	// core.NewAgentTool).
	Cap *core.Remaining `json:"cap,omitempty"`
}

// agentHeld is what SignalAgentHeld carries.
type agentHeld struct {
	CallID string        `json:"call_id"`
	Err    *historyError `json:"err"`
}

// agentPause is what SignalAgentPaused carries: the parent's call, and
// the approvals its child's turn awaits.
type agentPause struct {
	CallID  string          `json:"call_id"`
	Pending []core.Approval `json:"pending"`
}
