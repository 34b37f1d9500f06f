package foundry_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	coredriver "github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// commentaryScript is a weather turn whose every step begins with the
// model's commentary (a message of phase "commentary"), its answer then
// of phase "final_answer".
func commentaryScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Commentary: "Let me look up your city.", Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Commentary: "Now the weather there.", Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
		{Commentary: "Here it is.", Text: `It is {{output "getCurrentWeatherAtLocation"}} in {{output "getUserFavoriteCity"}}.`},
	}}}}
}

// TestCommentary: the model's commentary (messages of phase "commentary")
// is never part of the answer, of a run or of a resume of its finished
// turn by another process; streamed, or handed over whole when blocking,
// its text events are marked Commentary, and the unmarked ones make the
// answer exactly.
func TestCommentary(t *testing.T) {
	const answer = "It is 70f in Seattle, WA."
	commentary := []string{"Let me look up your city.", "Now the weather there.", "Here it is."}
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		for _, stream := range []bool{false, true} {
			t.Run(string(mode)+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				srv := newFake(t, commentaryScript(), &foundrytest.Options{DeltaSize: 4})
				tools := toolbox(t, &counter{})
				opts := options(srv, mode, stream)
				opts.Keep = true
				r := newRunner(open(t, tools, opts), tools, nil)
				st := r.Stream(t.Context(), "What's the weather in my city?", nil)
				var marked, unmarked []string // TextDone texts
				var deltas strings.Builder    // unmarked TextDelta pieces
				for ev, err := range st.Events() {
					if err != nil {
						t.Fatalf("stream: %v", err)
					}
					switch {
					case ev.Kind == core.EventTextDone && ev.Commentary:
						marked = append(marked, ev.Text)
					case ev.Kind == core.EventTextDone:
						unmarked = append(unmarked, ev.Text)
					case ev.Kind == core.EventTextDelta && !ev.Commentary:
						deltas.WriteString(ev.Text)
					}
				}
				res, err := st.Result()
				if err != nil {
					t.Fatal(err)
				}
				if res.Text != answer {
					t.Errorf("answer = %q, want %q (no commentary)", res.Text, answer)
				}
				if diff := cmp.Diff(commentary, marked); diff != "" {
					t.Errorf("messages marked Commentary (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{answer}, unmarked); diff != "" || deltas.String() != answer {
					t.Errorf("unmarked messages (-want +got):\n%s\nunmarked pieces %q, want the answer", diff, deltas.String())
				}
				// Another process resumes the finished turn: the answer,
				// still without commentary.
				again := newRunner(open(t, tools, opts), tools, nil)
				got, err := again.Resume(t.Context(), res.Thread, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got.Text != answer {
					t.Errorf("resumed answer = %q, want %q", got.Text, answer)
				}
				checkNoRefusals(t, srv)
			})
		}
	}
}

