package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

const want = `get_weather (the program): ok
to_celsius (MCP server units): ok
what_to_wear (MCP server units): ok
Agent: It is 59°F and cloudy (15.0°C) in Lisbon: wear a light jacket.
`

// TestRun: the MCP server's tools are offered beside the program's own,
// and called, on every fake backend chosen by configuration.
func TestRun(t *testing.T) {
	exampletest.SameOnEveryFake(t, run, want)
}

// TestScript: the example plays testdata/mcp.json, which
// cmd/toolrelay-fake plays for programs in other languages.
func TestScript(t *testing.T) {
	exampletest.ScriptMatches(t, "../../testdata/mcp.json", script)
}

// TestConfigFile: the MCP server named in a configuration file (this test
// binary started again as the server), on fake-responses.
func TestConfigFile(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"backend": "fake-responses",
		"mcp": map[string]any{"servers": map[string]any{
			"units": map[string]any{"command": self, "env": map[string]string{serveEnv: "${EXAMPLE_SERVE}"}},
		}},
	})
	file := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"TOOLRELAY_BACKEND", "TOOLRELAY_SCRIPT", "TOOLRELAY_MCP_SERVERS"} {
		t.Setenv(k, "")
	}
	t.Setenv("TOOLRELAY_CONFIG", file)
	t.Setenv("EXAMPLE_SERVE", "1")
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
