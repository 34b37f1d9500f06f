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
// backend. The scenarios that need core's own Runner are skipped, saying
// why (see conformance.RunLoop).
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
	for _, m := range makers {
		t.Run(m.name, func(t *testing.T) { conformance.RunLoop(t, m.h, temporalLoop) })
	}
}

// temporalLoop is the conformance suite's loop on Temporal: a worker in
// this process over core's executor on b, and the Temporal runner.
func temporalLoop(t *testing.T, b driver.Backend, tools *core.Toolbox, opts *core.Options) (conformance.Loop, error) {
	c := dial(t)
	queue := newQueue(t)
	r := core.NewRunner(b, tools, opts)
	w := startWorker(t, c, queue, r)
	set := fastSettings(opts)
	if opts.RunTimeout == 0 {
		set.RunTimeout = time.Minute
	}
	return &loop{Runner: temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Settings: set}), stop: func() error { w.Stop(); return r.Close() }}, nil
}

type loop struct {
	*temporal.Runner
	stop func() error
}

func (l *loop) Stream(ctx context.Context, input string, opts *core.RunOptions) conformance.Stream {
	return l.Runner.Stream(ctx, input, opts)
}

func (l *loop) Close() error { return l.stop() }
