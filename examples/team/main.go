// Command team shows agents that call agents. A triage agent on the
// embedded Foundry fake hands refunds to a refund agent on the embedded
// OpenAI sessions fake, twice: once as a tool of its own runner
// (core.NewAgentTool), the child's calls journaled and its events relayed
// with their path, and once over A2A, the same refund agent served on a
// loopback port (a2atools.NewHandler) and read from its agent card as a
// tool (a2atools.NewTool). No credentials, no network beyond loopback:
//
//	go run ./examples/team
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// order is what the refund agent is asked: its input is this, as JSON.
type order struct {
	Order string `json:"order" jsonschema:"the order's number"`
}

// run runs the triage agent and prints what each agent does to stdout.
func run(ctx context.Context, stdout io.Writer) error {
	say := log.New(stdout, "", 0) // safe from the A2A server's goroutines too

	// The refund agent, on the OpenAI sessions fake: it calls refund with
	// its input, then reports what refund said.
	refund, err := core.NewTool("refund", "Refunds an order in full.", func(_ context.Context, in order) (string, error) {
		say.Printf("  (refund tool: order %s refunded)", in.Order)
		return "order " + in.Order + " refunded", nil
	}, nil)
	if err != nil {
		return err
	}
	refundTools, err := core.NewToolbox(refund)
	if err != nil {
		return err
	}
	refunder, err := adapter.Open(ctx, refundTools, &adapter.Options{
		Settings: adapter.Settings{Backend: "fake-openai"},
		BackendSettings: []any{coretest.FakeSettings{Script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`"{{input}}"`)}}},
			{Text: `Done: {{output "refund"}}.`},
		}}}}}},
	})
	if err != nil {
		return err
	}
	defer refunder.Close()

	// The refund agent as a tool, in this process: it takes what refund
	// takes, and its input is the call's arguments, {"order": "…"}.
	refundAgent, err := core.NewAgentTool("refund_agent", "Hands a refund to the refund agent.", refunder,
		&core.AgentToolOptions{Parameters: refund.Parameters()})
	if err != nil {
		return err
	}

	// The same refund agent, served over A2A on a loopback port to
	// callers who show the token, and read from its card as a tool.
	const token = "team-example"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: a2atools.NewHandler(refunder, &a2atools.ServeOptions{
		Name:        "Refund Desk",
		Description: "Refunds orders.",
		Identity: func(r *http.Request) (string, error) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				return "", nil // 401
			}
			return "triage", nil
		},
	})}
	go srv.Serve(ln)
	defer srv.Close()
	desk, err := a2atools.NewTool(ctx, "http://"+ln.Addr().String(), &a2atools.ToolOptions{
		Headers: map[string]string{"Authorization": "Bearer " + token},
	})
	if err != nil {
		return err
	}

	// The triage agent, on the Foundry fake: order 7 to the refund agent
	// as a tool, order 8 to the refund desk over A2A.
	triageTools, err := core.NewToolbox(refundAgent, desk)
	if err != nil {
		return err
	}
	triage, err := adapter.Open(ctx, triageTools, &adapter.Options{
		Settings: adapter.Settings{Backend: "fake-foundry"},
		BackendSettings: []any{coretest.FakeSettings{Script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund_agent", Arguments: json.RawMessage(`{"order": "7"}`)}}},
			{Calls: []coretest.Call{{Name: "refund_desk", Arguments: json.RawMessage(`{"message": "{\"order\": \"8\"}"}`)}}},
			{Text: `Order 7: {{output "refund_agent"}} Order 8: {{output "refund_desk"}}`},
		}}}}}},
		Runner: core.Options{OnEvent: func(e core.Event) {
			if e.Kind != core.EventCallStarted && e.Kind != core.EventCallFinished {
				return
			}
			path := []string{"triage"} // who calls: the triage agent, then the calls it runs in
			for _, call := range e.Path {
				path = append(path, call.Name)
			}
			if e.Kind == core.EventCallStarted {
				say.Printf("%s calls %s %s", strings.Join(path, " > "), e.Call.Name, e.Call.Arguments)
			} else {
				say.Printf("%s: %s %s", strings.Join(path, " > "), e.Call.Name, e.Outcome)
			}
		}},
	})
	if err != nil {
		return err
	}
	defer triage.Close()
	res, err := triage.Run(ctx, "Refund orders 7 and 8.", nil)
	if err != nil {
		return err
	}
	say.Printf("Triage: %s", res.Text)
	say.Printf("Tokens: %d (the refund agent's as a tool counted in)", res.Usage.TotalTokens)
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("closing the A2A server: %w", err)
	}
	return nil
}
