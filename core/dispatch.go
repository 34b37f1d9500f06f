package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// execute runs one call: it finds the tool, normalises and validates the
// arguments, runs the handler (recovering a panic, bounding its time) and
// encodes its output. Every failure becomes a failed result; the returned
// error is the internal cause, for the operator only.
func (r *Runner) execute(ctx context.Context, c *callRun) (JournalResult, error) {
	call := c.call
	tool := r.tools.Lookup(call.Name)
	if tool == nil {
		msg := fmt.Sprintf("unknown tool %q", call.Name)
		if names := r.tools.Names(); len(names) > 0 {
			msg += "; available tools: " + strings.Join(names, ", ")
		}
		return failed(UnknownTool, msg), errors.New(msg)
	}
	var tl *tooLargeError
	if errors.As(c.argErr, &tl) {
		return failed(TooLarge, tl.Error()), tl
	}
	args, err := c.args, c.argErr
	if err == nil {
		args, err = tool.prepareArgs(args, c.obj)
	}
	if err != nil {
		msg := fmt.Sprintf("invalid arguments for tool %q: %v", tool.name, err)
		return failed(InvalidArguments, msg), errors.New(msg)
	}
	timeout := tool.opts.Timeout
	if timeout == 0 {
		timeout = r.opts.ToolTimeout
	}
	return tool.invoke(ctx, call, args, timeout, r.outputLimit(tool))
}

// outputLimit returns what the runner accepts of an output of tool (which
// may be nil).
func (r *Runner) outputLimit(tool *Tool) outputLimit {
	return outputLimit{max: r.opts.MaxOutputBytes, truncate: r.opts.TruncateOutput || (tool != nil && tool.opts.TruncateOutput)}
}

// prepareArgs validates arguments, in canonical form and parsed, against
// the schema, and returns them with its defaults applied. It changes obj.
func (t *Tool) prepareArgs(canon []byte, obj map[string]any) ([]byte, error) {
	inst := floatNumbers(obj).(map[string]any)
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

// invoke runs the handler with the call in its context, for at most
// timeout, and maps what it returns to a result.
func (t *Tool) invoke(ctx context.Context, call *Call, args []byte, timeout time.Duration, lim outputLimit) (JournalResult, error) {
	tctx, cancel := context.WithTimeout(withCall(ctx, call), timeout)
	defer cancel()
	done := make(chan handlerReturn, 1)
	go func() { done <- t.safeRun(tctx, args) }()
	var ret handlerReturn
	select {
	case ret = <-done:
	case <-tctx.Done():
		// The handler ignores its context; leave it behind.
		ret = handlerReturn{err: tctx.Err()}
	}
	if ret.err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		msg := fmt.Sprintf("tool %q timed out after %v", t.name, timeout)
		return failed(TimedOut, msg), fmt.Errorf("%s: %w", msg, ret.err)
	}
	switch {
	case ret.panic != nil:
		return failed(Panicked, genericFailure(t.name)), &PanicError{Value: ret.panic, Stack: ret.stack}
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
	return JournalResult{Output: out, Outcome: OK}, nil
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

func failed(o Outcome, msg string) JournalResult {
	return JournalResult{Failed: true, Error: msg, Outcome: o}
}

func genericFailure(name string) string {
	return fmt.Sprintf("tool %q failed", name)
}

// PanicError is the internal error of a call whose handler panicked. It is
// reported in events and logs, never to the model.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error returns "panic: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
