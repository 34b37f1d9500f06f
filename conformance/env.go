package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// env is what a scenario works with: the test, the harness, and the backend
// once made.
type env struct {
	t       *testing.T
	h       Harness
	b       driver.Backend
	caps    driver.Capabilities
	tools   *core.Toolbox // the last runner's
	newLoop LoopMaker     // nil: core's Runner
	// newHarness makes the scenario's harness: a scenario of two agents
	// makes a second one, for the child's fake (see agent.go).
	newHarness HarnessMaker
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runner makes the backend for script and returns a runner over it.
func (e *env) runner(script *coretest.Script, opts *core.Options, tools ...*core.Tool) Loop {
	e.t.Helper()
	r, err := e.tryRunner(script, opts, tools...)
	if err != nil {
		e.t.Fatalf("MakeBackend: %v", err)
	}
	return r
}

func (e *env) tryRunner(script *coretest.Script, opts *core.Options, tools ...*core.Tool) (Loop, error) {
	e.t.Helper()
	r, _, err := e.tryRunnerTools(script, opts, tools...)
	return r, err
}

// runnerTools is runner, also returning the toolbox of tools the runner
// got (for a second process of the same program).
func (e *env) runnerTools(script *coretest.Script, opts *core.Options, tools ...*core.Tool) (Loop, *core.Toolbox) {
	e.t.Helper()
	r, tb, err := e.tryRunnerTools(script, opts, tools...)
	if err != nil {
		e.t.Fatalf("MakeBackend: %v", err)
	}
	return r, tb
}

func (e *env) tryRunnerTools(script *coretest.Script, opts *core.Options, tools ...*core.Tool) (Loop, *core.Toolbox, error) {
	e.t.Helper()
	if err := script.Check(); err != nil {
		e.t.Fatalf("bad script: %v", err)
	}
	tb, err := core.NewToolbox(tools...)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.runnerOn(script, opts, tb)
	return r, tb, err
}

// runnerOn makes the backend for script and tb, and returns a runner over
// them.
func (e *env) runnerOn(script *coretest.Script, opts *core.Options, tb *core.Toolbox) (Loop, error) {
	e.t.Helper()
	b, err := e.h.MakeBackend(e.t.Context(), script, tb)
	if err != nil {
		return nil, err
	}
	e.b, e.tools = b, tb
	if cr, ok := b.(driver.CapabilityReporter); ok {
		e.caps = cr.Capabilities()
	}
	o := core.Options{Logger: quiet}
	if opts != nil {
		o = *opts
		if o.Logger == nil {
			o.Logger = quiet
		}
	}
	var r Loop = coreLoop{core.NewRunner(b, tb, &o)}
	if e.newLoop != nil {
		if r, err = e.newLoop(e.t, b, tb, &o); err != nil {
			e.t.Fatalf("making the loop: %v", err)
		}
	}
	e.t.Cleanup(func() {
		if err := r.Close(); err != nil {
			e.t.Errorf("Close: %v", err)
		}
	})
	return r, nil
}

// inject injects f or skips the scenario.
func (e *env) inject(f Fault) {
	e.t.Helper()
	if !e.h.Inject(f) {
		e.t.Skipf("the fake cannot inject a %s fault", f.Kind)
	}
}

// run runs input on r and fails the test on error.
func (e *env) run(r Loop, input string, opts *core.RunOptions) *core.Result {
	e.t.Helper()
	res, err := r.Run(e.t.Context(), input, opts)
	if err != nil {
		e.t.Fatalf("Run(%q): %v", input, err)
	}
	return res
}

// results returns the results the fake received, in order.
func (e *env) results() []coretest.Delivered {
	var out []coretest.Delivered
	for _, r := range e.h.Received() {
		if r.Kind == "results" {
			out = append(out, r.Results...)
		}
	}
	return out
}

// kinds returns the kinds of what the fake received, in order.
func (e *env) kinds() []string {
	var out []string
	for _, r := range e.h.Received() {
		out = append(out, r.Kind)
	}
	return out
}

// wantText checks the run's final answer.
func (e *env) wantText(res *core.Result, want string) {
	e.t.Helper()
	if res.Text != want {
		e.t.Errorf("final answer = %q, want %q", res.Text, want)
	}
}

// wantFailure checks that d is a failed result whose model-visible text
// contains msg, flagged as failed where the protocol has the flag.
func (e *env) wantFailure(d coretest.Delivered, msg string) {
	e.t.Helper()
	if !strings.Contains(d.Text(), msg) && !strings.Contains(d.Output, msg) {
		e.t.Errorf("result of %s = %+v, want a failure the model reads as %q", d.CallID, d, msg)
	}
	if e.caps.FailureFlag && !d.Failed {
		e.t.Errorf("result of %s is not flagged as failed: %+v", d.CallID, d)
	}
}

// wantCode checks err's code.
func (e *env) wantCode(err error, code errcode.Code) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("no error, want code %v", code)
	}
	if got := errcode.Of(err); got != code {
		e.t.Errorf("error %v has code %v, want %v", err, got, code)
	}
}

// tool makes a typed tool or fails the test.
func tool[In, Out any](e *env, name, desc string, fn func(context.Context, In) (Out, error), opts *core.ToolOptions) *core.Tool {
	e.t.Helper()
	t, err := core.NewTool(name, desc, fn, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

// counted wraps a handler with a run counter.
func counted[In, Out any](n *atomic.Int32, fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		n.Add(1)
		return fn(ctx, in)
	}
}

// script builds a one-turn script from steps.
func script(steps ...coretest.Step) *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: steps}}}
}

// calls is a step calling the given tools with the given argument objects
// (name, args, name, args, …).
func calls(pairs ...string) coretest.Step {
	var st coretest.Step
	for i := 0; i+1 < len(pairs); i += 2 {
		st.Calls = append(st.Calls, coretest.Call{Name: pairs[i], Arguments: json.RawMessage(pairs[i+1])})
	}
	return st
}

func answer(text string) coretest.Step { return coretest.Step{Text: text} }

func quote(s string) string { return fmt.Sprintf("%q", s) }
