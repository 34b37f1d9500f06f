package realtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/temporal"
)

// run is one run of a benchmark's loop.
type runFunc func(ctx context.Context, input string) (*core.Result, error)

// loopNames are the loops a benchmark compares: core's runner; the
// Temporal runner with activities, and with local activities; and, as the
// floor of each, a bare workflow on the SDK that runs a no-op activity
// (or local activity) for each model step and each call of the same
// shape.
var loopNames = []string{"core", "temporal", "temporal-local", "bare", "bare-local"}

// loops returns the loops of loopNames (a worker in this process, on the
// test server) over one in-memory backend playing script with tools, each
// as a runFunc; the bare ones run shape (the calls of each step).
func loops(b *testing.B, script *coretest.Script, tools *core.Toolbox, shape []int) map[string]runFunc {
	be := coretest.NewBackend(script, nil)
	cr := core.NewRunner(be, tools, &core.Options{Logger: quiet})
	c := dial(b)
	queue := newQueue(b)
	w := startWorker(b, c, queue, core.NewRunner(be, tools, &core.Options{Logger: quiet, ToolTimeout: localToolTimeout}))
	registerBare(w)
	tr := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Idle: time.Second}})
	tl := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: localSettings(temporal.LoopOptions{Idle: time.Second}, true)})
	bare := func(local bool) runFunc {
		return func(ctx context.Context, in string) (*core.Result, error) {
			return nil, runBare(ctx, c, queue, shape, local)
		}
	}
	return map[string]runFunc{
		"core":           func(ctx context.Context, in string) (*core.Result, error) { return cr.Run(ctx, in, nil) },
		"temporal":       func(ctx context.Context, in string) (*core.Result, error) { return tr.Run(ctx, in, nil) },
		"temporal-local": func(ctx context.Context, in string) (*core.Result, error) { return tl.Run(ctx, in, nil) },
		"bare":           bare(false),
		"bare-local":     bare(true),
	}
}

// BenchmarkStep measures a step of the loop (a model step with one call,
// its result submitted): a turn of three steps and an answer, run by
// core's runner and by the Temporal runner on the real server, on the
// same in-memory backend. ns/step is the figure to compare.
func BenchmarkStep(b *testing.B) {
	tools, err := weatherTools(b.TempDir()+"/effects.log", 0, false)
	if err != nil {
		b.Fatal(err)
	}
	benchLoops(b, weatherScript, tools, []int{1, 1, 1}, "step")
}

// BenchmarkCall measures a call: a step of eight calls and an answer;
// ns/call is the figure to compare.
func BenchmarkCall(b *testing.B) {
	echo, err := core.NewTool("echo", "Echoes.", func(_ context.Context, in struct{ N int }) (int, error) { return in.N, nil }, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	tools, _ := core.NewToolbox(echo)
	var step coretest.Step
	for i := range 8 {
		step.Calls = append(step.Calls, coretest.Call{Name: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"N":%d}`, i))})
	}
	benchLoops(b, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, {Text: "done"}}}}}, tools, []int{8}, "call")
}

// benchLoops runs the turn of script on every loop: its steps with calls
// have shape's calls; per step, or per call (unit).
func benchLoops(b *testing.B, script *coretest.Script, tools *core.Toolbox, shape []int, unit string) {
	ls := loops(b, script, tools, shape)
	per := len(shape)
	if unit == "call" {
		per = 0
		for _, n := range shape {
			per += n
		}
	}
	for _, name := range loopNames {
		run := ls[name]
		b.Run("loop="+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := run(b.Context(), fmt.Sprintf("run %d", i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/"+unit)
		})
	}
}
