package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Outcome says how a call's result came about.
type Outcome int

// The outcomes of a call. Every outcome but OK gives a failed result.
const (
	// OK: the handler returned a result.
	OK Outcome = iota
	// UnknownTool: no tool has the name the model asked for.
	UnknownTool
	// InvalidArguments: the arguments were not valid JSON, not an object,
	// or did not satisfy the schema.
	InvalidArguments
	// ToolError: the handler returned an error.
	ToolError
	// Panicked: the handler panicked; the panic was recovered.
	Panicked
	// TimedOut: the handler ran past its timeout.
	TimedOut
	// Interrupted: the run's context was canceled while the handler ran.
	Interrupted
	// InDoubt: the call was started before but its result was lost, and it
	// could neither be verified nor safely run again.
	InDoubt
	// Conflict: the journal holds the call with different arguments.
	Conflict
	// TooLarge: the call's arguments or its output passed the runner's
	// size limit (see [Options.MaxArgumentBytes], [Options.MaxOutputBytes]).
	TooLarge
)

var outcomeNames = [...]string{
	OK:               "ok",
	UnknownTool:      "unknown_tool",
	InvalidArguments: "invalid_arguments",
	ToolError:        "tool_error",
	Panicked:         "panicked",
	TimedOut:         "timed_out",
	Interrupted:      "interrupted",
	InDoubt:          "in_doubt",
	Conflict:         "conflict",
	TooLarge:         "too_large",
}

// String returns the outcome's name, such as "timed_out".
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText returns the outcome's name.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses an outcome's name.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("core: unknown outcome %q", b)
}

// EventKind names what an [Event] reports.
type EventKind int

// The kinds of event, in the order they happen in a run.
const (
	// StepStarted: the model's step arrived with calls to run.
	StepStarted EventKind = iota + 1
	// CallStarted: a handler is about to run.
	CallStarted
	// CallFinished: a handler finished (with any outcome).
	CallFinished
	// CallReused: a result kept in the journal is sent again, without
	// running the handler.
	CallReused
	// CallInDoubt: a call was found started but not finished; Outcome says
	// what was done (OK when verified or re-run, InDoubt when not).
	CallInDoubt
	// ResultsSubmitted: a step's results were accepted by the service.
	ResultsSubmitted
	// RunFinished: the run ended; Err is set when it failed.
	RunFinished
)

var eventNames = [...]string{
	StepStarted:      "step_started",
	CallStarted:      "call_started",
	CallFinished:     "call_finished",
	CallReused:       "call_reused",
	CallInDoubt:      "call_in_doubt",
	ResultsSubmitted: "results_submitted",
	RunFinished:      "run_finished",
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
	// Duration is how long the handler ran (CallFinished) or the run took
	// (RunFinished).
	Duration time.Duration
	// Err is the internal error behind a failed outcome or run. It is for the
	// operator: the model is never shown it unless it is a *ModelError.
	Err error
}

func (e *Event) level() slog.Level {
	switch {
	case e.Kind == CallFinished && e.Outcome == Panicked:
		return slog.LevelError
	case e.Outcome == InDoubt || e.Outcome == Conflict || (e.Kind == RunFinished && e.Err != nil):
		return slog.LevelWarn
	case e.Kind == CallFinished && e.Outcome != OK:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

func (e *Event) log(ctx context.Context, l *slog.Logger) {
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
	case StepStarted, ResultsSubmitted:
		attrs = append(attrs, slog.Int("calls", e.Calls))
	case CallFinished, CallReused, CallInDoubt:
		attrs = append(attrs, slog.String("outcome", e.Outcome.String()))
	}
	if e.Duration > 0 {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
		if pe, ok := e.Err.(*PanicError); ok {
			attrs = append(attrs, slog.String("stack", string(pe.Stack)))
		}
	}
	l.LogAttrs(ctx, lvl, "toolrelay: "+e.Kind.String(), attrs...)
}
