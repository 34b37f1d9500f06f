// Command refund shows a tool that needs a person's approval: refunds over
// 100 wait for a yes or no. The agent refunds an order of 150 and looks
// the order up in one step; the lookup runs, the refund waits, the program
// prints the pending call and asks; on "y" the refund runs, on anything
// else the agent is told it was denied; then the run finishes.
//
// With no configuration it runs on the embedded fake Agents API
// (fake-openai), and reads the answer from standard input:
//
//	go run ./examples/refund
//	echo n | go run ./examples/refund
//
// Any backend by configuration (TOOLRELAY_BACKEND=fake-foundry,
// fake-responses, openai, foundry). With TOOLRELAY_JOURNAL set to a SQLite
// file or PostgreSQL database, the pending approval is kept there: another
// process sharing it can list it (Runner.Approvals), decide it
// (Runner.Decide) and finish the run (Runner.Resume).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest"   // fake-foundry, fake-responses, foundry, responses
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // TOOLRELAY_JOURNAL=postgres://…
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // TOOLRELAY_JOURNAL=sqlite://…
	_ "github.com/toolrelay/toolrelay/openai/openaitest"     // fake-openai, openai
)

// script is what the fake agent does: refund order 7 (150) and look it up
// in one step, then report both.
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{
		{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)},
		{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)},
	}},
	{Text: `Refund: {{output "refund"}}. Order: {{output "lookup_order"}}.`},
}}}}

type refundArgs struct {
	Order  string `json:"order" jsonschema:"The order's number"`
	Amount int    `json:"amount" jsonschema:"The amount to refund"`
}

type orderArgs struct {
	Order string `json:"order" jsonschema:"The order's number"`
}

func newTools() (*core.Toolbox, error) {
	refund, err := core.NewTool("refund", "Refund (part of) an order.", func(_ context.Context, in refundArgs) (string, error) {
		return fmt.Sprintf("refunded %d on order %s", in.Amount, in.Order), nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) {
		return in.Amount > 100, fmt.Sprintf("a refund of %d is over the limit of 100", in.Amount)
	})})
	if err != nil {
		return nil, err
	}
	lookup, err := core.NewTool("lookup_order", "Look up an order.", func(_ context.Context, in orderArgs) (string, error) {
		return "order " + in.Order + ": 1 espresso machine, 150", nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(refund, lookup)
}

// run runs the refund, asking in for each decision and writing to out.
func run(ctx context.Context, in io.Reader, out io.Writer) error {
	tools, err := newTools()
	if err != nil {
		return err
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
		Runner: core.Options{Logger: slog.New(slog.DiscardHandler), OnEvent: func(e core.Event) {
			if e.Kind == core.EventCallFinished {
				fmt.Fprintf(out, "ran %s: %s\n", e.Call.Name, e.Outcome)
			}
		}},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	answers := bufio.NewScanner(in)
	res, err := runner.Run(ctx, "Refund order 7 in full, and tell me what it was.", nil)
	for errors.Is(err, core.ErrAwaitingApproval) {
		for _, a := range res.Pending {
			fmt.Fprintf(out, "%s %s needs approval (%s). Approve? [y/N] ", a.Tool, a.Arguments, a.Why)
			yes := answers.Scan() && strings.EqualFold(strings.TrimSpace(answers.Text()), "y")
			fmt.Fprintln(out)
			d := core.Decision{Approved: yes, Actor: "terminal"}
			if !yes {
				d.Reason = "the operator said no"
			}
			if err := runner.Decide(ctx, res.Thread, a.Key.Call, d); err != nil {
				return err
			}
		}
		res, err = runner.Resume(ctx, res.Thread, nil)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, res.Text)
	return runner.Close()
}

func main() {
	if err := run(context.Background(), os.Stdin, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
