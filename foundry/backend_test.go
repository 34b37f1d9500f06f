package foundry_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

const otter = "Aquarius: Next Tuesday you will befriend a baby otter."

// scenarios are the runs toolrelay must complete in both modes.
var scenarios = []struct {
	name   string
	script func() *coretest.Script
	// want is the final answer; runs counts the handler runs; results are
	// the outputs the service received, in order.
	want    string
	runs    map[string]int
	results []string
}{
	{
		name: "one call",
		script: func() *coretest.Script {
			return coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for Aquarius: {{output "get_horoscope"}}`)
		},
		want:    "Your horoscope for Aquarius: " + otter,
		runs:    map[string]int{"get_horoscope": 1},
		results: []string{"get_horoscope: " + otter},
	},
	{
		name: "parallel calls in one response",
		script: func() *coretest.Script {
			return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{
					{Name: "get_horoscope", Arguments: []byte(`{"sign": "Aquarius"}`)},
					{Name: "get_horoscope", Arguments: []byte(`{"sign": "Taurus"}`)},
					{Name: "getUserFavoriteCity"},
				}},
				{Text: `{{result 0}} / {{result 1}} / {{result 2}}`},
			}}}}
		},
		want:    otter + " / Taurus: Next Tuesday you will befriend a baby otter. / Seattle, WA",
		runs:    map[string]int{"get_horoscope": 2, "getUserFavoriteCity": 1},
		results: []string{"get_horoscope: " + otter, "get_horoscope: Taurus: Next Tuesday you will befriend a baby otter.", "getUserFavoriteCity: Seattle, WA"},
	},
	{
		name:    "the three-call weather chain",
		script:  weatherScript,
		want:    "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f.",
		runs:    map[string]int{"getUserFavoriteCity": 1, "getCityNickname": 1, "getCurrentWeatherAtLocation": 1},
		results: []string{"getUserFavoriteCity: Seattle, WA", "getCityNickname: The Emerald City", "getCurrentWeatherAtLocation: 70f"},
	},
	{
		name: "a failing function",
		script: func() *coretest.Script {
			return coretest.Simple("getStockPrice", `{}`, `Sorry: {{output "getStockPrice"}}`)
		},
		want:    `Sorry: {"error":"tool \"getStockPrice\" failed"}`,
		runs:    map[string]int{"getStockPrice": 1},
		results: []string{`getStockPrice: {"error":"tool \"getStockPrice\" failed"}`},
	},
	{
		name: "an unknown function",
		script: func() *coretest.Script {
			s := coretest.Simple("getTime", `{}`, `Sorry: {{output "getTime"}}`)
			s.Turns[0].Steps[0].Calls[0].Unoffered = true // a name the model made up
			return s
		},
		want:    `Sorry: {"error":"unknown tool \"getTime\"; available tools: get_horoscope, getUserFavoriteCity, getCityNickname, getCurrentWeatherAtLocation, getStockPrice, getChart"}`,
		runs:    map[string]int{},
		results: []string{`getTime: {"error":"unknown tool \"getTime\"; available tools: get_horoscope, getUserFavoriteCity, getCityNickname, getCurrentWeatherAtLocation, getStockPrice, getChart"}`},
	},
	{
		name: "a city the functions do not know",
		script: func() *coretest.Script {
			return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{
					{Name: "getCityNickname", Arguments: []byte(`{"location": "Paris, FR"}`)},
					{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "Paris, FR"}`)},
				}},
				{Text: `I could not find out: {{result 0}} {{result 1}}`},
			}}}}
		},
		want:    `I could not find out: {"error":"no nickname is known for Paris, FR"} {"error":"no weather is known for Paris, FR"}`,
		runs:    map[string]int{"getCityNickname": 1, "getCurrentWeatherAtLocation": 1},
		results: []string{`getCityNickname: {"error":"no nickname is known for Paris, FR"}`, `getCurrentWeatherAtLocation: {"error":"no weather is known for Paris, FR"}`},
	},
	{
		name:    "a content array",
		script:  func() *coretest.Script { return coretest.Simple("getChart", `{}`, `Here: {{output "getChart"}}`) },
		want:    `Here: [{"text":"a chart","type":"input_text"},{"image_url":"https://example.com/chart.png","type":"input_image"}]`,
		runs:    map[string]int{"getChart": 1},
		results: []string{`getChart: [{"text":"a chart","type":"input_text"},{"image_url":"https://example.com/chart.png","type":"input_image"}]`},
	},
}

