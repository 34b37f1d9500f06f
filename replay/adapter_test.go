package replay_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	_ "github.com/toolrelay/toolrelay/openai/openaitest" // fake-openai and openai
)

// lookupTools is a toolbox of one tool, lookup, that answers "found
// <id>".
func lookupTools(t *testing.T) *core.Toolbox { return lookupToolbox(t) }

// lookupToolbox is lookupTools for a test or a benchmark.
func lookupToolbox(t testing.TB) *core.Toolbox {
	t.Helper()
	type args struct {
		ID string `json:"id"`
	}
	tool, err := core.NewTool("lookup", "Look up an id.", func(_ context.Context, a args) (string, error) { return "found " + a.ID, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// runWith opens a runner with the environment given and runs one
// question, returning the answer.
func runWith(t *testing.T, env map[string]string, opts *adapter.Options) (string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	r, err := adapter.Open(t.Context(), lookupTools(t), opts)
	if err != nil {
		return "", err
	}
	res, err := r.Run(t.Context(), "look up 7", nil)
	if cerr := r.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return res.Text, nil
}

// TestReplaySetting records a run on the fake through the replay setting
// alone (TOOLRELAY_REPLAY), replays it on the real backend with no service
// behind its base URL, and replays a tampered copy, which fails with the
// difference.
func TestReplaySetting(t *testing.T) {
	t.Setenv("TOOLRELAY_CONFIG", "")
	file := filepath.Join(t.TempDir(), "run.yaml")
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
	live, err := runWith(t, map[string]string{"TOOLRELAY_BACKEND": "fake-openai", "TOOLRELAY_REPLAY": "record:" + file},
		&adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: script}}})
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	if live != "answer: found 7" {
		t.Fatalf("recorded answer %q", live)
	}
	// The real backend, on a base URL where nothing listens.
	offline := map[string]string{"TOOLRELAY_BACKEND": "openai", "TOOLRELAY_REPLAY": "replay:" + file,
		"OPENAI_API_KEY": "sk-replay-no-key", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
	replayed, err := runWith(t, offline, nil)
	if err != nil {
		t.Fatalf("replaying: %v", err)
	}
	if replayed != live {
		t.Errorf("replayed answer %q, recorded %q", replayed, live)
	}

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The recorded result the program sent: as if the tool had answered
	// otherwise when recorded.
	sent := `"output":"found 7","type":"agent.session.input.tool_result"`
	tampered := strings.Replace(string(b), sent, strings.Replace(sent, "7", "8", 1), 1)
	if tampered == string(b) {
		t.Fatal("the cassette does not hold the results sent")
	}
	if err := os.WriteFile(file, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runWith(t, offline, nil)
	if errcode.Of(err) != errcode.FailedPrecondition {
		t.Fatalf("replaying a tampered cassette: %v, want code FailedPrecondition", err)
	}
	for _, want := range []string{"is not recorded", "nearest recorded request", "found 8", "found 7", "-recorded +sent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

func TestReplaySettingRefused(t *testing.T) {
	t.Setenv("TOOLRELAY_CONFIG", "")
	for _, v := range []string{"cassette.yaml", "play:c.yaml", "replay:c.json"} {
		t.Setenv("TOOLRELAY_REPLAY", v)
		_, err := adapter.Load(nil)
		if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "TOOLRELAY_REPLAY") || strings.Contains(err.Error(), v) {
			t.Errorf("TOOLRELAY_REPLAY=%s: %v, want InvalidArgument naming the variable, not the value", v, err)
		}
	}
}
