package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// ExampleAsk has a tool's handler ask a person before it wires money, for
// an amount it learns only as it runs: the run pauses, a person decides,
// and the resumed call, run again from its start, gets the decision.
func ExampleAsk() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wire, err := core.NewTool("wire", "Wire the balance of an account.", func(ctx context.Context, in struct {
		Account string `json:"account"`
	}) (string, error) {
		balance := 250 // looked up as the call runs: safe to do again
		ds, err := core.Ask(ctx, core.Question{
			ID:        "balance",
			Arguments: json.RawMessage(fmt.Sprintf(`{"account":%q,"amount":%d}`, in.Account, balance)),
			Why:       fmt.Sprintf("wire %d from %s", balance, in.Account),
		})
		if err != nil {
			return "", err // the run pauses (core.ErrAwaitingApproval), or no one can be asked
		}
		if !ds[0].Approved {
			return "not wired: " + ds[0].Reason, nil
		}
		return fmt.Sprintf("wired %d", balance), nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(wire)
	if err != nil {
		log.Fatal(err)
	}
	r := core.NewRunner(coretest.NewBackend(coretest.Simple("wire", `{"account":"A-1"}`, `{{output "wire"}}.`), nil),
		tools, &core.Options{Logger: quiet})
	defer r.Close()

	ctx := context.Background()
	res, err := r.Run(ctx, "Wire the balance of A-1.", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		log.Fatal(err)
	}
	for _, a := range res.Pending {
		fmt.Println("to decide:", a.Key.Call, a.Why)
		if err := r.Decide(ctx, res.Thread, a.Key.Call, core.Decision{Approved: true, Actor: "ann"}); err != nil {
			log.Fatal(err)
		}
	}
	if res, err = r.Resume(ctx, res.Thread, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// to decide: call_1/balance wire 250 from A-1
	// wired 250.
}
