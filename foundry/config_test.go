package foundry_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

func fakeFoundryTools(t *testing.T) *core.Toolbox {
	t.Helper()
	type args struct {
		Sign string `json:"sign"`
	}
	tool, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.",
		func(_ context.Context, in args) (string, error) {
			return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

var fakeFoundryScript = coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for Aquarius: {{output "get_horoscope"}}`)

const fakeFoundryAnswer = "Your horoscope for Aquarius: Aquarius: Next Tuesday you will befriend a baby otter."

// TestFakeFoundry runs the loop through the adapter on the embedded fake
// Foundry project, in both modes and streaming, with the script given in
// code or in the file TOOLRELAY_SCRIPT names.
func TestFakeFoundry(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "script.json")
	if err := os.WriteFile(file, []byte(`{"turns":[{"steps":[{"calls":[{"name":"get_horoscope","arguments":{"sign":"Aquarius"}}]},{"text":"Your horoscope for Aquarius: {{output \"get_horoscope\"}}"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		script *coretest.Script
		mode   string
	}{
		{name: "script in code", script: fakeFoundryScript},
		{name: "script file", env: map[string]string{"TOOLRELAY_SCRIPT": file}},
		{name: "chain", script: fakeFoundryScript, env: map[string]string{"TOOLRELAY_FOUNDRY_MODE": "previous_response_id"}, mode: "previous_response_id"},
		{name: "stream", script: fakeFoundryScript, env: map[string]string{"TOOLRELAY_FOUNDRY_TRANSPORT": "streaming"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r, err := adapter.Open(context.Background(), fakeFoundryTools(t), &adapter.Options{DefaultBackend: "fake-foundry", BackendSettings: []any{coretest.FakeSettings{Script: tc.script}}, Runner: core.Options{Logger: fakeFoundryLogger()}})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			srv := r.Backend().(interface{ Server() *foundrytest.Server }).Server()
			res, err := r.Run(context.Background(), "What is my horoscope? I am an Aquarius.", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != fakeFoundryAnswer {
				t.Errorf("answer = %q", res.Text)
			}
			if r.Backend().Name() != "foundry" {
				t.Errorf("Name = %q", r.Backend().Name())
			}
			if err := r.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := srv.AgentVersions("toolrelay-agent"); len(got) != 0 {
				t.Errorf("agent versions left after Close: %v", got)
			}
			var ops []foundrytest.Op
			for _, q := range srv.Requests() {
				if q.Status != 200 {
					t.Errorf("%s answered %d: %s", q.Op, q.Status, q.Error)
				}
				ops = append(ops, q.Op)
			}
			want := []foundrytest.Op{foundrytest.OpListAgents, foundrytest.OpCreateAgentVersion, foundrytest.OpCreateConversation, foundrytest.OpCreateResponse, foundrytest.OpCreateResponse, foundrytest.OpDeleteConversation, foundrytest.OpDeleteAgentVersion}
			if tc.mode == "previous_response_id" {
				want = []foundrytest.Op{foundrytest.OpListAgents, foundrytest.OpCreateAgentVersion, foundrytest.OpCreateResponse, foundrytest.OpCreateResponse, foundrytest.OpDeleteAgentVersion}
			}
			if diff := cmp.Diff(want, ops); diff != "" {
				t.Errorf("requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFakeResponses runs the horoscope on the fake-responses backend,
// selected by configuration alone: the responses backend over an embedded
// fake of the plain Responses API, in both modes.
func TestFakeResponses(t *testing.T) {
	for _, mode := range []string{"", "conversation"} {
		t.Run("mode "+mode, func(t *testing.T) {
			t.Setenv("TOOLRELAY_RESPONSES_MODE", mode)
			r, err := adapter.Open(context.Background(), fakeFoundryTools(t), &adapter.Options{DefaultBackend: "fake-responses", BackendSettings: []any{coretest.FakeSettings{Script: fakeFoundryScript}}, Runner: core.Options{Logger: fakeFoundryLogger()}})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer r.Close()
			res, err := r.Run(context.Background(), "What is my horoscope? I am an Aquarius.", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != fakeFoundryAnswer || r.Backend().Name() != "responses" {
				t.Errorf("answer = %q from %q, want %q from responses", res.Text, r.Backend().Name(), fakeFoundryAnswer)
			}
		})
	}
}

// TestFakeFoundryNeedsScript checks that fake-foundry refuses to open
// without a script.
func TestFakeFoundryNeedsScript(t *testing.T) {
	t.Setenv("TOOLRELAY_SCRIPT", "")
	_, err := adapter.Open(context.Background(), fakeFoundryTools(t), &adapter.Options{DefaultBackend: "fake-foundry"})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "script") {
		t.Errorf("Open = %v, want InvalidArgument about the script", err)
	}
}

// TestFoundrySettings checks that the foundry settings are read from the
// environment, including the endpoint under the samples' name.
func TestFoundrySettings(t *testing.T) {
	for k, v := range map[string]string{
		"AZURE_AI_PROJECT_ENDPOINT":       "https://r.services.ai.azure.com/api/projects/p",
		"AGENT_TOKEN":                     "tok",
		"TOOLRELAY_FOUNDRY_API_KEY":       "key",
		"TOOLRELAY_FOUNDRY_AGENT":         "weather-bot",
		"TOOLRELAY_FOUNDRY_AGENT_VERSION": "3",
		"TOOLRELAY_FOUNDRY_MODEL":         "gpt-4.1",
		"TOOLRELAY_INSTRUCTIONS":          "Be brief.",
		"TOOLRELAY_FOUNDRY_MODE":          "previous_response_id",
		"TOOLRELAY_FOUNDRY_TRANSPORT":     "streaming",
		"TOOLRELAY_FOUNDRY_KEEP":          "1",
	} {
		t.Setenv(k, v)
	}
	req, err := adapter.NewRequest(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got foundry.Settings
	if err := req.BackendSettings("foundry", &got); err != nil {
		t.Fatal(err)
	}
	want := foundry.Settings{
		Endpoint: "https://r.services.ai.azure.com/api/projects/p", Token: "tok", APIKey: "key",
		Agent: "weather-bot", AgentVersion: "3", Model: "gpt-4.1",
		Mode: "previous_response_id", Delivery: "streaming", Keep: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("foundry settings mismatch (-want +got):\n%s", diff)
	}
	o, err := foundry.OptionsFor(req)
	if err != nil {
		t.Fatal(err)
	}
	if o.Definition == nil || o.Definition.Instructions != "Be brief." || o.Definition.Name != "weather-bot" || o.Definition.Model != "gpt-4.1" {
		t.Errorf("OptionsFor: agent definition %+v, want weather-bot on gpt-4.1 with the shared instructions", o.Definition)
	}
}

// TestFoundryOpenWiring opens the foundry backend through the adapter
// with endpoints that fail before any request, to check which settings
// reach it.
func TestFoundryOpenWiring(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		msg  string
	}{
		{"no endpoint", map[string]string{}, "no project endpoint"},
		{"AZURE_AI_PROJECT_ENDPOINT", map[string]string{"AZURE_AI_PROJECT_ENDPOINT": "http://127.0.0.1:1/api/projects/a", "AGENT_TOKEN": "t"}, `token authentication needs an https endpoint, not "http://127.0.0.1:1/api/projects/a"`},
		{"FOUNDRY_PROJECT_ENDPOINT", map[string]string{"FOUNDRY_PROJECT_ENDPOINT": "http://127.0.0.1:1/api/projects/b", "AGENT_TOKEN": "t"}, `"http://127.0.0.1:1/api/projects/b"`},
		{"api key", map[string]string{"FOUNDRY_PROJECT_ENDPOINT": "http://127.0.0.1:1/api/projects/b", "TOOLRELAY_FOUNDRY_API_KEY": "k"}, "API key authentication needs an https endpoint"},
		{"agent name", map[string]string{"AZURE_AI_PROJECT_ENDPOINT": "https://127.0.0.1:1/p", "AGENT_TOKEN": "t", "TOOLRELAY_FOUNDRY_AGENT": "not a name"}, `invalid agent name "not a name"`},
		{"mode", map[string]string{"AZURE_AI_PROJECT_ENDPOINT": "https://127.0.0.1:1/p", "AGENT_TOKEN": "t", "TOOLRELAY_FOUNDRY_MODE": "threads"}, `unknown mode "threads"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"AZURE_AI_PROJECT_ENDPOINT", "FOUNDRY_PROJECT_ENDPOINT", "AGENT_TOKEN", "TOOLRELAY_FOUNDRY_API_KEY", "TOOLRELAY_FOUNDRY_AGENT", "TOOLRELAY_FOUNDRY_MODE"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := adapter.Open(context.Background(), fakeFoundryTools(t), &adapter.Options{Settings: adapter.Settings{Backend: "foundry"}})
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Open = %v, want InvalidArgument containing %q", err, tc.msg)
			}
		})
	}
}

func fakeFoundryLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
