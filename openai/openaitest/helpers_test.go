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

// TestSubagents plays a turn that delegates to subagents (Options.Subagents)
// and reads it with openai-go's NewStreaming and
// BetaAgentSessionFinalResult: the answer is the root agent's alone; the
// subagent events and items decode as the SDK's types; GET .../turns lists
// each subagent turn, newer than the root turn, and GET .../items the root
// agent's items only.
func TestSubagents(t *testing.T) {
	const answer, said = "All done.", "A subagent's finding."
	srv, client := newServer(t, coretest.Answer(answer), &openaitest.Options{Subagents: &openaitest.Subagents{Count: 2, Turns: 3, Text: said}})
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
	res, err := oai.BetaAgentSessionFinalResult(stream)
	if err != nil {
		t.Fatalf("FinalResult: %v", err)
	}
	if got := res.OutputText(); got != answer {
		t.Errorf("answer = %q, want %q (the root agent's only)", got, answer)
	}
	sess := srv.Sessions()[0]
	kinds := map[string]int{}
	for _, typ := range srv.Events(sess) {
		if strings.Contains(typ, "subagent") {
			kinds[typ]++
		}
	}
	wantKinds := map[string]int{"agent.session.subagent.created": 2, "agent.session.subagent.active": 2, "agent.session.subagent.closed": 4}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("subagent events (-want +got):\n%s", diff)
	}
	var turns []oai.Turn
	pager := client.Beta.Agents.Sessions.Turns.ListAutoPaging(ctx, sess, oai.BetaAgentSessionTurnListParams{Order: oai.BetaAgentSessionTurnListParamsOrderAsc, Limit: oai.Int(4)})
	for pager.Next() {
		turns = append(turns, pager.Current())
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	if len(turns) != 7 || turns[0].SubagentID != "" {
		t.Fatalf("turns %+v: want the root turn, then 6 subagent turns", turns)
	}
	for _, tn := range turns[1:] {
		if tn.SubagentID == "" || tn.Status != "completed" || tn.AgentID != tn.SubagentID {
			t.Errorf("turn %+v: want a completed subagent turn", tn)
		}
		items, err := client.Beta.Agents.Sessions.Turns.Items.List(ctx, sess, tn.ID, oai.BetaAgentSessionTurnItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(items.Data) != 1 || items.Data[0].AsMessage().OutputText() != said {
			t.Errorf("items of subagent turn %s: %+v, want its answer", tn.ID, items.Data)
		}
	}
	items, err := client.Beta.Agents.Sessions.Items.List(ctx, sess, oai.BetaAgentSessionItemListParams{Order: oai.BetaAgentSessionItemListParamsOrderAsc, Limit: oai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range items.Data {
		if it.TurnID != turns[0].ID {
			t.Errorf("session item %s of turn %s: want the root turn's only", it.ID, it.TurnID)
		}
		switch it.Type {
		case "create_subagent_call":
			if c := it.AsCreateSubagentCall(); c.AgentID != agent.ID || len(c.Content) != 1 || c.Content[0].Text != "Subtask 1." && c.Content[0].Text != "Subtask 2." {
				t.Errorf("create_subagent_call %+v", c)
			}
		case "agent_message":
			if m := it.AsAgentMessage(); m.RecipientAgentID != agent.ID || len(m.Content) != 1 || m.Content[0].Text != said {
				t.Errorf("agent_message %+v", m)
			}
		case "wait_for_subagents_call":
			if w := it.AsWaitForSubagentsCall(); w.SenderAgentID != agent.ID || len(w.RecipientAgentIDs) != 1 {
				t.Errorf("wait_for_subagents_call %+v", w)
			}
		}
		types = append(types, it.Type)
	}
	one := []string{"create_subagent_call", "agent_message",
		"close_subagent_call", "resume_subagent_call", "send_subagent_input_call", "agent_message",
		"send_subagent_input_call", "agent_message",
		"wait_for_subagents_call", "interrupt_subagent_call", "close_subagent_call"}
	want := append(append(append([]string{"message"}, one...), one...), "message")
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("session items (-want +got):\n%s", diff)
	}
}
