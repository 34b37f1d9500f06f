package core_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// ExampleBudget bounds a run to two tool calls: the model asks for a
// third, so the run stops before running it, with an error matching
// ErrBudgetExceeded and the turn left waiting; a resume with a raised
// budget goes on from there, counting from the turn's start.
func ExampleBudget() {
	lookup, err := core.NewTool("lookup", "Look up an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": shipped", nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(lookup)
	if err != nil {
		log.Fatal(err)
	}
	step := func(order string) coretest.Step {
		return coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{"order":"` + order + `"}`)}}}
	}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		step("1"), step("2"), step("3"), {Text: "All three orders have shipped."},
	}}}}
	runner := core.NewRunner(coretest.NewBackend(script, nil), tools, &core.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Every run's default; a run's RunOptions.Budget overrides it.
		Budget: core.Budget{MaxToolCalls: 2},
	})
	defer runner.Close()

	ctx := context.Background()
	res, err := runner.Run(ctx, "Where are orders 1, 2 and 3?", nil)
	if errors.Is(err, core.ErrBudgetExceeded) {
		fmt.Println("stopped:", err)
		fmt.Println("calls run:", res.ToolCalls, "left:", res.Remaining.ToolCalls)
	}

	// The same turn, with room for two more calls.
	res, err = runner.Resume(ctx, res.Thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 4}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println("calls run:", res.ToolCalls, "left:", res.Remaining.ToolCalls)
	// Output:
	// stopped: core: run: the run's budget is exceeded: tool calls 2 and 1 more of 2 (ResourceExhausted)
	// calls run: 2 left: 0
	// All three orders have shipped.
	// calls run: 3 left: 1
}
