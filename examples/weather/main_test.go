package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

// TestRun checks the sample's expected output, in both ways of linking
// responses.
func TestRun(t *testing.T) {
	for _, mode := range []string{"", "previous_response_id"} {
		t.Run("mode="+mode, func(t *testing.T) {
			exampletest.ClearEnv(t)
			t.Setenv("TOOLRELAY_FOUNDRY_MODE", mode)
			var out bytes.Buffer
			if err := run(context.Background(), &out, noTrace); err != nil {
				t.Fatalf("run: %v", err)
			}
			want := "Calling getUserFavoriteCity...\n" +
				"Calling getCityNickname...\n" +
				"Calling getCurrentWeatherAtLocation...\n" +
				"Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f.\n"
			if diff := cmp.Diff(want, out.String()); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchemas checks that the tools' schemas are the sample's:
// descriptions, the location parameter, the unit enum with default "f".
func TestSchemas(t *testing.T) {
	tools, err := newTools()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"getUserFavoriteCity": {"Gets the user's favorite city.",
			`{"type":"object","additionalProperties":false}`},
		"getCityNickname": {"Gets the nickname of a city, e.g. 'LA' for 'Los Angeles, CA'.",
			`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"}},"required":["location"],"additionalProperties":false}`},
		"getCurrentWeatherAtLocation": {"Gets the current weather at a provided location.",
			`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","default":"f","enum":["c","f"]}},"required":["location"],"additionalProperties":false}`},
	}
	got := map[string][2]string{}
	for _, tool := range tools.Tools() {
		got[tool.Name()] = [2]string{tool.Description(), string(tool.Parameters())}
		if tool.Strict() {
			t.Errorf("%s is strict; the sample's tools are not", tool.Name())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
}

// TestFunctions checks the functions, including the cities they do not
// know and the unit's default.
func TestFunctions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		f       func() (string, error)
		want    string
		wantErr string
	}{
		{"favorite city", func() (string, error) { return getUserFavoriteCity(ctx, struct{}{}) }, "Seattle, WA", ""},
		{"nickname", func() (string, error) { return getCityNickname(ctx, nicknameArgs{"Seattle, WA"}) }, "The Emerald City", ""},
		{"unknown nickname", func() (string, error) { return getCityNickname(ctx, nicknameArgs{"Paris, FR"}) }, "", "no nickname is known for Paris, FR"},
		{"weather", func() (string, error) { return getCurrentWeatherAtLocation(ctx, weatherArgs{Location: "Seattle, WA"}) }, "70f", ""},
		{"weather in c", func() (string, error) { return getCurrentWeatherAtLocation(ctx, weatherArgs{"Seattle, WA", "c"}) }, "21c", ""},
		{"unknown weather", func() (string, error) { return getCurrentWeatherAtLocation(ctx, weatherArgs{Location: "Paris, FR"}) }, "", "no weather is known for Paris, FR"},
	} {
		got, err := tc.f()
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("%s = %q, %v; want %q, %q", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestScriptMatchesTestdata checks that the script the example plays is the
// one documented in testdata/, which cmd/toolrelay-fake plays.
func TestScriptMatchesTestdata(t *testing.T) {
	exampletest.ScriptMatches(t, "../../testdata/weather.json", script)
}

// TestSameOnEveryFake checks that configuration alone moves the example
// between the fakes, with the same output.
func TestSameOnEveryFake(t *testing.T) {
	exampletest.SameOnEveryFake(t, func(ctx context.Context, w io.Writer) error { return run(ctx, w, noTrace) }, "Calling getUserFavoriteCity...\nCalling getCityNickname...\nCalling getCurrentWeatherAtLocation...\n"+
		"Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f.\n")
}

// TestTraceTree: with -trace, the output holds the answer, then the spans
// as a tree, one line each: the look-up of a version of the agent's
// definition (the agents listed) and the version made before the run, the
// run, its steps with their HTTP requests inside and its calls between
// them, and the clean-up after; each with its duration and key
// attributes.
func TestTraceTree(t *testing.T) {
	exampletest.ClearEnv(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, traceTree); err != nil {
		t.Fatalf("run: %v", err)
	}
	_, tree, ok := strings.Cut(out.String(), "70f.\n\n17 spans:\n")
	if !ok {
		t.Fatalf("output %q, want the answer, then 17 spans", out.String())
	}
	want := []struct{ label, attrs string }{
		{"HTTP GET …/agents", "status=200"},
		{"HTTP POST …/agents/toolrelay-agent/versions", "status=200"},
		{"invoke_agent weather-bot", "thread=conv_"},
		{"├─ chat", "op=start calls=1 results=0 tokens in=10 out=5"},
		{"│  ├─ HTTP POST …/openai/v1/conversations", "status=200"},
		{"│  └─ HTTP POST …/openai/v1/responses", "status=200"},
		{"├─ execute_tool getUserFavoriteCity", "outcome=ok"},
		{"├─ chat", "op=submit calls=1 results=1"},
		{"│  └─ HTTP POST …/openai/v1/responses", "status=200"},
		{"├─ execute_tool getCityNickname", "outcome=ok"},
		{"├─ chat", "op=submit calls=1 results=1"},
		{"│  └─ HTTP POST …/openai/v1/responses", "status=200"},
		{"├─ execute_tool getCurrentWeatherAtLocation", "outcome=ok"},
		{"└─ chat", "op=submit calls=0 results=1"},
		{"   └─ HTTP POST …/openai/v1/responses", "status=200"},
		{"HTTP DELETE …/openai/v1/conversations/conv_", "status=200"},
		{"HTTP DELETE …/agents/toolrelay-agent/versions/1", "status=200"},
	}
	lines := strings.Split(strings.TrimSuffix(tree, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), tree)
	}
	for i, w := range want {
		_, rest, _ := strings.Cut(lines[i], "  ")
		if !strings.HasPrefix(lines[i], w.label) || !strings.Contains(rest, w.attrs) || !strings.ContainsAny(rest, "µm") {
			t.Errorf("line %d = %q, want %q with a duration and %q", i, lines[i], w.label, w.attrs)
		}
	}
}

// TestTrace: with -trace-json, the output holds the answer, then the
// spans of the run as JSON: the run, its steps and its three calls, each call's
// span inside the run's, each step's HTTP requests inside the step.
func TestTrace(t *testing.T) {
	exampletest.ClearEnv(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, traceJSON); err != nil {
		t.Fatalf("run: %v", err)
	}
	answer, rest, ok := strings.Cut(out.String(), "70f.\n")
	if !ok || !strings.HasPrefix(answer, "Calling getUserFavoriteCity...") {
		t.Fatalf("output %q, want the answer first", out.String())
	}
	type span struct {
		Name        string
		SpanContext struct{ SpanID string }
		Parent      struct{ SpanID string }
	}
	var spans []span
	dec := json.NewDecoder(strings.NewReader(rest))
	for dec.More() {
		var s span
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("span %d: %v", len(spans), err)
		}
		spans = append(spans, s)
	}
	names := map[string]string{}
	for _, s := range spans {
		names[s.SpanContext.SpanID] = s.Name
	}
	var got []string
	for _, s := range spans {
		if p := names[s.Parent.SpanID]; p != "" && !strings.HasPrefix(s.Name, "HTTP") && !strings.HasPrefix(s.Name, "POST") && !strings.HasPrefix(s.Name, "GET") {
			got = append(got, p+" > "+s.Name)
		}
	}
	sort.Strings(got)
	want := []string{
		"invoke_agent weather-bot > chat", "invoke_agent weather-bot > chat", "invoke_agent weather-bot > chat", "invoke_agent weather-bot > chat",
		"invoke_agent weather-bot > execute_tool getCityNickname",
		"invoke_agent weather-bot > execute_tool getCurrentWeatherAtLocation",
		"invoke_agent weather-bot > execute_tool getUserFavoriteCity",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if http := len(spans) - len(got) - 1; http < 4 {
		t.Errorf("%d HTTP spans, want at least one per step", http)
	}
}