// TestScenarios runs every scenario in both ways of linking responses,
// streaming and not, and checks the answer, the handler runs, what the
// service received, and that no request was refused.
func TestScenarios(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		for _, stream := range []bool{false, true} {
			for _, sc := range scenarios {
				name := string(mode) + "/" + sc.name
				if stream {
					name = string(mode) + "/stream/" + sc.name
				}
				t.Run(name, func(t *testing.T) {
					srv := newFake(t, sc.script(), &foundrytest.Options{Reasoning: true})
					var c counter
					tools := toolbox(t, &c)
					b := open(t, tools, options(srv, mode, stream))
					res, err := newRunner(b, tools, nil).Run(context.Background(), "What is my horoscope? I am an Aquarius.", nil)
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
					if res.Text != sc.want {
						t.Errorf("answer = %q, want %q", res.Text, sc.want)
					}
					if diff := cmp.Diff(sc.runs, c.get()); diff != "" {
						t.Errorf("handler runs mismatch (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(sc.results, results(srv)); diff != "" {
						t.Errorf("received results mismatch (-want +got):\n%s", diff)
					}
					steps := len(sc.results)
					if sc.name == "parallel calls in one response" || sc.name == "a city the functions do not know" {
						steps = 1
					}
					if res.Steps != steps {
						t.Errorf("steps = %d, want %d", res.Steps, steps)
					}
					wantUsage := int64(steps+1) * (foundrytest.DefaultUsage.InputTokens + foundrytest.DefaultUsage.OutputTokens)
					if res.Usage.TotalTokens != wantUsage {
						t.Errorf("usage = %+v, want total %d", res.Usage, wantUsage)
					}
					switch mode {
					case foundry.Conversation:
						if got := srv.Conversations(); len(got) != 1 || got[0] != res.Thread {
							t.Errorf("thread = %q, conversations = %v", res.Thread, got)
						}
					case foundry.Chain:
						if res.Thread != res.Turn || len(srv.Conversations()) != 0 {
							t.Errorf("thread = %q, turn = %q, conversations = %v; want the last response id", res.Thread, res.Turn, srv.Conversations())
						}
					}
					checkNoRefusals(t, srv)
				})
			}
		}
	}
}

// TestRequests checks what goes on the wire: the agent reference on every
// response request, the conversation or previous_response_id, one
// function_call_output per call, and never tools, the old agent key or a
// server-side item.
func TestRequests(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newFake(t, weatherScript(), &foundrytest.Options{Reasoning: true})
			var c counter
			tools := toolbox(t, &c)
			b := open(t, tools, options(srv, mode, false))
			if _, err := newRunner(b, tools, nil).Run(context.Background(), "What's the weather like in my favorite city?", nil); err != nil {
				t.Fatal(err)
			}
			var bodies []map[string]any
			for _, r := range srv.Requests() {
				if r.Op == foundrytest.OpCreateResponse {
					var m map[string]any
					json.Unmarshal(r.Body, &m)
					bodies = append(bodies, m)
				}
			}
			if len(bodies) != 4 {
				t.Fatalf("%d response requests, want 4", len(bodies))
			}
			prev := ""
			for i, m := range bodies {
				if diff := cmp.Diff(map[string]any{"type": "agent_reference", "name": "test-agent", "version": "1"}, m["agent_reference"]); diff != "" {
					t.Errorf("request %d agent_reference mismatch (-want +got):\n%s", i, diff)
				}
				for _, k := range []string{"agent", "tools", "tool_choice", "parallel_tool_calls", "text", "model"} {
					if _, ok := m[k]; ok {
						t.Errorf("request %d sends %q", i, k)
					}
				}
				input, _ := m["input"].([]any)
				switch {
				case i == 0 && mode == foundry.Conversation:
					if len(input) != 0 || m["conversation"] == nil {
						t.Errorf("first request = %v, want input [] in the conversation", m)
					}
				case i == 0:
					if len(input) != 1 || m["previous_response_id"] != nil {
						t.Errorf("first request = %v, want the user's message, no previous response", m)
					}
				default:
					if len(input) != 1 || input[0].(map[string]any)["type"] != "function_call_output" {
						t.Errorf("request %d input = %v, want one function_call_output", i, input)
					}
					if mode == foundry.Chain && (m["previous_response_id"] == nil || m["previous_response_id"] == prev) {
						t.Errorf("request %d previous_response_id = %v", i, m["previous_response_id"])
					}
				}
				if mode == foundry.Chain && m["previous_response_id"] != nil {
					prev = m["previous_response_id"].(string)
				}
			}
			checkNoRefusals(t, srv)
		})
	}
}

