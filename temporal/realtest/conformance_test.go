package realtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/conformance/fakes"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	trresponses "github.com/toolrelay/toolrelay/responses"
	"github.com/toolrelay/toolrelay/temporal"
)

// TestConformance runs the shared suite through the Temporal runner, on a
// real server, on every backend's fake: the sessions backend (streaming
// and polling), Foundry (conversations and chains) and the Responses
// backend, in both modes (activities; local activities, with every call
// short enough to run as one). The loop is a Canceler, an Approver and a
// ProcessOpener (a second worker on the task queue is a second process);
// the scenarios a durable runner cannot hold (a turn its caller's context
// or its reader ends, a process that died with a result in core's journal,
// a reader that slows the service's stream) are skipped, saying what it
// does instead (see conformance.RunLoop).
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server's suite")
	}
	makers := []struct {
		name string
		h    conformance.HarnessMaker
	}{
		{"OpenAIStream", fakes.OpenAI(false)},
		{"OpenAIPoll", fakes.OpenAI(true)},
		{"FoundryConversationStream", fakes.Foundry(foundry.Conversation, false, true)},
		{"FoundryChain", fakes.Foundry(foundry.Chain, false, false)},
		{"ResponsesStream", fakes.Foundry(foundry.Chain, true, true)},
		{"ResponsesStateless", fakes.Foundry(trresponses.Stateless, true, false)},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			for _, m := range makers {
				t.Run(m.name, func(t *testing.T) { conformance.RunLoop(t, m.h, mode.loop) })
			}
		})
	}
}

// A mode is a way the Temporal runner runs the loop.
type mode struct {
	name string
	// local: LoopOptions.LocalActivities, every call short enough.
	local bool
	loop  conformance.LoopMaker
}

// modes are the two: every step and call an activity (the default), and
// local activities.
var modes = []mode{
	{"activities", false, temporalLoop(false)},
	{"local", true, temporalLoop(true)},
}

// localSettings sets the local-activity mode on s when local: every call
// of a tool whose time limit is at most a minute runs as a local
// activity.
func localSettings(s temporal.LoopOptions, local bool) temporal.LoopOptions {
	if local {
		s.LocalActivities, s.MaxLocalCall = true, time.Minute
	}
	return s
}

// localToolTimeout is the tools' time limit on the workers of the local
// mode's tests that run in other processes: short enough for a local
// activity (localSettings).
const localToolTimeout = 10 * time.Second

// temporalLoop returns the conformance suite's loop on Temporal: a worker
// in this process over core's executor on b, and the Temporal runner, in
// the local-activity mode if local.
func temporalLoop(local bool) conformance.LoopMaker {
	return func(t *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (conformance.Loop, error) {
		set := localSettings(fastSettings(opts), local)
		if opts.RunTimeout == 0 {
			set.RunTimeout = time.Minute
		}
		return openLoop(t, dial(t), newQueue(t), set, b, tools, opts), nil
	}
}

// openLoop starts a worker over core's executor on b, polling queue, and
// returns it with a Temporal runner on queue as the suite's loop.
func openLoop(t *testing.T, c client.Client, queue string, set temporal.LoopOptions, b driver.Backend, tools *core.Toolbox, opts *core.Options) *loop {
	r := core.NewRunner(b, tools, opts)
	// A second process's worker takes over from this one once it stopped
	// (see OpenProcess): the server offers the workflow's tasks and
	// queries to this one's sticky queue for a second, as to a child
	// worker's (see child_test.go), not the default 5 s (an Approvals
	// query after the stop passed the client's 10 s once in ten runs of
	// SeveralProcesses).
	w := startWorkerWith(t, c, queue, r, worker.Options{StickyScheduleToStartTimeout: time.Second})
	l := &loop{Runner: temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: set}), queue: queue, set: set}
	l.stopWorker = sync.OnceFunc(w.Stop)
	l.stop = func() error { l.stopWorker(); return r.Close() }
	return l
}

// loop is the Temporal runner as the suite's loop: a [conformance.Canceler]
// and [conformance.Approver] by the runner's own methods, a
// [conformance.ProcessOpener] (see OpenProcess) and a
// [conformance.DurableLoop].
type loop struct {
	*temporal.Runner
	queue      string
	set        temporal.LoopOptions
	stopWorker func()
	stop       func() error
	once       sync.Once
	err        error
}

func (l *loop) Stream(ctx context.Context, input string, opts *core.RunOptions) conformance.Stream {
	return l.Runner.Stream(ctx, input, opts)
}

// OpenProcess opens the loop as a second process of the program: a worker
// of its own over core's executor on b, polling the same task queue of the
// same server, with a client and a runner of its own on that queue. The
// suite opens a second process to take over from a first that closed, or
// died (LeftOnService/Takeover): a process that died polls no more, so the
// first's worker stops here, its backend left as it was (not closed, as a
// process that died does not close it). The turn paused in the first goes
// on in the second's worker, whose backend takes over the thread the
// first's kept (see temporal's activities).
func (l *loop) OpenProcess(t *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (conformance.Loop, error) {
	l.stopWorker()
	return openLoop(t, dial(t), l.queue, l.set, b, tools, opts), nil
}

// Durable names the runner for the suite's skips.
func (*loop) Durable() string { return "the Temporal runner" }

// Close stops the worker and closes core's runner (and so the backend),
// once: the suite closes a loop again when the test ends.
func (l *loop) Close() error {
	l.once.Do(func() { l.err = l.stop() })
	return l.err
}
