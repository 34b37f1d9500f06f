// Package driver defines the interface a backend implements: the service
// behind a [Backend] runs the model, and the runner in package core runs
// the tools. Application code does not use this package; it uses package
// core and opens a backend through package adapter. Backend authors
// implement [Backend] and test it with the conformance suite (package
// conformance).
package driver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strconv"
	"strings"

	"github.com/toolrelay/toolrelay/errcode"
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
	ErrorCode(err error) errcode.Code

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

// A Keeper is a backend that deletes, on Close, what it created on the
// service (sessions, conversations, an agent), but can keep one thread, and
// what the thread needs to go on, past Close. The runner calls KeepThread
// when a run pauses awaiting a person's decision, which a later process may
// take up.
type Keeper interface {
	KeepThread(thread string)
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
	// InputImages: a run's input may carry images (PartImage), by URL
	// or as data.
	InputImages bool
	// InputFiles: a run's input may carry files (PartFile).
	InputFiles bool
	// ServiceApprovals: the backend hands the service's own approval
	// requests over as calls of kind ServiceApproval, and sends the
	// decisions back.
	ServiceApprovals bool
	// LocalThreads: a thread lives in the backend that started it (the
	// service stores nothing of it), so another process cannot resume it.
	LocalThreads bool
	// ResponseFormat: a run may ask for an answer of a JSON schema
	// (StartRequest.Format).
	ResponseFormat bool
	// LostAnswersRerun: a request whose answer was lost before the
	// service named what it made (the connection dropped) cannot be found
	// again, so a resume sends it again and the model answers that step a
	// second time: a chain of responses on a service that lists none, or
	// a thread the service does not store. Other backends find what a lost
	// request produced (a session's state, a conversation's items, a
	// listing of responses) and the model answers each step once.
	LostAnswersRerun bool
	// Streams: the backend reads the service's stream and hands the
	// model's text and reasoning over as they arrive (see [Observer]);
	// otherwise it gives each message whole, and no reasoning.
	Streams bool
	// OAuthConsent: the service may ask a person to sign in to a tool's
	// server (OAuth consent) before it runs the tool, and the backend
	// hands the request over as a call of kind ServiceApproval whose
	// arguments carry the link to sign in at; approved once the person
	// signed in, the service is asked to go on.
	OAuthConsent bool
	// Namespaces: the service groups functions in namespaces. The
	// backend offers the tools named "ns.name" as function name of
	// namespace ns, and names a call of function name in namespace ns
	// "ns.name" (see core.NewTool).
	Namespaces bool
}

// Format asks the model for an answer that is a JSON document of Schema
// (on the Responses API, text.format of type json_schema).
type Format struct {
	// Name names the format.
	Name string
	// Schema is the answer's JSON Schema.
	Schema json.RawMessage
	// Strict asks the service to keep to the schema exactly.
	Strict bool
}

// StartRequest is the input of [Backend.Start].
type StartRequest struct {
	// Thread names the thread to continue; "" starts a new one.
	Thread string
	// Input is the user's message.
	Input string
	// Parts are images and files sent with Input, after it, in the same
	// message. A backend refuses, with an InvalidArgument error and before
	// sending anything, a kind of part its service cannot carry (see
	// [Capabilities]).
	Parts []Part
	// Format, if set, asks for an answer of a JSON schema. A backend that
	// cannot set one refuses, with an InvalidArgument error and before
	// sending anything.
	Format *Format
	// Created, if set, is called with a new thread's identity as soon as
	// the thread exists on the service, before the backend waits for the
	// turn's first step, so that the runner can record the run while the
	// model works (a worker that dies meanwhile leaves a run another can
	// take over). A backend that learns the thread only with the step may
	// not call it. A backend whose every response is a thread (a chain of
	// responses) calls it with the new response, continuing Thread too.
	Created func(thread string)
}

