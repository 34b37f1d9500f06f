package openaitest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// customerTool is the seed's get_customer function, as an agent tool.
func customerTool() oai.PersistedAgentToolParamUnion {
	return oai.PersistedAgentToolParamOfParamFunction("Look up a customer by ID.", "get_customer", map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"customer_id": map[string]any{"type": "string"}},
		"required":             []string{"customer_id"},
		"additionalProperties": false,
	})
}

// getCustomer is the seed's handler: customer "123" is Example Customer on
// the pro plan.
func getCustomer(calls *int) oai.AgentToolHandler {
	return func(_ context.Context, args map[string]any) (any, error) {
		*calls++
		var customer any
		if args["customer_id"] == "123" {
			customer = map[string]any{"name": "Example Customer", "plan": "pro"}
		}
		return map[string]any{"found": customer != nil, "customer": customer}, nil
	}
}

func newServer(t *testing.T, script *coretest.Script, opts *openaitest.Options) (*openaitest.Server, oai.Client) {
	t.Helper()
	srv := openaitest.NewServer(script, opts)
	t.Cleanup(srv.Close)
	client := oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	return srv, client
}

const wantAnswer = `Customer 123: {"customer":{"name":"Example Customer","plan":"pro"},"found":true}`

// TestOfficialHelpers runs the SDK's unmodified helpers against the fake:
// proof that it speaks the protocol as the SDK expects it.
func TestOfficialHelpers(t *testing.T) {
	lookup := []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_customer", Arguments: json.RawMessage(`{"customer_id":"123"}`)}}},
		{Text: `Customer 123: {{output "get_customer"}}`},
	}
	tests := []struct {
		name   string
		script *coretest.Script
		run    func(ctx context.Context, c oai.Client, agentID string, handlers map[string]oai.AgentToolHandler) (*oai.BetaAgentTurnResult, error)
	}{
		{
			name: "Sessions.Stream on an idle session",
			script: &coretest.Script{Turns: []coretest.Turn{
				{Steps: []coretest.Step{{Text: "Hello."}}},
				{Steps: lookup},
			}},
			run: func(ctx context.Context, c oai.Client, agentID string, handlers map[string]oai.AgentToolHandler) (*oai.BetaAgentTurnResult, error) {
				sess, err := c.Beta.Agents.Sessions.New(ctx, oai.BetaAgentSessionNewParams{
					Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
					AgentID:     oai.String(agentID),
					Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("Hi")},
				})
				if err != nil {
					return nil, err
				}
				if sess.Status != "idle" {
					t.Fatalf("session status after the first turn = %q, want idle", sess.Status)
				}
				stream := c.Beta.Agents.Sessions.Stream(ctx, sess.ID, oai.AgentSessionStreamParams{
					Input:        "Look up customer 123",
					ToolHandlers: handlers,
				})
				return stream.FinalResult()
			},
		},
		{
			name:   "Sessions.NewStreaming with ToolHandlers",
			script: &coretest.Script{Turns: []coretest.Turn{{Steps: lookup}}},
			run: func(ctx context.Context, c oai.Client, agentID string, handlers map[string]oai.AgentToolHandler) (*oai.BetaAgentTurnResult, error) {
				stream := c.Beta.Agents.Sessions.NewStreaming(ctx, oai.BetaAgentSessionNewParams{
					Environment:  oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
					AgentID:      oai.String(agentID),
					Input:        oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("Look up customer 123")},
					ToolHandlers: handlers,
				})
				return oai.BetaAgentSessionFinalResult(stream)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, client := newServer(t, tt.script, nil)
			ctx := t.Context()
			agent, err := client.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "gpt-4.1-mini", Tools: []oai.PersistedAgentToolParamUnion{customerTool()}})
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			res, err := tt.run(ctx, client, agent.ID, map[string]oai.AgentToolHandler{"get_customer": getCustomer(&calls)})
			if err != nil {
				t.Fatalf("FinalResult: %v", err)
			}
			if got := res.OutputText(); got != wantAnswer {
				t.Errorf("answer = %q, want %q", got, wantAnswer)
			}
			if calls != 1 {
				t.Errorf("handler ran %d times, want 1", calls)
			}
			if res.Turn.Status != "completed" || res.Turn.Usage.TotalTokens == 0 {
				t.Errorf("turn = %+v, want completed with usage", res.Turn)
			}
			rec := srv.Received()
			last := rec[len(rec)-1]
			want := coretest.Received{Kind: "results", Thread: last.Thread, Results: []coretest.Delivered{{
				CallID: last.Results[0].CallID, Name: "get_customer",
				Output: `{"customer":{"name":"Example Customer","plan":"pro"},"found":true}`,
			}}}
			if diff := cmp.Diff(want, last); diff != "" {
				t.Errorf("last received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeltaSize streams a turn whose answer arrives in output_text deltas
// of at most Options.DeltaSize runes, read with openai-go's NewStreaming:
// the deltas concatenate to the completed message's text.
func TestDeltaSize(t *testing.T) {
	const text = "Héllo, wörld: 日本語のテキストです."
	_, client := newServer(t, coretest.Answer(text), &openaitest.Options{DeltaSize: 4})
	ctx := t.Context()
	agent, err := client.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "gpt-4.1-mini"})
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Beta.Agents.Sessions.NewStreaming(ctx, oai.BetaAgentSessionNewParams{
		Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
		AgentID:     oai.String(agent.ID),
		Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("hi")},
	})
	defer stream.Close()
	var deltas []string
	done := ""
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "agent.session.turn.output_text.delta":
			deltas = append(deltas, ev.Delta)
		case "agent.session.turn.item.done":
			var parts []struct {
				Text string `json:"text"`
			}
			if ev.Item.Type == "message" && json.Unmarshal([]byte(ev.Item.JSON.Content.Raw()), &parts) == nil {
				for _, c := range parts {
					done += c.Text
				}
			}
		case "agent.session.idle":
			stream.Close()
		}
	}
	if got := strings.Join(deltas, ""); got != text || done != text || len(deltas) < 2 {
		t.Errorf("%d deltas joined = %q, completed message %q; want %q in several", len(deltas), got, done, text)
	}
	for _, d := range deltas {
		if n := utf8.RuneCountInString(d); n > 4 || !utf8.ValidString(d) {
			t.Errorf("delta %q: %d runes, want at most 4 whole ones", d, n)
		}
	}
}
