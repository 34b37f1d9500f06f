package realtest

import (
	"context"
	"testing"
	"time"

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
// short enough to run as one). The scenarios that need core's own Runner
// are skipped, saying why (see conformance.RunLoop).
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
func localSettings(s temporal.Settings, local bool) temporal.Settings {
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
		c := dial(t)
		queue := newQueue(t)
		r := core.NewRunner(b, tools, opts)
		w := startWorker(t, c, queue, r)
		set := localSettings(fastSettings(opts), local)
		if opts.RunTimeout == 0 {
			set.RunTimeout = time.Minute
		}
		return &loop{Runner: temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Settings: set}), stop: func() error { w.Stop(); return r.Close() }}, nil
	}
}

type loop struct {
	*temporal.Runner
	stop func() error
}

func (l *loop) Stream(ctx context.Context, input string, opts *core.RunOptions) conformance.Stream {
	return l.Runner.Stream(ctx, input, opts)
}

func (l *loop) Close() error { return l.stop() }
