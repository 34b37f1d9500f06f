package core

import (
	"context"
	"errors"
	"fmt"
)

// A Code classifies an error. Every backend maps the errors of its service
// onto these codes, so a program can handle them the same way whichever
// backend it runs on. Use [CodeOf] to read the code of an error and
// [errors.Is] with the Err* sentinels to test for one.
type Code int

// The error codes. Their meanings follow gRPC's codes of the same names.
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
)

var codeNames = [...]string{
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
}

// String returns the name of the code, such as "NotFound".
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Sentinel errors, one per code, for use with [errors.Is]:
//
//	if errors.Is(err, core.ErrPermissionDenied) { ... }
//
// Every *[Error] matches the sentinel of its code.
var (
	ErrUnknown            error = &Error{Code: Unknown}
	ErrInvalidArgument    error = &Error{Code: InvalidArgument}
	ErrNotFound           error = &Error{Code: NotFound}
	ErrPermissionDenied   error = &Error{Code: PermissionDenied}
	ErrResourceExhausted  error = &Error{Code: ResourceExhausted}
	ErrFailedPrecondition error = &Error{Code: FailedPrecondition}
	ErrUnimplemented      error = &Error{Code: Unimplemented}
	ErrCanceled           error = &Error{Code: Canceled}
	ErrDeadlineExceeded   error = &Error{Code: DeadlineExceeded}
	ErrInternal           error = &Error{Code: Internal}
	ErrUnavailable        error = &Error{Code: Unavailable}
)

// ErrMaxSteps is matched (with [errors.Is]) by the error a run returns when
// it reaches its step limit. Its code is ResourceExhausted.
var ErrMaxSteps = errors.New("core: maximum number of steps reached")

// Error is the error type returned by the portable API. It carries a Code,
// what was being done, and the underlying error, which stays reachable with
// [errors.As] (for example a *openai.Error or a *azcore.ResponseError).
type Error struct {
	// Code classifies the error.
	Code Code
	// Op says what failed, such as "openai: submit results".
	Op string
	// Err is the underlying error; it may be nil.
	Err error
}

// Error returns "op: err (Code)".
func (e *Error) Error() string {
	switch {
	case e.Op == "" && e.Err == nil:
		return "core: " + e.Code.String()
	case e.Err == nil:
		return fmt.Sprintf("%s (%s)", e.Op, e.Code)
	case e.Op == "":
		return fmt.Sprintf("%v (%s)", e.Err, e.Code)
	}
	return fmt.Sprintf("%s: %v (%s)", e.Op, e.Err, e.Code)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's code (see ErrNotFound
// and the others).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Err == nil && t.Code == e.Code
}

// CodeOf returns the code of err: the Code of the outermost *[Error] in its
// chain; Canceled or DeadlineExceeded for the context errors; Unknown
// otherwise, and for a nil error.
func CodeOf(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return Unknown
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Unknown
}

// Errorf returns an *[Error] with the given code whose underlying error is
// fmt.Errorf(format, args...). Backends use it for errors they make themselves.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// wrap returns err as an *Error with the given op. An *Error keeps its code;
// context errors get theirs; other errors get the code the classifier gives.
func wrap(op string, err error, classify func(error) Code) error {
	if err == nil {
		return nil
	}
	code := Unknown
	var e *Error
	switch {
	case errors.As(err, &e):
		code = e.Code
	case errors.Is(err, context.Canceled):
		code = Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = DeadlineExceeded
	case classify != nil:
		code = classify(err)
	}
	return &Error{Code: code, Op: op, Err: err}
}

// ModelError is an error whose text is meant for the model. A tool handler
// returns one (see [ModelErrorf]) when the model should read why the call
// failed, for instance to correct its arguments. The text of any other error
// a handler returns is kept from the model, which is told only that the tool
// failed; the error itself goes to the logger and the events.
type ModelError struct {
	// Message is what the model is told.
	Message string
	// Err, if set, is the underlying error, for the operator.
	Err error
}

// ModelErrorf returns a *[ModelError] whose message is
// fmt.Sprintf(format, args...).
func ModelErrorf(format string, args ...any) error {
	return &ModelError{Message: fmt.Sprintf(format, args...)}
}

// Error returns the message.
func (e *ModelError) Error() string { return e.Message }

// Unwrap returns the underlying error.
func (e *ModelError) Unwrap() error { return e.Err }