// SubmitRequest is the input of [Backend.Submit].
type SubmitRequest struct {
	// Step is the step whose calls are answered.
	Step *Step
	// Results holds one result per call of Step, in call order.
	Results []ToolResult
	// Format is the run's format, as in [StartRequest].
	Format *Format
	// Moved, if set, is called by a backend whose thread moves on with
	// each response (a chain of responses) with the next thread, as soon
	// as the service names it and before the response is complete: a run
	// that stops after that (its context ended, or the answer was lost)
	// is resumed from that thread, which holds what the request produced,
	// rather than by sending the results again (which would make the model
	// answer twice).
	Moved func(thread string)
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
	// Model names the model that made the step: as the service reported
	// it, or else as the backend asked for it (its agent's); "" when
	// neither is known. It is for telemetry (gen_ai.request.model).
	Model string
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
	// Name is the function's name; for a function of a namespace (see
	// Capabilities.Namespaces), the namespace's name, a dot and the
	// function's, as in "crm.lookup".
	Name string
	// Arguments holds the arguments as received: a JSON object, a JSON
	// string holding one, or empty.
	Arguments json.RawMessage
	// Kind is FunctionCall (the zero value) for a call of a tool of the
	// toolbox, or ServiceApproval for the service asking a person to
	// approve something it runs itself (such as a call of an MCP server's
	// tool), which no handler answers: a person decides it, and the
	// backend sends the decision as its service expects. Name and
	// Arguments then describe what is to be approved.
	Kind CallKind
}

