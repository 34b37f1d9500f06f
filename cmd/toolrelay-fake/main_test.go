package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The test binary doubles as the command: with TOOLRELAY_FAKE_MAIN set, it
// runs main instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLRELAY_FAKE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// start runs the command with args and returns the settings it printed.
func start(t *testing.T, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE_MAIN=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	settings := map[string]string{}
	lines := bufio.NewScanner(out)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		k, v, _ := strings.Cut(lines.Text(), "=")
		settings[k] = v
		if k == "BASE_URL" && (args[1] == "openai" || args[0] == "-replay") || k == "CERT" {
			break
		}
	}
	if settings["BASE_URL"] == "" {
		t.Fatalf("the command printed no BASE_URL: %v", settings)
	}
	return settings
}

// TestFoundryFake starts the command, points the unmodified openai-go
// client at it (trusting the certificate it wrote) and completes a run of
// the horoscope flow over the Responses API.
func TestFoundryFake(t *testing.T) {
	s := start(t, "-backend", "foundry", "-script", "../../testdata/horoscope.json", "-addr", "127.0.0.1:0")
	pem, err := os.ReadFile(s["CERT"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("the certificate file holds no certificate")
	}
	client := openai.NewClient(
		option.WithBaseURL(s["OPENAI_BASE_URL"]),
		option.WithAPIKey("any-token"),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}),
	)
	ctx := context.Background()
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_horoscope", map[string]any{
		"type": "object", "properties": map[string]any{"sign": map[string]any{"type": "string"}}, "required": []string{"sign"},
	}, false)}
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-4.1-mini", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my horoscope? I am an Aquarius.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var outputs responses.ResponseInputParam
	for _, o := range resp.Output {
		if o.Type == "function_call" {
			fc := o.AsFunctionCall()
			if fc.Name != "get_horoscope" || !strings.Contains(fc.Arguments, "Aquarius") {
				t.Fatalf("function call %s(%s)", fc.Name, fc.Arguments)
			}
			it := responses.ResponseInputItemParamOfFunctionCallOutput("Aquarius: Next Tuesday you will befriend a baby otter.")
			it.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
			outputs = append(outputs, it)
		}
	}
	if len(outputs) != 1 {
		t.Fatalf("output %+v, want one function call", resp.Output)
	}
	final, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-4.1-mini", Tools: tools, PreviousResponseID: openai.String(resp.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: outputs},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := final.OutputText(), "Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter."; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-backend", "foundry"}, "-script is required"},
		{[]string{"-backend", "gemini", "-script", "../../testdata/weather.json"}, "-backend must be openai, foundry or responses"},
		{[]string{"-backend", "foundry", "-script", "../../testdata/weather.json", "-addr", "0.0.0.0:0"}, "loopback addresses only"},
		{[]string{"-backend", "foundry", "-script", "nope.json"}, "no such file"},
	}
	for _, tt := range tests {
		err := run(t.Context(), tt.args, os.Stdout)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("run(%v) = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

// TestOpenAIFake starts the command and completes the customer flow with
// the unmodified openai-go client and its own tool helper.
func TestOpenAIFake(t *testing.T) {
	s := start(t, "-backend", "openai", "-script", "../../testdata/customer.json")
	client := openai.NewClient(option.WithBaseURL(s["BASE_URL"]), option.WithAPIKey("any-token"))
	ctx := context.Background()
	agent, err := client.Beta.Agents.New(ctx, openai.BetaAgentNewParams{Model: "gpt-4.1-mini", Tools: []openai.PersistedAgentToolParamUnion{
		openai.PersistedAgentToolParamOfParamFunction("Look up a customer by ID.", "get_customer", map[string]any{
			"type": "object", "properties": map[string]any{"customer_id": map[string]any{"type": "string"}},
			"required": []string{"customer_id"}, "additionalProperties": false,
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Beta.Agents.Sessions.NewStreaming(ctx, openai.BetaAgentSessionNewParams{
		Environment: openai.EnvironmentParamUnion{OfParamNone: &openai.EnvironmentParamNone{}},
		AgentID:     openai.String(agent.ID),
		Input:       openai.BetaAgentSessionNewParamsInputUnion{OfString: openai.String("Who is customer 123?")},
		ToolHandlers: map[string]openai.AgentToolHandler{"get_customer": func(_ context.Context, args map[string]any) (any, error) {
			if args["customer_id"] != "123" {
				return map[string]any{"found": false}, nil
			}
			return map[string]any{"found": true, "customer": map[string]any{"name": "Example Customer", "plan": "pro"}}, nil
		}},
	})
	res, err := openai.BetaAgentSessionFinalResult(stream)
	if err != nil {
		t.Fatal(err)
	}
	want := `Here is what I found for customer 123: {"customer":{"name":"Example Customer","plan":"pro"},"found":true}`
	if got := res.OutputText(); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}

// TestFaultsFile: faults from a -faults file reach the wire, on the
// request they name: the first responses.create answered 429 with its
// Retry-After, a session's results request 500, a stream's events twice.
func TestFaultsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("responses", func(t *testing.T) {
		faults := write("r.json", `[{"on": "responses.create", "status": 429, "retry_after_ms": 1500, "message": "slow down"}]`)
		s := start(t, "-backend", "responses", "-script", "../../testdata/horoscope.json", "-faults", faults)
		pem, err := os.ReadFile(s["CERT"])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		post := func() *http.Response {
			req, _ := http.NewRequest("POST", s["BASE_URL"]+"responses", strings.NewReader(`{"model":"gpt-4.1-mini","input":"hi"}`))
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		if res := post(); res.StatusCode != 429 || res.Header.Get("Retry-After-Ms") != "1500" {
			t.Errorf("first request: %d, retry-after-ms %q; want 429, 1500", res.StatusCode, res.Header.Get("Retry-After-Ms"))
		}
		if res := post(); res.StatusCode != 200 {
			t.Errorf("second request: %d, want 200 (times 1)", res.StatusCode)
		}
	})
	t.Run("openai", func(t *testing.T) {
		// The first entry matches nothing sent: each request gets the
		// first entry that matches it, the second here, then the third.
		faults := write("o.json", `[{"on": "GET agents"}, {"on": "POST agents/sessions/*/events", "status": 429, "retry_after_ms": 700},
			{"on": "POST agents/sessions/*/events", "status": 500}]`)
		s := start(t, "-backend", "openai", "-script", "../../testdata/customer.json", "-faults", faults)
		post := func(path, body string) *http.Response {
			req, _ := http.NewRequest("POST", s["BASE_URL"]+"/"+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		const cancel = `{"events":[{"type":"agent.session.input.cancel"}]}`
		if res := post("agents/sessions/sess_x/events", cancel); res.StatusCode != 429 || res.Header.Get("Retry-After-Ms") != "700" {
			t.Errorf("first events request: %d, retry-after-ms %q; want the injected 429, 700", res.StatusCode, res.Header.Get("Retry-After-Ms"))
		}
		if res := post("agents/sessions/sess_x/events", cancel); res.StatusCode != 500 {
			t.Errorf("second events request: %d, want the injected 500", res.StatusCode)
		}
	})
	t.Run("bad file", func(t *testing.T) {
		faults := write("bad.json", `[{"status": 500}]`)
		cmd := exec.Command(os.Args[0], "-backend", "openai", "-script", "../../testdata/customer.json", "-faults", faults)
		cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `"on" is required`) {
			t.Errorf("a fault without \"on\": %v, %s; want it refused", err, out)
		}
	})
}

// TestFaultsRefused: a -faults entry that would load but never fire (or
// not as written) is refused at load, naming the entry and what is wrong.
func TestFaultsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"times overflows", `[{"on": "*"}, {"on": "*", "nth": 2, "times": 9223372036854775807}]`, `fault 1 (from 0): "nth" 2 and "times" 9223372036854775807 overflow`},
		{"times past an int", `[{"on": "*", "times": 1e30}]`, "fault 0 (from 0): json: cannot unmarshal number 1e30"},
		{"negative nth", `[{"on": "*", "nth": -1}]`, `fault 0 (from 0): "nth" is negative`},
		{"negative times", `[{"on": "*", "times": -3}]`, `fault 0 (from 0): "times" is negative`},
		{"negative delay", `[{"on": "*", "delay_ms": -3}]`, `"delay_ms" is negative`},
		{"bad path pattern", `[{"on": "POST agents/sessions/[/events"}]`, `fault 0 (from 0): "on" "POST agents/sessions/[/events": the path pattern does not parse`},
		{"lower-case method", `[{"on": "post agents"}]`, `want "METHOD path"`},
		{"unknown operation", `[{"on": "responses.creat"}]`, `"on" "responses.creat" is no operation`},
		{"bad status", `[{"on": "*", "status": 9000}]`, `"status" 9000 is not an HTTP status`},
		{"unknown field", `[{"on": "*", "statuss": 500}]`, `fault 0 (from 0): json: unknown field "statuss"`},
		{"not an array", `{"on": "*"}`, "want a JSON array of faults"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "faults.json")
			if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadFaults(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadFaults: %v; want an error saying %q", err, tc.want)
			}
		})
	}
	// What loads fires.
	p := filepath.Join(t.TempDir(), "faults.json")
	os.WriteFile(p, []byte(`[{"on": "POST agents/sessions/*/events", "nth": 2, "times": 2}, {"on": "responses.create"}]`), 0o644)
	specs, err := loadFaults(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for range 4 {
		got = append(got, specs[0].take("POST", "agents/sessions/s1/events", ""))
	}
	if want := []bool{false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("nth 2, times 2: fired %v, want %v", got, want)
	}
}