// TestAgentVersion checks the version Open creates from the toolbox, and
// that Close deletes it and the conversations it created, unless Keep.
func TestAgentVersion(t *testing.T) {
	for _, keep := range []bool{false, true} {
		srv := newFake(t, weatherScript(), nil)
		var c counter
		tools := toolbox(t, &c)
		opts := options(srv, foundry.Conversation, false)
		opts.Keep = keep
		b, err := foundry.Open(context.Background(), tools, opts)
		if err != nil {
			t.Fatal(err)
		}
		if name, version := b.Agent(); name != "test-agent" || version != "1" {
			t.Errorf("Agent() = %q, %q", name, version)
		}
		var def struct {
			Kind         string `json:"kind"`
			Model        string `json:"model"`
			Instructions string `json:"instructions"`
			Tools        []struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      bool            `json:"strict"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(srv.AgentDefinition("test-agent", "1"), &def); err != nil {
			t.Fatal(err)
		}
		if def.Kind != "prompt" || def.Model != "gpt-4.1-mini" || def.Instructions != "You are a helpful agent." || len(def.Tools) != len(tools.Tools()) {
			t.Errorf("definition = %+v", def)
		}
		for i, tool := range tools.Tools() {
			got := def.Tools[i]
			if got.Type != "function" || got.Name != tool.Name() || got.Description != tool.Description() || string(got.Parameters) != string(tool.Parameters()) || got.Strict != tool.Strict() {
				t.Errorf("tool %d = %+v, want %s %s strict=%v", i, got, tool.Name(), tool.Parameters(), tool.Strict())
			}
		}
		if _, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wantVersions, wantConvs := 0, 0
		if keep {
			wantVersions, wantConvs = 1, 1
		}
		if got := len(srv.AgentVersions("test-agent")); got != wantVersions {
			t.Errorf("keep=%v: %d versions left, want %d", keep, got, wantVersions)
		}
		if got := len(srv.Conversations()); got != wantConvs {
			t.Errorf("keep=%v: %d conversations left, want %d", keep, got, wantConvs)
		}
		checkNoRefusals(t, srv)
	}
}

// TestExistingAgent runs an agent the program did not create: Open checks
// it exists, the requests name it (and its version when given), and Close
// deletes nothing.
func TestExistingAgent(t *testing.T) {
	for _, version := range []string{"", "2"} {
		srv := newFake(t, weatherScript(), nil)
		srv.AddAgent("weather-bot", "gpt-4.1-mini")
		srv.AddAgent("weather-bot", "gpt-4.1")
		var c counter
		tools := toolbox(t, &c)
		opts := options(srv, foundry.Conversation, false)
		opts.Definition, opts.Agent, opts.AgentVersion = nil, "weather-bot", version
		b := open(t, tools, opts)
		if _, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if diff := cmp.Diff([]string{"1", "2"}, srv.AgentVersions("weather-bot")); diff != "" {
			t.Errorf("versions mismatch (-want +got):\n%s", diff)
		}
		for _, r := range srv.Requests() {
			if r.Op != foundrytest.OpCreateResponse {
				continue
			}
			var m struct {
				Ref map[string]any `json:"agent_reference"`
			}
			json.Unmarshal(r.Body, &m)
			want := map[string]any{"type": "agent_reference", "name": "weather-bot"}
			if version != "" {
				want["version"] = version
			}
			if diff := cmp.Diff(want, m.Ref); diff != "" {
				t.Errorf("agent_reference mismatch (-want +got):\n%s", diff)
			}
		}
		checkNoRefusals(t, srv)
	}
}

// TestCapabilities checks what the backend reports: a response format
// per run where the backend makes the agent, not with an existing one;
// namespaces of functions; OAuth consent requests.
func TestCapabilities(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	b := open(t, nil, options(srv, "", false))
	want := driver.Capabilities{ContentArrays: true, InputImages: true, InputFiles: true, ServiceApprovals: true, DeferredLoading: true, ResponseFormat: true, Namespaces: true, OAuthConsent: true}
	if diff := cmp.Diff(want, b.Capabilities()); diff != "" {
		t.Errorf("Capabilities mismatch (-want +got):\n%s", diff)
	}
	srv.AddAgent("weather-bot", "gpt-4.1-mini")
	o := options(srv, "", false)
	o.Definition, o.Agent = nil, "weather-bot"
	want.ResponseFormat = false
	if diff := cmp.Diff(want, open(t, nil, o).Capabilities()); diff != "" {
		t.Errorf("Capabilities of an existing agent mismatch (-want +got):\n%s", diff)
	}
	if b.Name() != "foundry" || b.Mode() != foundry.Conversation {
		t.Errorf("Name, Mode = %q, %q", b.Name(), b.Mode())
	}
}

// TestFailureOutput checks the documented format of a failed call's
// output.
func TestFailureOutput(t *testing.T) {
	got := foundry.FailureOutput(`unknown tool "x"`)
	if want := `{"error":"unknown tool \"x\""}`; got != want {
		t.Errorf("FailureOutput = %s, want %s", got, want)
	}
}

// TestExistingAgentTools checks the warnings about an existing agent whose
// function tools do not match the toolbox, and that the SDK objects are
// reachable.
func TestExistingAgentTools(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgent("bare-agent", "gpt-4.1-mini") // no tools
	var logs strings.Builder
	var c counter
	tools := toolbox(t, &c)
	opts := options(srv, foundry.Conversation, false)
	opts.Definition, opts.Agent = nil, "bare-agent"
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := open(t, tools, opts)
	for _, name := range tools.Names() {
		if !strings.Contains(logs.String(), "tool="+name) {
			t.Errorf("no warning about %s in:\n%s", name, logs.String())
		}
	}
	if strings.Contains(logs.String(), "test-token") {
		t.Errorf("the log shows the token:\n%s", logs.String())
	}
	if got := b.MissingTools(); len(got) != 0 {
		t.Errorf("MissingTools = %v, want none (the agent has no tools)", got)
	}
	if pl := b.Pipeline(); reflect.ValueOf(pl).IsZero() {
		t.Error("Pipeline() is the zero pipeline")
	}
	page, err := b.Client().Conversations.Items.List(context.Background(), "conv_nope", conversations.ItemListParams{})
	var oe *openai.Error
	if page != nil || !errors.As(err, &oe) || oe.StatusCode != 404 || b.ErrorCode(err) != errcode.NotFound {
		t.Errorf("Client() request = %v, %v; want a 404 *openai.Error", page, err)
	}
}

// TestMissingTools checks that the function tools of an existing agent that
// the toolbox lacks are reported, sorted, as the openai backend reports
// them.
func TestMissingTools(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	tools := toolbox(t, &counter{})
	opts := options(srv, foundry.Conversation, false)
	opts.Keep = true
	made := open(t, tools, opts) // a version with the three functions
	if got := made.MissingTools(); got != nil {
		t.Errorf("MissingTools of a created version = %v, want nil", got)
	}
	empty, err := core.NewToolbox()
	if err != nil {
		t.Fatal(err)
	}
	opts = options(srv, foundry.Conversation, false)
	opts.Definition, opts.Agent = nil, "test-agent"
	b := open(t, empty, opts)
	want := slices.Sorted(slices.Values(tools.Names()))
	if diff := cmp.Diff(want, b.MissingTools()); diff != "" {
		t.Errorf("MissingTools (-want +got):\n%s", diff)
	}
}
