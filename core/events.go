package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/redact"
)

// EventKind names what an [Event] reports.
type EventKind int

// The kinds of event, in the order they happen in a run.
const (
	// EventStepStarted: the model's step arrived with calls to run.
	EventStepStarted EventKind = iota + 1
	// EventCallStarted: a handler is about to run.
	EventCallStarted
	// EventCallFinished: a handler finished (with any outcome).
	EventCallFinished
	// EventCallReused: a result kept in the journal is sent again, without
	// running the handler.
	EventCallReused
	// EventCallInDoubt: a call was found started but not finished; Outcome says
	// what was done (OK when verified or re-run, InDoubt when not).
	EventCallInDoubt
	// EventResultsSubmitted: a step's results were accepted by the service.
	EventResultsSubmitted
	// EventRunFinished: the run ended; Err is set when it failed.
	EventRunFinished
	// EventApprovalRequested: Call needs a person's decision before it
	// runs (Text says why); the run pauses once the step's other calls
	// have run.
	EventApprovalRequested

	// The events below reach only the reader of a streamed run
	// ([Runner.Stream]), not the logger or OnEvent.

	// EventTextDelta: Text is the next piece of the text of message Item.
	// The pieces of an item concatenate to the Text of its EventTextDone.
	EventTextDelta
	// EventTextDone: message Item is complete; Text is its whole text.
	// The run's answer ([Result.Text]) is the text of its messages, joined
	// by newlines, those marked Commentary excepted.
	EventTextDone
	// EventReasoningDelta: Text is the next piece of a reasoning summary.
	EventReasoningDelta
	// EventToolCall: the model asked for Call (its arguments complete);
	// it is reported before the step's EventStepStarted.
	EventToolCall
	// EventUsage: Usage holds the tokens the service reported for a step.
	EventUsage
	// EventAgentActivity: another agent of the run acted, such as a
	// subagent the service's agent delegated to (OpenAI sessions with
	// subagents): Agent says who, Activity what (the service's item or
	// event type, such as "message", "agent_message",
	// "create_subagent_call" or "subagent.closed"), Text what it said or
	// was sent, if anything. It is never part of the run's answer
	// ([Result.Text]). A backend whose service has no such agents never
	// sends it.
	EventAgentActivity
)

var eventNames = [...]string{
	EventStepStarted:       "step_started",
	EventCallStarted:       "call_started",
	EventCallFinished:      "call_finished",
	EventCallReused:        "call_reused",
	EventCallInDoubt:       "call_in_doubt",
	EventResultsSubmitted:  "results_submitted",
	EventRunFinished:       "run_finished",
	EventApprovalRequested: "approval_requested",
	EventTextDelta:         "text_delta",
	EventTextDone:          "text_done",
	EventReasoningDelta:    "reasoning_delta",
	EventToolCall:          "tool_call",
	EventUsage:             "usage",
	EventAgentActivity:     "agent_activity",
}

// String returns the kind's name, such as "call_started".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event"
}

