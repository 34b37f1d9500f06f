package foundrytest

import (
	"net/http"
	"strconv"
	"time"
)

// An Op names an operation of the fake, for [Server.InjectFault] and in
// [Request].
type Op string

// The operations the fake serves.
const (
	OpCreateAgent        Op = "agents.create"
	OpGetAgent           Op = "agents.get"
	OpDeleteAgent        Op = "agents.delete"
	OpCreateAgentVersion Op = "agents.versions.create"
	OpGetAgentVersion    Op = "agents.versions.get"
	OpDeleteAgentVersion Op = "agents.versions.delete"
	OpCreateConversation Op = "conversations.create"
	OpGetConversation    Op = "conversations.get"
	OpDeleteConversation Op = "conversations.delete"
	OpCreateItems        Op = "conversations.items.create"
	OpListItems          Op = "conversations.items.list"
	OpCreateResponse     Op = "responses.create"
	OpGetResponse        Op = "responses.get"
	OpDeleteResponse     Op = "responses.delete"
	OpListAgents         Op = "agents.list"
	OpUpdateAgent        Op = "agents.update"
	OpListAgentVersions  Op = "agents.versions.list"
	OpUpdateConversation Op = "conversations.update"
	OpListInputItems     Op = "responses.input_items.list"
	OpListModels         Op = "models.list"
	opUnknown            Op = ""
)

// Ops returns the operations the fake serves, for programs that check an
// operation's name before they inject a fault on it.
func Ops() []Op {
	return []Op{OpCreateAgent, OpGetAgent, OpDeleteAgent, OpCreateAgentVersion, OpGetAgentVersion, OpDeleteAgentVersion,
		OpCreateConversation, OpGetConversation, OpDeleteConversation, OpCreateItems, OpListItems, OpCreateResponse,
		OpGetResponse, OpDeleteResponse, OpListAgents, OpUpdateAgent, OpListAgentVersions, OpUpdateConversation,
		OpListInputItems, OpListModels}
}

// A Fault is what the fake does instead of (or after) serving one request.
// Exactly one of Status, Drop, Failed, ErrorEvent and CutText should be
// set.
type Fault struct {
	// Status, if set, answers the request with this HTTP status and an
	// error body (Code and Message, or defaults for the status), without
	// serving it. 429 and 5xx answers carry retry-after-ms and retry-after
	// headers from RetryAfter.
	Status int
	// Code and Message are the error's code and message (Status, Failed,
	// ErrorEvent).
	Code, Message string
	// RetryAfter is the delay the answer asks for (Status 429 or 5xx). Zero
	// means one millisecond, so clients retry at once.
	RetryAfter time.Duration
	// NoRetryAfter leaves the retry-after headers out, as the service
	// sometimes does.
	NoRetryAfter bool
	// Drop serves the request, then drops the connection without an
	// answer: the response is lost although the service acted on it.
	Drop bool
	// Failed answers responses.create with a response whose status is
	// "failed" (a response.failed event when streaming), without playing
	// the model or taking the request's input.
	Failed bool
	// ErrorEvent answers a streaming responses.create with an "error"
	// event after response.created, without playing the model; a
	// non-streaming request gets a 500 instead.
	ErrorEvent bool
	// CutText serves a streaming responses.create (or a stream resumed
	// with GET responses/{id}), then drops the connection after that many
	// text deltas (response.output_text.delta): the stream ends mid-text
	// although the response is complete. Requests that do not stream
	// are served as if there were no fault.
	CutText int
	// Delay holds the request this long before handling it (the client's
	// canceling the request ends the wait).
	Delay time.Duration
	// Duplicate serves a streaming request with every event written
	// twice (the same sequence number each time), as a service that
	// delivers an event again does. Requests that do not stream are
	// served as if there were no fault.
	Duplicate bool
}

// apiError returns the error answer of a Status fault.
func (f *Fault) apiError() *apiError {
	e := &apiError{Status: f.Status, Code: f.Code, Message: f.Message}
	switch {
	case f.Status == http.StatusTooManyRequests:
		e.Type = "rate_limit_error"
		if e.Code == "" {
			e.Code = "rate_limit_exceeded"
		}
		if e.Message == "" {
			e.Message = "Rate limit is exceeded. Try again shortly."
		}
	case f.Status == http.StatusUnauthorized:
		e.Type = "authentication_error"
		if e.Code == "" {
			e.Code = "PermissionDenied"
		}
	case f.Status >= 500:
		e.Type = "server_error"
		if e.Code == "" {
			e.Code = "server_error"
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(f.Status)
	}
	return e
}

// setRetryAfter sets the retry headers of a 429 or 5xx fault answer.
func (f *Fault) setRetryAfter(h http.Header) {
	if f.NoRetryAfter || (f.Status != http.StatusTooManyRequests && f.Status < 500) {
		return
	}
	d := f.RetryAfter
	if d <= 0 {
		d = time.Millisecond
	}
	h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
	h.Set("retry-after", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
}