// namespaceTools returns function lookup of namespaces crm and docs, and a
// lookup of no namespace, each saying which it is.
func namespaceTools(t *testing.T) *core.Toolbox {
	t.Helper()
	var list []*core.Tool
	for _, name := range []string{"crm.lookup", "docs.lookup", "lookup"} {
		tool, err := core.NewTool(name, "Looks something up.", func(context.Context, struct{}) (string, error) { return "looked up by " + name, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, tool)
	}
	tb, err := core.NewToolbox(list...)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestNamespace: functions of a namespace are offered as the function
// tools of one namespace tool (in the agent version made from the toolbox,
// or in the request), a call of function lookup in namespace crm runs the
// tool "crm.lookup" (and one in docs "docs.lookup", one in none
// "lookup"), and its output names the namespace and the function as the
// call did; an existing agent's namespace functions that the toolbox
// lacks are reported missing by their tool names.
func TestNamespace(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "crm.lookup"}, {Name: "docs.lookup"}, {Name: "lookup"}}},
		{Text: "{{result 0}} | {{result 1}} | {{result 2}}"},
	}}}}
	const answer = "looked up by crm.lookup | looked up by docs.lookup | looked up by lookup"
	for _, tc := range []struct {
		name   string
		mode   foundry.Mode
		plain  bool
		stream bool
	}{
		{"foundry conversation", foundry.Conversation, false, false},
		{"foundry chain, streaming", foundry.Chain, false, true},
		{"responses", trresponses.Chain, true, false},
		{"responses stateless, streaming", trresponses.Stateless, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, script, &foundrytest.Options{Plain: tc.plain})
			tools := namespaceTools(t)
			var b coredriver.Backend
			if tc.plain {
				rb, err := trresponses.Open(t.Context(), tools, &trresponses.Options{BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test", Model: "gpt-4.1-mini",
					Mode: tc.mode, Delivery: map[bool]trresponses.Delivery{true: trresponses.Streaming}[tc.stream], HTTPClient: srv.Client(), RequestOptions: fast, Logger: discard})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rb.Close() })
				b = rb
			} else {
				opts := options(srv, tc.mode, tc.stream)
				opts.Keep = true // the version stays, for the existing agent below
				b = open(t, tools, opts)
			}
			res, err := newRunner(b, tools, nil).Run(t.Context(), "Look it up everywhere.", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != answer {
				t.Errorf("answer = %q, want %q", res.Text, answer)
			}
			// The offer: one namespace tool per namespace, its function
			// named without it.
			var offered []json.RawMessage
			if tc.plain {
				var body struct {
					Tools []json.RawMessage `json:"tools"`
				}
				json.Unmarshal(srv.Requests()[len(srv.Requests())-1].Body, &body)
				offered = body.Tools
			} else {
				_, version := b.(*foundry.Backend).Agent()
				var def struct {
					Tools []json.RawMessage `json:"tools"`
				}
				json.Unmarshal(srv.AgentDefinition("test-agent", version), &def)
				offered = def.Tools
			}
			var names []string
			for _, raw := range offered {
				var tool struct {
					Type, Name string
					Tools      []struct{ Type, Name string }
				}
				json.Unmarshal(raw, &tool)
				names = append(names, tool.Type+" "+tool.Name)
				for _, f := range tool.Tools {
					names = append(names, "  "+f.Type+" "+f.Name)
				}
			}
			wantOffer := []string{"namespace crm", "  function lookup", "namespace docs", "  function lookup", "function lookup"}
			if diff := cmp.Diff(wantOffer, names); diff != "" {
				t.Errorf("tools offered (-want +got):\n%s", diff)
			}
			var outputs []map[string]any
			for _, q := range srv.Requests() {
				var body struct {
					Input json.RawMessage `json:"input"`
				}
				var items []map[string]any
				if q.Op != foundrytest.OpCreateResponse || json.Unmarshal(q.Body, &body) != nil || json.Unmarshal(body.Input, &items) != nil {
					continue
				}
				for _, it := range items {
					if it["type"] == "function_call_output" {
						delete(it, "output")
						outputs = append(outputs, it)
					}
				}
			}
			// Stateless requests resend the history: the outputs are those
			// of the last request.
			outputs = outputs[max(len(outputs)-3, 0):]
			want := []map[string]any{
				{"type": "function_call_output", "call_id": res.Calls[0].Call.ID, "namespace": "crm", "name": "lookup"},
				{"type": "function_call_output", "call_id": res.Calls[1].Call.ID, "namespace": "docs", "name": "lookup"},
				{"type": "function_call_output", "call_id": res.Calls[2].Call.ID},
			}
			if diff := cmp.Diff(want, outputs); diff != "" {
				t.Errorf("the function_call_output items sent, output aside (-want +got):\n%s", diff)
			}
			if tc.plain {
				return
			}
			opts := options(srv, tc.mode, false)
			opts.Definition, opts.Agent = nil, "test-agent"
			empty, err := core.NewToolbox()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"crm.lookup", "docs.lookup", "lookup"}, open(t, empty, opts).MissingTools()); diff != "" {
				t.Errorf("MissingTools of the agent made from the toolbox (-want +got):\n%s", diff)
			}
		})
	}
}
