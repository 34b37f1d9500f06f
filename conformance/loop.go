package conformance

import (
	"context"
	"errors"
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
// A scenario that needs a faculty the loop lacks (a [Canceler], an
// [Approver], a [ProcessOpener]) is skipped, saying so; so is, on a
// [DurableLoop], one of a turn its caller ends or of core's journal,
// saying what the runner keeps instead.
func RunLoop(t *testing.T, newHarness HarnessMaker, newLoop LoopMaker) {
	t.Helper()
	run(t, newHarness, newLoop)
}

// coreLoop is core's Runner as a Loop.
type coreLoop struct{ *core.Runner }

func (l coreLoop) Stream(ctx context.Context, input string, opts *core.RunOptions) Stream {
	return l.Runner.Stream(ctx, input, opts)
}

// The optional faculties of a Loop, which the scenarios type-assert: core's
// Runner has each, and so does the Temporal runner's loop (in
// temporal/realtest). A loop's method may say, wrapping ErrLacking, what
// its runner cannot do yet. A scenario that needs a faculty the loop
// lacks is skipped, naming the interface.

// A Canceler is a Loop that abandons the turn of a thread, as
// core.Runner.Cancel does, returning once it ended. A turn it cannot
// abandon makes it fail with an error wrapping [ErrLacking].
type Canceler interface {
	Cancel(ctx context.Context, thread string) error
}

// An Approver is a Loop that lists the approvals of a thread's turn, as
// core.Runner.Approvals does.
type Approver interface {
	Approvals(ctx context.Context, thread string) ([]core.Approval, error)
}

// A ProcessOpener is a Loop that can open the same loop in a second
// process of the same program: over b (a backend the harness opened anew
// on its fake, see [Reopener]), tools and opts (whose Journal, for core's
// Runner, is the one the processes share), sharing nothing with the first
// but what the program's processes share (core's journal; the Temporal
// server and the task queue). The loop's Close closes b.
type ProcessOpener interface {
	OpenProcess(t *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (Loop, error)
}

// ErrLacking, wrapped in the error of a faculty's method (OpenProcess,
// Cancel), says that the runner lacks the faculty the scenario
// needs: the scenario is skipped with the error's text, which says why.
var ErrLacking = errors.New("the scenario cannot run on it")

// A DurableLoop is a Loop whose turns do not live in their caller: a turn
// goes on to its answer when its caller's context ends or its reader
// stops (Resume returns it), in a worker that reads the service's stream
// whatever its readers do, and keeps its results in its own history
// rather than core's journal. The scenarios of a turn its caller ends, or
// of a process that died with a result in core's journal, are skipped on
// it, saying what it keeps instead.
type DurableLoop interface {
	// Durable names the runner, as the skips say it ("the Temporal
	// runner").
	Durable() string
}

// OpenProcess opens core's Runner over b, sharing opts.Journal.
func (l coreLoop) OpenProcess(_ *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (Loop, error) {
	return coreLoop{core.NewRunner(b, tools, opts)}, nil
}

// canceler returns r's Canceler, or skips the scenario, which needs one.
func (e *env) canceler(r Loop) Canceler {
	e.t.Helper()
	return faculty[Canceler](e, r, "the runner cannot abandon a turn (conformance.Canceler)")
}

// approver returns r's Approver, or skips the scenario, which needs one.
func (e *env) approver(r Loop) Approver {
	e.t.Helper()
	return faculty[Approver](e, r, "the runner keeps no list of approvals (conformance.Approver)")
}

// processOpener returns r's ProcessOpener, or skips the scenario, which
// needs one.
func (e *env) processOpener(r Loop) ProcessOpener {
	e.t.Helper()
	return faculty[ProcessOpener](e, r, "the runner cannot be opened in a second process (conformance.ProcessOpener)")
}

// faculty returns r as an F, one of the faculties a loop may have, or
// skips the scenario, which needs it, saying lacks.
func faculty[F any](e *env, r Loop, lacks string) F {
	e.t.Helper()
	f, ok := r.(F)
	if !ok {
		e.t.Skip(lacks)
	}
	return f
}

// skipLacking skips the scenario when err says the runner lacks what it
// needs (ErrLacking).
func (e *env) skipLacking(err error) {
	e.t.Helper()
	if errors.Is(err, ErrLacking) {
		e.t.Skip(err)
	}
}

// notDurable skips the scenario on a DurableLoop, which lacks what it
// needs: lacks says what the runner does instead.
func (e *env) notDurable(r Loop, lacks string) {
	e.t.Helper()
	if d, ok := r.(DurableLoop); ok {
		e.t.Skipf("%s %s", d.Durable(), lacks)
	}
}
