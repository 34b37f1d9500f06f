package core_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// ExampleNewAgentTool offers a refund agent, with a tool of its own, as a
// tool of a triage agent (each on a scripted in-memory backend; any
// backend will do, each runner its own). The triage run asks the refund
// agent, whose events reach the triage runner's OnEvent with the path of
// the call they came through, and answers with its answer. (A program
// whose runs must survive a crash gives both runners journals its
// processes share, such as SQLite's or PostgreSQL's.)
func ExampleNewAgentTool() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	type order struct {
		Order string `json:"order"`
	}
	refund, err := core.NewTool("refund", "Refund an order.", func(ctx context.Context, in order) (string, error) {
		return "order " + in.Order + " refunded", nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	refundTools, err := core.NewToolbox(refund)
	if err != nil {
		log.Fatal(err)
	}
	refundAgent := core.NewRunner(coretest.NewBackend(coretest.Simple("refund", `{"order":"7"}`, `Done: {{output "refund"}}.`), nil),
		refundTools, &core.Options{Logger: quiet})
	defer refundAgent.Close()

	ask, err := core.NewAgentTool("ask_refund_agent", "Ask the refund agent to refund an order.", refundAgent, nil)
	if err != nil {
		log.Fatal(err)
	}
	triageTools, err := core.NewToolbox(ask)
	if err != nil {
		log.Fatal(err)
	}
	triage := core.NewRunner(coretest.NewBackend(coretest.Simple("ask_refund_agent", `{"input":"Refund order 7."}`, `The refund agent says: {{output "ask_refund_agent"}}`), nil),
		triageTools, &core.Options{Logger: quiet, OnEvent: func(e core.Event) {
			if e.Kind == core.EventCallFinished {
				for _, p := range e.Path {
					fmt.Print(p.Name, " > ")
				}
				fmt.Println(e.Call.Name, "finished")
			}
		}})
	defer triage.Close()

	res, err := triage.Run(context.Background(), "I want my money back for order 7.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// ask_refund_agent > refund finished
	// ask_refund_agent finished
	// The refund agent says: Done: order 7 refunded.
}
