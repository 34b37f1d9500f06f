// Command customer runs the seed's get_customer function through toolrelay:
// the agent asks for a customer, toolrelay runs the function and sends the
// result back, and the agent answers with what it returned.
//
// With no configuration it runs on the embedded fake Agents API
// (fake-openai), playing a script in which the agent asks for customer 123:
//
//	go run ./examples/customer
//
// Against the real OpenAI Agents API, with an agent made from the toolbox
// (model gpt-4.1-mini unless TOOLRELAY_OPENAI_MODEL says otherwise):
//
//	TOOLRELAY_BACKEND=openai OPENAI_API_KEY=sk-... go run ./examples/customer
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry and foundry
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai and openai
)

// question is what the user asks.
const question = "Look up customer 123 and tell me their name and plan."

// script is what the fake agent does: ask for customer 123, then answer
// with what get_customer returned.
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "get_customer", Arguments: json.RawMessage(`{"customer_id": "123"}`)}}},
	{Text: `Here is what I found for customer 123: {{output "get_customer"}}`},
}}}}

// customerArgs are get_customer's arguments.
type customerArgs struct {
	CustomerID string `json:"customer_id" jsonschema:"The customer's ID."`
}

// Customer is a customer record.
type Customer struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// lookup is get_customer's result: the customer, or found false.
type lookup struct {
	Found    bool      `json:"found"`
	Customer *Customer `json:"customer"`
}

// getCustomer looks up a customer by ID: customer "123" is Example
// Customer, on the pro plan; there is no other.
func getCustomer(ctx context.Context, in customerArgs) (lookup, error) {
	if in.CustomerID == "123" {
		return lookup{Found: true, Customer: &Customer{Name: "Example Customer", Plan: "pro"}}, nil
	}
	return lookup{Found: false}, nil
}

// run asks the question and prints each call the agent makes and its
// answer to stdout.
func run(ctx context.Context, stdout io.Writer) error {
	tool, err := core.NewTool("get_customer", "Look up a customer by ID.", getCustomer, &core.ToolOptions{Strict: true})
	if err != nil {
		return err
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		return err
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
		Runner: core.Options{OnEvent: func(e core.Event) {
			if e.Kind == core.EventCallStarted {
				fmt.Fprintf(stdout, "Calling %s...\n", e.Call.Name)
			}
		}},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	res, err := runner.Run(ctx, question, nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, "Agent response:", res.Text)
	return err
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}
