package core

import (
	"context"
	"encoding/json"
)

// Backend is the narrow interface a service adapter implements. Application
// code should use the portable API ([Runner]); a Backend's methods are called
// by the runner, one at a time for a given thread.
//
// A turn on a Backend goes: Start (the user's input) → a Step holding the
// calls the model asked for, or its final answer → Submit (one result per
// call) → the next Step → … until a Step has no calls. The backend hides
// streams, ids and chaining. The thread identity it returns is opaque to
// core but stable: a turn can be picked up again with Resume, after a
// disconnect or in a new process.
//
// Errors returned by the methods are passed through ErrorCode to classify
// them; a backend returns the SDK's errors unwrapped (or wrapped with
// %w), so that programs can reach them with [errors.As].
type Backend interface {
	// Name identifies the backend, as in "openai" or "foundry". It is part
	// of the journal key of every call.
	Name() string

	// Start sends the user's input on the thread req.Thread (a new thread
	// when it is "") and returns the first step of the turn it starts.
	// req is never nil. If it fails after creating a thread, it returns a
	// Step holding only that Thread along with the error, so that the run
	// can be resumed.
	Start(ctx context.Context, req *StartRequest) (*Step, error)

	// Submit sends the results of the calls of req.Step, one per call in
	// call order, and returns the next step. The runner checks that the
	// results match the calls before calling Submit. req is never nil.
	Submit(ctx context.Context, req *SubmitRequest) (*Step, error)

	// Resume returns the current step of thread: the calls the service
	// still lists as pending, or, when no turn waits, a step without calls
	// holding the last answer. An unknown thread gives an error for which
	// ErrorCode returns NotFound.
	Resume(ctx context.Context, thread string) (*Step, error)

	// ErrorCode classifies an error returned by the other methods.
	ErrorCode(err error) Code

	// Close releases what the backend holds (and, where configured, deletes
	// what it created on the service).
	Close() error
}

// Canceler is implemented by backends that can cancel a turn the service
// is running, so that it does not stay parked waiting for results. The
// runner calls it when a run stops early: the step limit was reached, the
// caller's context was canceled or the run passed its time limit (then
// with a short context of its own), or
// a step could not be answered (its calls repeat or lack a call id, or the
// backend returned no step). A step may repeat a call id: Cancel answers
// (or drops) each pending call id once.
type Canceler interface {
	Cancel(ctx context.Context, thread string) error
}

// CapabilityReporter is implemented by backends that describe what their
// service supports, so that callers (and the conformance suite) can tell.
type CapabilityReporter interface {
	Capabilities() Capabilities
}

// Capabilities describes what a backend's service supports.
type Capabilities struct {
	// DeferredLoading: the service loads tools marked DeferLoading on
	// demand, through a tool search of its own.
	DeferredLoading bool
	// FailureFlag: results carry a success flag, so a failed call is
	// marked as failed on the wire rather than only described in the output.
	FailureFlag bool
	// ContentArrays: outputs may be sent as content arrays.
	ContentArrays bool
}

// StartRequest is the input of [Backend.Start].
type StartRequest struct {
	// Thread names the thread to continue; "" starts a new one.
	Thread string
	// Input is the user's message.
	Input string
}

// SubmitRequest is the input of [Backend.Submit].
type SubmitRequest struct {
	// Step is the step whose calls are answered.
	Step *Step
	// Results holds one result per call of Step, in call order.
	Results []ToolResult
}

// A Step is what the model did in one round of a turn: either it asked for
// calls, or it gave its final answer.
type Step struct {
	// Thread is the backend's opaque thread identity, from which the turn
	// can be resumed.
	Thread string
	// Turn identifies the turn (or response) the calls belong to; it may be
	// empty.
	Turn string
	// Calls holds the calls the model asked for, in the model's order. A
	// step without calls ends the turn.
	Calls []Call
	// Text is the final answer, when Calls is empty.
	Text string
	// Usage counts the tokens the service reported for this step, if any.
	Usage Usage
}

// A Call is one function call the model asked for.
type Call struct {
	// Thread and Turn locate the call; with ID and the backend's name they
	// key it in the journal. Backends set them so that the key is stable
	// across resumes.
	Thread string
	Turn   string
	// ID is the service's call id.
	ID string
	// Name is the function's name.
	Name string
	// Arguments holds the arguments as received: a JSON object, a JSON
	// string holding one, or empty.
	Arguments json.RawMessage
}

// ToolResult is the result of one call, as it is submitted.
type ToolResult struct {
	// Call is the call answered.
	Call Call
	// Output is what the call returned; it is empty when Failed.
	Output Output
	// Failed marks a failed call; Error is then what the model is told.
	Failed bool
	// Error is the model-visible failure message.
	Error string
	// Outcome says how the result came about.
	Outcome Outcome
	// IdempotencyKey is stable for the call: every submission of this result,
	// including resends after a disconnect, carries the same key.
	IdempotencyKey string
	// Resend is set when the journal shows the result was submitted before,
	// so a backend may take "no such pending call" as proof of delivery.
	Resend bool
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	TotalTokens  int64 `json:"total_tokens,omitempty"`
}

// Add adds u2 to u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.TotalTokens += u2.TotalTokens
}
