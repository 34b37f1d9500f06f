package core

import (
	"context"
	"runtime/debug"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// A CallResult is a call's result as the model receives it: its Output, or,
// when Failed, the message Error. Outcome says how it came about.
type CallResult = journaldriver.Result

// A CallFunc produces the result of a call. The error is the internal
// cause of a failed result, for the operator (events, logs, traces); the
// model reads only the result.
type CallFunc func(ctx context.Context, call *Call) (CallResult, error)

// Middleware wraps the running of calls, as net/http middleware wraps a
// handler: it gets the next CallFunc of the chain and returns one that
// does its work around it (see [Options.Middleware] and
// [ToolOptions.Middleware]). The context it passes to next is the one the
// handler gets (with the call and the tool's timeout added). To refuse a
// call, or answer it from elsewhere (a cache), it returns a result of its
// own ([Failure], or an OK result) without calling next. It must not
// change the call.
//
// Middleware runs for the calls the runner runs: not for a result the
// journal already holds, nor for a call a person denied or left
// undecided. A middleware that panics fails the call (outcome Panicked),
// as a handler that panics does.
type Middleware func(next CallFunc) CallFunc

// Failure returns a failed result with outcome o that tells the model msg:
// what a middleware returns to refuse a call (for instance
// Failure(Denied, "not allowed for this user")).
func Failure(o Outcome, msg string) CallResult { return failed(o, msg) }

// Chain returns the middleware that applies mw in order, the first
// outermost.
func Chain(mw ...Middleware) Middleware {
	return func(next CallFunc) CallFunc {
		for i := len(mw) - 1; i >= 0; i-- {
			next = mw[i](next)
		}
		return next
	}
}

// runGuarded calls f, turning a panic into a failed result.
func runGuarded(ctx context.Context, f CallFunc, call *Call) (res CallResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = failed(Panicked, genericFailure(call.Name)), &panicError{Value: v, Stack: debug.Stack()}
		}
	}()
	res, err = f(ctx, call)
	// A result must say what the model reads: failed results carry a
	// message and an outcome other than OK.
	if res.Outcome != OK {
		res.Failed = true
	}
	if res.Failed && res.Outcome == OK {
		res.Outcome = ToolError
	}
	if res.Failed && res.Error == "" {
		res.Error = genericFailure(call.Name)
	}
	return res, err
}
