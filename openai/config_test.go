package openai_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// cleanEnv clears the settings the environment could hold, for the test.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"TOOLRELAY_CONFIG", "TOOLRELAY_BACKEND", "TOOLRELAY_SCRIPT", "OPENAI_API_KEY", "OPENAI_BASE_URL",
		"TOOLRELAY_OPENAI_AGENT", "TOOLRELAY_OPENAI_MODEL", "TOOLRELAY_INSTRUCTIONS", "TOOLRELAY_OPENAI_SESSION_ID",
		"TOOLRELAY_OPENAI_KEEP", "TOOLRELAY_OPENAI_TRANSPORT", "TOOLRELAY_OPENAI_POLL_INTERVAL", "TOOLRELAY_OPENAI_MAX_RECONNECTS"} {
		t.Setenv(k, "")
	}
}

func TestOpenAIConfigFromEnv(t *testing.T) {
	cleanEnv(t)
	env := map[string]string{
		"OPENAI_API_KEY":                  "sk-env",
		"OPENAI_BASE_URL":                 "http://127.0.0.1:1/v1",
		"TOOLRELAY_OPENAI_AGENT":          "agent_9",
		"TOOLRELAY_OPENAI_MODEL":          "gpt-x",
		"TOOLRELAY_INSTRUCTIONS":          "be brief",
		"TOOLRELAY_OPENAI_SESSION_ID":     "sess_9",
		"TOOLRELAY_OPENAI_KEEP":           "true",
		"TOOLRELAY_OPENAI_TRANSPORT":      "polling",
		"TOOLRELAY_OPENAI_POLL_INTERVAL":  "250ms",
		"TOOLRELAY_OPENAI_MAX_RECONNECTS": "5",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	req, err := adapter.NewRequest(nil, &adapter.Options{BackendSettings: []any{openai.Settings{Model: "from-code"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got openai.Settings
	if err := req.BackendSettings("openai", &got); err != nil {
		t.Fatal(err)
	}
	want := openai.Settings{
		APIKey: "sk-env", BaseURL: "http://127.0.0.1:1/v1", Agent: "agent_9", Model: "from-code",
		SessionID: "sess_9", Keep: true, Delivery: "polling",
		PollInterval: adapter.Duration(250 * time.Millisecond), MaxReconnects: 5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("openai settings (-want +got):\n%s", diff)
	}
}

// TestWireLimitsFromConfig checks that the shared settings of the
// service's limits reach the backend's options, a negative one included.
func TestWireLimitsFromConfig(t *testing.T) {
	cleanEnv(t)
	for k, v := range map[string]string{
		"TOOLRELAY_MAX_RESPONSE_BYTES": "1048576",
		"TOOLRELAY_MAX_EVENT_BYTES":    "-1",
		"TOOLRELAY_IDLE_TIMEOUT":       "90s",
		"TOOLRELAY_MAX_SILENCE":        "-1s",
	} {
		t.Setenv(k, v)
	}
	req, err := adapter.NewRequest(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := openai.OptionsFor(req)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence}
	if diff := cmp.Diff([]any{1 << 20, -1, 90 * time.Second, -time.Second}, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	t.Setenv("TOOLRELAY_IDLE_TIMEOUT", "soon")
	if _, err := adapter.NewRequest(nil, nil); err == nil || !strings.Contains(err.Error(), "TOOLRELAY_IDLE_TIMEOUT") {
		t.Errorf("a bad idle timeout: err = %v, want one naming TOOLRELAY_IDLE_TIMEOUT", err)
	}
}

func customerTools(t *testing.T) *core.Toolbox {
	t.Helper()
	tool, err := core.NewTool("get_customer", "Look up a customer by ID.", func(ctx context.Context, in struct {
		CustomerID string `json:"customer_id"`
	}) (string, error) {
		return "customer " + in.CustomerID + " is Example Customer on plan pro", nil
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

var customerScript = coretest.Simple("get_customer", `{"customer_id":"123"}`, `{{output "get_customer"}}`)

const customerAnswer = "customer 123 is Example Customer on plan pro"

func quiet() core.Options {
	return core.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestFakeOpenAI opens the embedded fake by default, with the program's
// script or the one TOOLRELAY_SCRIPT names, and refuses to open without one.
func TestFakeOpenAI(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, []byte(`{"turns":[{"steps":[{"calls":[{"name":"get_customer","arguments":{"customer_id":"123"}}]},{"text":"from file: {{output \"get_customer\"}}"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		script  *coretest.Script
		env     string
		want    string
		wantErr string
	}{
		{name: "program's script", script: customerScript, want: customerAnswer},
		{name: "script file", env: path, want: "from file: " + customerAnswer},
		{name: "no script", wantErr: "script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TOOLRELAY_SCRIPT", tt.env)
			runner, err := adapter.Open(t.Context(), customerTools(t), &adapter.Options{DefaultBackend: "fake-openai", BackendSettings: []any{coretest.FakeSettings{Script: tt.script}}, Runner: quiet()})
			if tt.wantErr != "" {
				if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want InvalidArgument naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer runner.Close()
			res, err := runner.Run(t.Context(), "customer 123?", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tt.want {
				t.Errorf("answer = %q, want %q", res.Text, tt.want)
			}
		})
	}
}

// TestOpenAIBackend opens the real openai backend by configuration, pointed
// at a fake server through the base URL setting.
func TestOpenAIBackend(t *testing.T) {
	cleanEnv(t)
	srv := openaitest.NewServer(customerScript, &openaitest.Options{APIKey: "sk-test"})
	defer srv.Close()
	t.Setenv("TOOLRELAY_BACKEND", "openai")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("TOOLRELAY_OPENAI_MODEL", "gpt-test")
	runner, err := adapter.Open(t.Context(), customerTools(t), &adapter.Options{DefaultBackend: "fake-openai", Runner: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(t.Context(), "customer 123?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != customerAnswer {
		t.Errorf("answer = %q", res.Text)
	}
	if err := runner.Close(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Sessions(); len(got) != 0 {
		t.Errorf("sessions left after Close: %v", got)
	}
	var model string
	for _, r := range srv.Requests() {
		if r.Method == "POST" && r.Path == "agents" {
			model = string(r.Body)
		}
	}
	if !strings.Contains(model, `"model":"gpt-test"`) {
		t.Errorf("agent request = %s, want the configured model", model)
	}
}
