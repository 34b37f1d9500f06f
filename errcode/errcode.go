// Package errcode classifies the errors of toolrelay. Every backend maps the
// errors of its service onto the same few codes, so a program handles them
// the same way whichever backend it runs on:
//
//	if errors.Is(err, errcode.NotFound) { ... }
//	switch errcode.Of(err) { case errcode.Unavailable, errcode.ResourceExhausted: retry() }
//
// A [Code] is itself an error, so it can be returned or wrapped as is; an
// [*Error] adds what was being done and the underlying error.
//
// # The table
//
// Every package of the module gives the same situation the same code:
//
//	Code                Situation
//	InvalidArgument     malformed input, options, settings or URL; HTTP 400, 422
//	NotFound            no such thread, agent, call, approval or database; HTTP 404
//	PermissionDenied    a credential refused or missing a right: HTTP 401, 403; a
//	                    token the credential could not get; a redirect to another
//	                    origin refused (on every HTTP client: openai-go's, azcore's);
//	                    a database role without the privilege (SQLSTATE 42501, at
//	                    open or at any later write); a journal file not writable
//	ResourceExhausted   a rate limit or quota (HTTP 429), the step limit, a
//	                    response or event of the service past its size limit, a
//	                    full disk, a database out of resources (SQLSTATE 53)
//	FailedPrecondition  the state refuses the request: a run awaiting approval, a call
//	                    decided before, no API key where the service needs one, a
//	                    journal whose tables are of another version or shape (a
//	                    table dropped, or made by another program: refused at open,
//	                    naming it), a journal file locked by another process past
//	                    its busy timeout; HTTP 409
//	Unimplemented       a backend or journal not linked into the program, a
//	                    capability the service lacks; HTTP 501
//	Canceled            the caller's context was canceled
//	DeadlineExceeded    a deadline, a run's time limit, a wait past IdleTimeout or
//	                    MaxSilence; HTTP 408
//	Internal            the service or the library broke an invariant; other HTTP 5xx
//	Unavailable         HTTP 502, 503, 504; a database shutting down or a connection
//	                    lost mid-operation (SQLSTATE 08, 57P): retrying later may succeed
//	DataLoss            stored data damaged: a journal entry finished without its result
//	Unknown             what no package classified (a network error before any answer)
package errcode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// A Code classifies an error. Its meanings follow gRPC's codes of the same
// names. A Code is an error: errors.Is(err, c) reports whether err's chain
// holds c or an [*Error] of code c.
type Code int

// The codes.
const (
	// Unknown is the code of an error no backend classified.
	Unknown Code = iota
	// InvalidArgument: the request was malformed (bad input, a bad tool definition).
	InvalidArgument
	// NotFound: a thread, agent or call the request named does not exist.
	NotFound
	// PermissionDenied: authentication or authorisation failed.
	PermissionDenied
	// ResourceExhausted: a rate limit, quota or step limit was reached.
	ResourceExhausted
	// FailedPrecondition: the service is not in a state that allows the request.
	FailedPrecondition
	// Unimplemented: the backend or service does not support the operation.
	Unimplemented
	// Canceled: the caller canceled the operation.
	Canceled
	// DeadlineExceeded: the operation ran past its deadline.
	DeadlineExceeded
	// Internal: the service or the library broke one of its own invariants.
	Internal
	// Unavailable: the service is unavailable (HTTP 502, 503, 504);
	// retrying later may succeed.
	Unavailable
	// DataLoss: stored data is lost or damaged (such as a journal entry
	// that says its call finished but holds no result); it cannot be
	// used, and retrying does not help.
	DataLoss
)

var names = [...]string{
	Unknown:            "Unknown",
	InvalidArgument:    "InvalidArgument",
	NotFound:           "NotFound",
	PermissionDenied:   "PermissionDenied",
	ResourceExhausted:  "ResourceExhausted",
	FailedPrecondition: "FailedPrecondition",
	Unimplemented:      "Unimplemented",
	Canceled:           "Canceled",
	DeadlineExceeded:   "DeadlineExceeded",
	Internal:           "Internal",
	Unavailable:        "Unavailable",
	DataLoss:           "DataLoss",
}

// String returns the name of the code, such as "NotFound".
func (c Code) String() string {
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error returns the name of the code, so that a Code can stand as an error.
func (c Code) Error() string { return c.String() }

// Error is an error with a code, what was being done, and the underlying
// error, which stays reachable with [errors.As] (for example a
// *openai.Error or a *azcore.ResponseError).
type Error struct {
	// Code classifies the error.
	Code Code
	// Op says what failed, such as "openai: submit results".
	Op string
	// Err is the underlying error; it may be nil.
	Err error
}

// Error returns "op: err (Code)", leaving out "(Code)" when err says it
// already (an *Error of the same code is in its chain).
func (e *Error) Error() string {
	var inner *Error
	said := errors.As(e.Err, &inner) && inner.Code == e.Code // the code is in the text already
	switch {
	case e.Op == "" && e.Err == nil:
		return e.Code.String()
	case e.Err == nil:
		return fmt.Sprintf("%s (%s)", e.Op, e.Code)
	case e.Op == "" && said:
		return e.Err.Error()
	case e.Op == "":
		return fmt.Sprintf("%v (%s)", e.Err, e.Code)
	case said:
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s: %v (%s)", e.Op, e.Err, e.Code)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Of returns the code of err: the code of the outermost [*Error] or [Code]
// in its chain; Canceled or DeadlineExceeded for the context errors; Unknown
// otherwise, and for a nil error.
func Of(err error) Code {
	for e := err; e != nil; {
		switch v := e.(type) {
		case *Error:
			return v.Code
		case Code:
			return v
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
			continue
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				if c := Of(x); c != Unknown {
					return c
				}
			}
		}
		break
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Unknown
}

// Errorf returns an [*Error] with the given code whose underlying error is
// fmt.Errorf(format, args...).
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// FromHTTPStatus returns the code of an HTTP error status: 400 and 422
// InvalidArgument, 401 and 403 PermissionDenied, 404 NotFound, 408
// DeadlineExceeded, 409 FailedPrecondition, 429 ResourceExhausted, 501
// Unimplemented, 502, 503 and 504 Unavailable, other 5xx Internal, and
// Unknown for the rest. Both backends classify their services' errors with it.
func FromHTTPStatus(status int) Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return InvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return PermissionDenied
	case http.StatusNotFound:
		return NotFound
	case http.StatusRequestTimeout:
		return DeadlineExceeded
	case http.StatusConflict:
		return FailedPrecondition
	case http.StatusTooManyRequests:
		return ResourceExhausted
	case http.StatusNotImplemented:
		return Unimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Unavailable
	}
	if status >= 500 && status < 600 {
		return Internal
	}
	return Unknown
}