// An Event reports one thing that happened in a run. Events go to the
// runner's logger and to its OnEvent callback.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Thread and Turn locate the run.
	Thread, Turn string
	// Step counts the steps of the run, from 1.
	Step int
	// Call is the call concerned (call events only).
	Call *Call
	// Calls is the number of calls of the step (StepStarted,
	// ResultsSubmitted).
	Calls int
	// Outcome is the call's outcome (CallFinished, CallReused, CallInDoubt).
	Outcome Outcome
	// Result is the call's result as the model gets it (its output, or
	// the failure message it reads), on the event that decided it:
	// CallFinished, CallReused, and CallInDoubt when no handler runs
	// after it; nil otherwise (a call interrupted, or about to run again).
	Result *driver.ToolResult
	// Duration is how long the handler ran (CallFinished) or the run took
	// (RunFinished).
	Duration time.Duration
	// Err is the internal error behind a failed outcome or run. It is for the
	// operator: the model is never shown it unless it is a *ModelError.
	Err error
	// Item names the message a text event belongs to (for
	// AgentActivity, the item, or the subagent whose state changed).
	Item string
	// Text is the text of a text, reasoning or agent activity event.
	Text string
	// Agent and Activity say who acted and what they did
	// (AgentActivity only; see [EventAgentActivity]).
	Agent, Activity string
	// Commentary marks the text events (TextDelta, TextDone) of a message
	// the model wrote as commentary: a preamble to its calls or its answer
	// (on the Responses API and Foundry, an assistant message of phase
	// "commentary"; the sessions backend hands none over), which is not
	// part of the run's answer ([Result.Text]). A reader that shows only
	// the answer skips these events.
	Commentary bool
	// Usage is the usage of a step (Usage) or of the whole run
	// (RunFinished).
	Usage Usage
	// Remaining is what the run's budget has left (StepStarted, after the
	// step's usage; ResultsSubmitted, after its calls; RunFinished); Set
	// false for a run without a budget, and on other events.
	Remaining Remaining
	// Path is empty for an event of the run itself. For an event of the
	// run of an agent tool's child (see [NewAgentTool]), handed on to the
	// parent's OnEvent and stream, it names the calls it came through,
	// outermost first: the parent's call of the agent tool, then, for a
	// grandchild's event, the child's call, and so on. Thread, Turn, Step
	// and Call are then the child's.
	Path []*Call
}

func (e *Event) level() slog.Level {
	switch {
	case e.Kind == EventCallFinished && e.Outcome == Panicked:
		return slog.LevelError
	case e.Kind == EventRunFinished && errors.Is(e.Err, ErrAwaitingApproval):
		return slog.LevelInfo // a pause, as the program asked
	case e.Outcome == InDoubt || e.Outcome == Conflict || (e.Kind == EventRunFinished && e.Err != nil):
		return slog.LevelWarn
	case e.Kind == EventCallFinished && e.Outcome != OK, e.Kind == EventApprovalRequested:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// log writes e to l at its level. The internal error of a call (e.Call
// set: a handler's or a middleware's error, a panic's value) is written
// only when callErrors is set or l is enabled at Debug; every error
// passes [errorAttr]. A pause is no error: it is written as
// awaiting_approval.
func (e *Event) log(ctx context.Context, l *slog.Logger, callErrors bool) {
	lvl := e.level()
	if !l.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("thread", e.Thread))
	if e.Turn != "" {
		attrs = append(attrs, slog.String("turn", e.Turn))
	}
	attrs = append(attrs, slog.Int("step", e.Step))
	if e.Call != nil {
		attrs = append(attrs, slog.String("call_id", e.Call.ID), slog.String("tool", e.Call.Name))
	}
	switch e.Kind {
	case EventStepStarted, EventResultsSubmitted:
		attrs = append(attrs, slog.Int("calls", e.Calls))
	case EventCallFinished, EventCallReused, EventCallInDoubt:
		attrs = append(attrs, slog.String("outcome", e.Outcome.String()))
	}
	if e.Duration > 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	switch {
	case e.Err == nil:
	case e.Kind == EventRunFinished && errors.Is(e.Err, ErrAwaitingApproval):
		attrs = append(attrs, slog.Bool("awaiting_approval", true))
	case e.Call == nil || callErrors || l.Enabled(ctx, slog.LevelDebug):
		attrs = append(attrs, errorAttr(e.Err))
	}
	if pe, ok := e.Err.(*panicError); ok {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	l.LogAttrs(ctx, lvl, "toolrelay: "+e.Kind.String(), attrs...)
}

// maxLoggedError bounds the text of an error in a log line.
const maxLoggedError = 2 << 10

// errorAttr returns err as a log attribute: its text cut to
// maxLoggedError bytes, then redacted ([redact.Text]: URL passwords,
// password=… and other secret settings, tokens).
func errorAttr(err error) slog.Attr {
	s := err.Error()
	if len(s) > maxLoggedError {
		s = fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(s[:maxLoggedError], ""), len(s))
	}
	return slog.String("error", redact.Text(s))
}
