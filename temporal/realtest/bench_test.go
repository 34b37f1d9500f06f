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

// loops returns core's runner and the Temporal runner (a worker in this
// process, on the test server) over one in-memory backend playing script
// with tools, each as a runFunc.
func loops(b *testing.B, script *coretest.Script, tools *core.Toolbox) map[string]runFunc {
	be := coretest.NewBackend(script, nil)
	cr := core.NewRunner(be, tools, &core.Options{Logger: quiet})
	c := dial(b)
	queue := newQueue(b)
	startWorker(b, c, queue, core.NewRunner(be, tools, &core.Options{Logger: quiet}))
	tr := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Settings: temporal.Settings{Idle: time.Second}})
	return map[string]runFunc{
		"core":     func(ctx context.Context, in string) (*core.Result, error) { return cr.Run(ctx, in, nil) },
		"temporal": func(ctx context.Context, in string) (*core.Result, error) { return tr.Run(ctx, in, nil) },
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
	benchLoops(b, weatherScript, tools, 3, "step")
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
	benchLoops(b, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, {Text: "done"}}}}}, tools, 8, "call")
}

func benchLoops(b *testing.B, script *coretest.Script, tools *core.Toolbox, per int, unit string) {
	ls := loops(b, script, tools)
	for _, name := range []string{"core", "temporal"} {
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
