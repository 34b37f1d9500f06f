package a2atools_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai
)

// A refund agent on the OpenAI sessions fake, served as an A2A agent, is
// a tool of a triage agent on the Foundry fake.
func Example() {
	ctx := context.Background()

	// The refund agent, served over A2A to callers who show a token.
	refund, err := core.NewTool("refund", "Refunds an order.", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + " refunded", nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	refundTools, err := core.NewToolbox(refund)
	if err != nil {
		log.Fatal(err)
	}
	refunder, err := adapter.Open(ctx, refundTools, &adapter.Options{
		DefaultBackend: "fake-openai",
		BackendSettings: []any{coretest.FakeSettings{Script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7"}`)}}},
			{Text: `Done: {{output "refund"}}.`},
		}}}}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer refunder.Close()
	srv := httptest.NewServer(a2atools.NewHandler(refunder, &a2atools.ServeOptions{
		Name:        "Refund Desk",
		Description: "Refunds orders.",
		Identity: func(r *http.Request) (string, error) {
			return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), nil
		},
	}))
	defer srv.Close()

	// The triage agent, whose tool is the refund agent, read from its card.
	desk, err := a2atools.NewTool(ctx, srv.URL, &a2atools.ToolOptions{Headers: map[string]string{"Authorization": "Bearer triage"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(desk.Name(), "-", desk.Description())
	triageTools, err := core.NewToolbox(desk)
	if err != nil {
		log.Fatal(err)
	}
	triage, err := adapter.Open(ctx, triageTools, &adapter.Options{
		DefaultBackend: "fake-foundry",
		BackendSettings: []any{coretest.FakeSettings{Script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund_desk", Arguments: []byte(`{"message":"Refund order 7."}`)}}},
			{Text: `The refund desk says: {{output "refund_desk"}}`},
		}}}}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer triage.Close()
	res, err := triage.Run(ctx, "I want my money back for order 7.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// refund_desk - Refunds orders.
	// The refund desk says: Done: order 7 refunded.
}