// CheckCalls reports what makes the calls of a step unanswerable: a call
// without a call id, or a call id the step repeats. A runner checks a
// step's calls with it before it runs any.
func CheckCalls(calls []Call) error {
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

// CallKind says what a [Call] asks for.
type CallKind string

// The kinds of call.
const (
	FunctionCall    CallKind = ""
	ServiceApproval CallKind = "service_approval"
)

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

// TurnError reports a turn the service ended without an answer: it failed,
// was cancelled or left incomplete, or its stream carried an error event.
// Both built-in backends return it; Code and Message are the service's,
// and each backend's ErrorCode maps Code to an [errcode.Code].
type TurnError struct {
	// Backend names the backend ("openai", "foundry", "responses").
	Backend string
	// Thread is the thread of the turn (a session id, a conversation id,
	// or the previous response id).
	Thread string
	// Turn is the service's turn: a turn id, or a response id ("" for an
	// error event before a response was made).
	Turn string
	// Status is the turn's status: "failed", "cancelled", "incomplete",
	// or "error" for an error event.
	Status string
	// Code and Message are the service's error, if it gave one (for an
	// incomplete response, Code is the reason, such as
	// "max_output_tokens").
	Code, Message string
}

// Error returns "<backend>: turn <turn> <status> (thread <thread>): <code>:
// <message>", leaving out what is empty.
func (e *TurnError) Error() string {
	var b strings.Builder
	b.WriteString(e.Backend + ": turn ")
	if e.Turn != "" {
		b.WriteString(e.Turn + " ")
	}
	b.WriteString(e.Status)
	if e.Thread != "" {
		b.WriteString(" (thread " + e.Thread + ")")
	}
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// ErrBudgetExceeded is matched (with errors.Is) by the error of a run
// stopped on its budget (core.Budget), and by a [TurnError] the service
// ended on a spending limit of a session or a turn (code budget_reached
// or session_budget_exceeded). core.ErrBudgetExceeded is this error.
var ErrBudgetExceeded = errors.New("the run's budget is exceeded")

// Is reports whether the turn ended on the service's budget for it, when
// target is ErrBudgetExceeded.
func (e *TurnError) Is(target error) bool {
	return target == ErrBudgetExceeded && (e.Code == "budget_reached" || e.Code == "session_budget_exceeded")
}

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
	// Conflict: the journal holds the call with different arguments, or
	// damaged (finished, without its result).
	Conflict
	// TooLarge: the call's arguments or its output passed the runner's
	// size limit (see [Options.MaxArgumentBytes], [Options.MaxOutputBytes]).
	TooLarge
	// Denied: a person denied the call (or gave no decision in time).
	Denied
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
	Denied:           "denied",
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

// Output is what a call returns to the model: text, a content array, or
// nothing. Backends read it to build their protocol's result.
type Output struct {
	// Text is the output as a string: a string result as it was returned,
	// anything else serialised as JSON. It is empty when Parts or Null is set.
	Text string `json:"text,omitempty"`
	// Parts holds a content array, when the handler returned [Content].
	Parts []Part `json:"parts,omitempty"`
	// Null is set when the handler returned nil.
	Null bool `json:"null,omitempty"`
}

// String returns the output as a single string, for protocols that accept
// only strings: Text; "null" for a nil result; for a content array, the text
// parts joined by newlines when all parts are text, else the parts as a JSON
// array of input content items.
func (o Output) String() string {
	switch {
	case o.Null:
		return "null"
	case o.Parts == nil:
		return o.Text
	}
	texts := make([]string, 0, len(o.Parts))
	for _, p := range o.Parts {
		if p.Type != PartText {
			b, _ := json.Marshal(o.Parts)
			return string(b)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// PartType names the kind of a content Part.
type PartType string

// The kinds of content part.
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
	PartFile  PartType = "file"
)

// A Part is one element of a content array: text, an image or a file.
// It marshals to JSON in the OpenAI input-content shape both supported
// services read ({"type":"input_text","text":…}, "input_image",
// "input_file").
type Part struct {
	// Type is the kind of part.
	Type PartType
	// Text is the text of a text part.
	Text string
	// URL is an image's or file's URL (which may be a data: URL).
	URL string
	// FileID names a file uploaded to the service.
	FileID string
	// Filename names a file part.
	Filename string
	// Data holds a file's content as the wire's file_data carries it: a
	// data: URL holding its bytes in base64 (see [FileData]).
	Data string
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// ImagePart returns an image part for an image URL (https: or data:).
func ImagePart(url string) Part { return Part{Type: PartImage, URL: url} }

// FilePart returns a file part naming a file uploaded to the service.
func FilePart(fileID string) Part { return Part{Type: PartFile, FileID: fileID} }

// ImageData returns an image part holding the image itself, of media type
// mediaType (such as "image/png"), as a data: URL.
func ImageData(mediaType string, data []byte) Part {
	return ImagePart("data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data))
}

// FileData returns a file part holding the file itself, its media type
// guessed from the file name's extension (application/octet-stream when
// it tells none).
func FileData(filename string, data []byte) Part {
	mt := mime.TypeByExtension(path.Ext(filename))
	if mt == "" {
		mt = "application/octet-stream"
	}
	return Part{Type: PartFile, Filename: filename, Data: "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(data)}
}

// Check reports what makes p unusable as input: an unknown kind, an image
// with neither a URL nor a file id, a file with none of a file id, a URL
// or data (or data without a file name), a text part without text.
func (p Part) Check() error {
	switch p.Type {
	case PartText:
		if p.Text == "" {
			return errors.New("a text part without text")
		}
	case PartImage:
		if p.URL == "" && p.FileID == "" {
			return errors.New("an image part needs a URL (https: or data:) or a file id")
		}
	case PartFile:
		switch {
		case p.FileID == "" && p.URL == "" && p.Data == "":
			return errors.New("a file part needs a file id, a URL or the file's data")
		case p.Data != "" && p.Filename == "":
			return errors.New("a file part with data needs a file name")
		}
	default:
		return fmt.Errorf("unknown kind of part %q", p.Type)
	}
	return nil
}

// CheckParts reports what makes the parts of a run's input unusable (see
// [Part.Check]), naming the first such part by its index. A runner checks
// them with it before it sends anything.
func CheckParts(parts []Part) error {
	for i, p := range parts {
		if err := p.Check(); err != nil {
			return fmt.Errorf("input part %d: %w", i, err)
		}
	}
	return nil
}

// FileURL returns a file part for a file at a URL.
func FileURL(url string) Part { return Part{Type: PartFile, URL: url} }

// Content is a content array. A handler returns one to send its output as
// an array of parts, where the backend accepts arrays; elsewhere it is sent
// as [Output.String] renders it.
type Content []Part

type partJSON struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
}

// MarshalJSON encodes the part as an OpenAI input-content item.
func (p Part) MarshalJSON() ([]byte, error) {
	j := partJSON{Type: "input_" + string(p.Type), Text: p.Text, FileID: p.FileID, Filename: p.Filename, FileData: p.Data}
	switch p.Type {
	case PartImage:
		j.ImageURL = p.URL
	case PartFile:
		j.FileURL = p.URL
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes an OpenAI input-content item.
func (p *Part) UnmarshalJSON(b []byte) error {
	var j partJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Part{Type: PartType(strings.TrimPrefix(j.Type, "input_")), Text: j.Text, URL: j.ImageURL + j.FileURL, FileID: j.FileID, Filename: j.Filename, Data: j.FileData}
	return nil
}
