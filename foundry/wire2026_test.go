package foundry_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	coredriver "github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/journal/driver"
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

// TestClientItems: an output item the client is to run that toolrelay
// cannot (a computer-use action, a shell command, a patch, a custom
// tool's call, a tool search executed by the client, a program; Foundry's
// workflow actions and structured outputs) never ends the run as an
// answer: the run ends with an error naming the item's kind, Unimplemented
// for a kind of tool toolrelay does not run, FailedPrecondition for an
// item of an agent that does not answer in messages; nothing is sent
// back, and no function of its step runs; and a resume of the thread, in
// another process, says the same.
func TestClientItems(t *testing.T) {
	for _, tc := range []struct {
		item string
		code errcode.Code
	}{
		{"custom_tool_call", errcode.Unimplemented},
		{"computer_call", errcode.Unimplemented},
		{"local_shell_call", errcode.Unimplemented},
		{"shell_call", errcode.Unimplemented},
		{"apply_patch_call", errcode.Unimplemented},
		{"tool_search_call", errcode.Unimplemented},
		{"program", errcode.Unimplemented},
		{"workflow_action", errcode.FailedPrecondition},
		{"structured_outputs", errcode.FailedPrecondition},
	} {
		for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
			stream := tc.code == errcode.FailedPrecondition || mode == foundry.Chain // both ways, by turns
			t.Run(tc.item+"/"+string(mode)+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				// The item alone in its step, or beside a function call
				// (which does not run either: the step is not answered).
				calls := []coretest.Call{{Name: "tool", Arguments: []byte(`{"query":"x"}`), Item: tc.item}}
				if mode == foundry.Chain {
					calls = append([]coretest.Call{{Name: "getUserFavoriteCity"}}, calls...)
				}
				script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Calls: calls}, {Text: "unreachable"}}}}}
				srv := newFake(t, script, nil)
				var c counter
				tools := toolbox(t, &c)
				opts := options(srv, mode, stream)
				opts.Keep = true
				res, err := newRunner(open(t, tools, opts), tools, nil).Run(t.Context(), "Do it.", nil)
				if err == nil {
					t.Fatalf("Run = %q, nil; want an error naming %s", res.Text, tc.item)
				}
				if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.item) {
					t.Errorf("Run = %v (%v), want %v naming %s", err, errcode.Of(err), tc.code, tc.item)
				}
				if n := len(results(srv)); n != 0 || len(c.get()) != 0 {
					t.Errorf("%d results sent, handlers run %v; want none (the step is not answered)", n, c.get())
				}
				if res == nil || res.Thread == "" {
					return // a chain's response is not a thread until the step is
				}
				_, err = newRunner(open(t, tools, opts), tools, nil).Resume(t.Context(), res.Thread, nil)
				if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.item) {
					t.Errorf("Resume = %v, want %v naming %s", err, tc.code, tc.item)
				}
			})
		}
	}
}

// TestOAuthConsent: the service's request that a person sign in to an MCP
// server (Foundry's oauth_consent_request) pauses the run as a service
// approval whose arguments carry the consent link; a second process that
// decides and resumes it finds the request again in the thread. Approved
// (the person signed in), the service is asked to go on, with no reply
// item; denied, the model is told, and answers.
func TestOAuthConsent(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "github", Consent: true}}},
		{Text: "After the sign-in: {{result 0}}"},
	}}}}
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		for _, approve := range []bool{true, false} {
			stream := approve == (mode == foundry.Chain) // both ways, by turns
			t.Run(string(mode)+map[bool]string{true: "/stream"}[stream]+map[bool]string{true: "/approved", false: "/denied"}[approve], func(t *testing.T) {
				srv := newFake(t, script, nil)
				tools := toolbox(t, &counter{})
				j := driver.NewMemory()
				opts := options(srv, mode, stream)
				opts.Keep = true
				res, err := newRunner(open(t, tools, opts), tools, j).Run(t.Context(), "List my issues.", nil)
				if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
					t.Fatalf("Run = %+v, %v; want a pause on the consent request", res, err)
				}
				a := res.Pending[0]
				var args struct {
					ServerLabel string `json:"server_label"`
					ConsentLink string `json:"consent_link"`
				}
				json.Unmarshal(a.Arguments, &args)
				if a.Tool != "github/oauth_consent" || args.ServerLabel != "github" || !strings.HasPrefix(args.ConsentLink, srv.URL+"/oauth/consent/") {
					t.Errorf("pending %s %s, want github/oauth_consent carrying the consent link", a.Tool, a.Arguments)
				}
				// Another process decides and resumes.
				r := newRunner(open(t, tools, opts), tools, j)
				d := core.Decision{Approved: true, Actor: "ada"}
				want := "After the sign-in: consented"
				if !approve {
					d = core.Decision{Reason: "not now", Actor: "ada"}
					want = `After the sign-in: The user did not sign in to "github" (OAuth consent), so its tools cannot be used: a person denied this call: not now`
				}
				if err := r.Decide(t.Context(), res.Thread, a.Key.Call, d); err != nil {
					t.Fatal(err)
				}
				res, err = r.Resume(t.Context(), res.Thread, nil)
				if err != nil {
					t.Fatalf("Resume: %v", err)
				}
				if res.Text != want {
					t.Errorf("answer = %q, want %q", res.Text, want)
				}
				checkNoRefusals(t, srv)
			})
		}
	}
}

// TestUnrunnableTools: Open looks at every tool of an existing agent: the
// tools whose calls the client is to run and toolrelay cannot (a
// computer-use tool, custom tools, in a namespace too, a tool search the
// client executes, a local shell) are warned about, naming the item their
// calls are, and reported by UnrunnableTools; the tools the service runs
// (a tool search it executes, a shell in its container, MCP, web search)
// are not; a namespace's functions are the toolbox's "ns.name" tools.
func TestUnrunnableTools(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	def := `{"definition":{"kind":"prompt","model":"gpt-4.1-mini","tools":[
		{"type":"function","name":"getUserFavoriteCity","parameters":{"type":"object","properties":{}}},
		{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"},
		{"type":"custom","name":"summarize"},
		{"type":"tool_search","execution":"client"},
		{"type":"tool_search"},
		{"type":"shell","environment":{"type":"local"}},
		{"type":"shell","environment":{"type":"container_auto"}},
		{"type":"mcp","server_label":"github","server_url":"https://github.example/mcp"},
		{"type":"web_search"},
		{"type":"namespace","name":"crm","description":"CRM","tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}},{"type":"custom","name":"note"}]}]}}`
	req, err := http.NewRequest("POST", srv.ProjectEndpoint()+"/agents/tooled/versions?api-version=v1", strings.NewReader(def))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("creating the agent: %v %v", resp, err)
	}
	resp.Body.Close()
	var logs strings.Builder
	opts := options(srv, foundry.Conversation, false)
	opts.Definition, opts.Agent = nil, "tooled"
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := open(t, toolbox(t, &counter{}), opts)
	for _, want := range []string{"tool=computer_use_preview", "item=computer_call", "code=Unimplemented", "name=summarize", "name=crm.note", "item=tool_search_call", "item=shell_call"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %s in:\n%s", want, logs.String())
		}
	}
	if diff := cmp.Diff([]string{"computer_use_preview", "custom crm.note", "custom summarize", "shell", "tool_search"}, b.UnrunnableTools()); diff != "" {
		t.Errorf("UnrunnableTools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"crm.lookup"}, b.MissingTools()); diff != "" {
		t.Errorf("MissingTools (-want +got):\n%s", diff)
	}
}
