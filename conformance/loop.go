package conformance

import (
	"context"
	"iter"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// A Loop runs the tool loop for the scenarios: core's [core.Runner], or
// another runner of the same loop over the same backend and tools, such
// as the Temporal workflow of module toolrelay/temporal, which
// [RunLoop] puts through the suite.
type Loop interface {
	Run(ctx context.Context, input string, opts *core.RunOptions) (*core.Result, error)
	Resume(ctx context.Context, thread string, opts *core.RunOptions) (*core.Result, error)
	Decide(ctx context.Context, thread, callID string, d core.Decision) error
	// Stream runs input as Run does, its events read as they happen.
	Stream(ctx context.Context, input string, opts *core.RunOptions) Stream
	Close() error
}

// A Stream is a streamed run, as [core.Stream] is.
type Stream interface {
	Events() iter.Seq2[core.Event, error]
	Result() (*core.Result, error)
}

// LoopMaker makes the loop a scenario runs, over b (made by the harness)
// with tools and opts (which the scenario sets, its Logger quiet). The
// loop's Close closes b.
type LoopMaker func(t *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (Loop, error)

// RunLoop runs every scenario as [Run] does, on the loops newLoop makes.
// A scenario that needs core's Runner itself (its journal, its sweep of
// expired approvals, a run that ends with its caller) is skipped, saying
// so.
func RunLoop(t *testing.T, newHarness HarnessMaker, newLoop LoopMaker) {
	t.Helper()
	run(t, newHarness, newLoop)
}

// coreLoop is core's Runner as a Loop.
type coreLoop struct{ *core.Runner }

func (l coreLoop) Stream(ctx context.Context, input string, opts *core.RunOptions) Stream {
	return l.Runner.Stream(ctx, input, opts)
}

// coreRunner returns the core Runner r is, or skips the scenario, which
// needs one: why says what for.
func (e *env) coreRunner(r Loop, why string) *core.Runner {
	e.t.Helper()
	c, ok := r.(coreLoop)
	if !ok {
		e.t.Skipf("the scenario needs core's Runner: %s", why)
	}
	return c.Runner
}
