package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolrelay/toolrelay/errcode"
)

// ErrMaxSteps is matched (with [errors.Is]) by the error a run returns when
// it reaches its step limit. Its code is ResourceExhausted.
var ErrMaxSteps = errors.New("core: maximum number of steps reached")

// ErrThreadBusy is matched (with [errors.Is]) by the error a run with
// [RunOptions.NoWait] returns, before anything is sent, when another run
// works on its thread: in this runner, or in any process sharing the
// journal. Its code is FailedPrecondition.
var ErrThreadBusy = errors.New("core: another run works on the thread")

// busyError returns the error of a run that found thread busy.
func busyError(thread string) error {
	return &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run", Err: fmt.Errorf("thread %s: %w", thread, ErrThreadBusy)}
}

// wrap returns err as an *errcode.Error with the given op. An error with a
// code keeps it, context errors get theirs, and other errors get the code
// the classifier gives.
func wrap(op string, err error, classify func(error) errcode.Code) error {
	if err == nil {
		return nil
	}
	code := errcode.Of(err)
	if code == errcode.Unknown && classify != nil {
		code = classify(err)
	}
	return &errcode.Error{Code: code, Op: op, Err: err}
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

// ctxError returns the error of a run whose context ended: its cause (the
// caller's, or the run's time limit), with the cause's code.
func ctxError(ctx context.Context) error {
	err := context.Cause(ctx)
	return &errcode.Error{Code: errcode.Of(err), Op: "core: run", Err: err}
}

// journalError returns the error of a journal operation that failed with
// err: the context's (see ctxError) once the run's context has ended, else
// err with its code.
func journalError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	return &errcode.Error{Code: errcode.Of(err), Op: "core: journal", Err: err}
}
