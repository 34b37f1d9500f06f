package openaitest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// Example runs the seed's get_customer function through toolrelay against
// the fake: the fake model asks for customer 123 and answers with what the
// function returned. Received shows what the service got, in neutral terms.
func Example() {
	ctx := context.Background()
	srv := openaitest.NewServer(coretest.Simple("get_customer", `{"customer_id":"123"}`,
		`Customer 123: {{output "get_customer"}}`), nil)
	defer srv.Close()

	type args struct {
		CustomerID string `json:"customer_id"`
	}
	getCustomer, err := core.NewTool("get_customer", "Look up a customer by ID.",
		func(ctx context.Context, in args) (map[string]any, error) {
			if in.CustomerID != "123" {
				return map[string]any{"found": false, "customer": nil}, nil
			}
			return map[string]any{"found": true, "customer": map[string]string{"name": "Example Customer", "plan": "pro"}}, nil
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(getCustomer)
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend, err := openai.Open(ctx, tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	runner := core.NewRunner(backend, tools, &core.Options{Logger: quiet})
	defer runner.Close()

	res, err := runner.Run(ctx, "Look up customer 123.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	for _, r := range srv.Received() {
		switch r.Kind {
		case "input":
			fmt.Printf("%s: %q\n", r.Kind, r.Input)
		case "results":
			fmt.Printf("%s: %s -> %s\n", r.Kind, r.Results[0].Name, r.Results[0].Output)
		}
	}
	// Output:
	// Customer 123: {"customer":{"name":"Example Customer","plan":"pro"},"found":true}
	// input: "Look up customer 123."
	// results: get_customer -> {"customer":{"name":"Example Customer","plan":"pro"},"found":true}
}
