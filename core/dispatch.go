package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

// prepareArgs validates arguments, in canonical form and parsed, against
// the schema, and returns them with its defaults applied. It changes obj.
func (t *Tool) prepareArgs(canon []byte, obj map[string]any) ([]byte, error) {
	v, err := floatNumbers(obj, "")
	if err != nil {
		return nil, err
	}
	inst := v.(map[string]any)
	if err := t.resolved.Validate(inst); err != nil {
		return nil, errors.New(validationMessage(err))
	}
	if t.defaults {
		if err := t.resolved.ApplyDefaults(&inst); err != nil {
			return nil, err
		}
		return json.Marshal(inst)
	}
	return canon, nil
}

type handlerReturn struct {
	v     any
	err   error
	panic any
	stack []byte
}

// invoke runs the handler with the call in its context, on one of w's
// goroutines, for at most timeout, and maps what it returns to a result.
func (t *Tool) invoke(ctx context.Context, w *workers, call *Call, args []byte, timeout time.Duration, lim outputLimit) (driver.Result, error) {
	tctx, cancel := context.WithTimeout(withCall(ctx, call), timeout)
	defer cancel()
	done := make(chan handlerReturn, 1)
	w.do(tctx, func() { done <- t.safeRun(tctx, args) })
	var ret handlerReturn
	select {
	case ret = <-done:
	case <-tctx.Done():
		if ctx.Err() == nil {
			// Past its time: the handler is left behind (the model is
			// told it timed out).
			ret = handlerReturn{err: tctx.Err()}
			break
		}
		// The run's context ended: a handler that watches its context
		// returns now; one that ignores it is left behind, and may still
		// take effect.
		grace := time.NewTimer(leaveGrace)
		select {
		case ret = <-done:
		case <-grace.C:
			ret = handlerReturn{err: fmt.Errorf("%w: %w", errLeftBehind, tctx.Err())}
		}
		grace.Stop()
	}
	if ret.err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		msg := fmt.Sprintf("tool %q timed out after %v", t.name, timeout)
		return failed(TimedOut, msg), fmt.Errorf("%s: %w", msg, ret.err)
	}
	switch {
	case ret.panic != nil:
		return failed(Panicked, genericFailure(t.name)), &panicError{Value: ret.panic, Stack: ret.stack}
	case ret.err != nil && ctx.Err() != nil:
		return failed(Interrupted, fmt.Sprintf("tool %q was interrupted", t.name)), ret.err
	case ret.err != nil:
		var me *ModelError
		var ae *argError
		switch {
		case errors.As(ret.err, &me):
			return failed(ToolError, me.Message), ret.err
		case errors.As(ret.err, &ae):
			return failed(InvalidArguments, fmt.Sprintf("invalid arguments for tool %q: %s", t.name, ae.msg)), ret.err
		}
		return failed(ToolError, genericFailure(t.name)), ret.err
	}
	out, err := encodeOutput(ret.v, lim)
	if err != nil {
		var tl *tooLargeError
		if errors.As(err, &tl) {
			return failed(TooLarge, tl.Error()), fmt.Errorf("tool %q: %w", t.name, tl)
		}
		return failed(ToolError, genericFailure(t.name)), fmt.Errorf("encode output of %q: %w", t.name, err)
	}
	return driver.Result{Output: out, Outcome: OK}, nil
}

// leaveGrace is how long a handler whose context ended has to return
// before it is left behind.
const leaveGrace = 100 * time.Millisecond

// errLeftBehind is in the cause of a call whose handler did not return
// when the run's context ended: it may still take effect, so the call is
// left started (a resume decides it as in doubt) rather than run again.
var errLeftBehind = errors.New("the handler did not return when its context ended")

// verify runs the tool's Verify hook for call, in a goroutine of its own
// and for at most timeout, as invoke runs a handler: a hook that panics, or
// that has not answered when its time is up or ctx ends, cannot tell (it
// returns an error).
func (t *Tool) verify(ctx context.Context, call *Call, timeout time.Duration) (v any, found bool, err error) {
	vctx, cancel := context.WithTimeout(withCall(ctx, call), timeout)
	defer cancel()
	type answer struct {
		v     any
		found bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: &panicError{Value: p, Stack: debug.Stack()}}
			}
		}()
		v, found, err := t.opts.Verify(vctx, *call)
		done <- answer{v, found, err}
	}()
	select {
	case a := <-done:
		return a.v, a.found, a.err
	case <-vctx.Done():
		return nil, false, fmt.Errorf("verify of %q did not answer: %w", t.name, context.Cause(vctx))
	}
}

func (t *Tool) safeRun(ctx context.Context, args []byte) (ret handlerReturn) {
	defer func() {
		if p := recover(); p != nil {
			ret = handlerReturn{panic: p, stack: debug.Stack()}
		}
	}()
	v, err := t.run(ctx, args)
	return handlerReturn{v: v, err: err}
}

func failed(o Outcome, msg string) driver.Result {
	return driver.Result{Failed: true, Error: msg, Outcome: o}
}

func genericFailure(name string) string {
	return fmt.Sprintf("tool %q failed", name)
}

// panicError is the internal error of a call whose handler panicked. It is
// reported in events and logs, never to the model.
type panicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error returns "panic: <value>".
func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
