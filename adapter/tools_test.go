package adapter_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestToolsNotLinked: a configuration naming MCP servers, in a program that
// does not link package mcptools, fails to open, naming the import.
func TestToolsNotLinked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(file, []byte(`{"backend": "test-script", "mcp": {"servers": {"units": {"command": "units"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"file":        {"TOOLRELAY_CONFIG": file},
		"environment": {"TOOLRELAY_BACKEND": "test-script", "TOOLRELAY_MCP_SERVERS": `{"units": {"command": "units"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"TOOLRELAY_CONFIG", "TOOLRELAY_BACKEND", "TOOLRELAY_MCP_SERVERS"} {
				t.Setenv(k, env[k])
			}
			_, err := adapter.Open(t.Context(), nil, &adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: coretest.Simple("x", `{}`, "y")}}})
			if !errors.Is(err, errcode.Unimplemented) || !strings.Contains(err.Error(), `import _ "github.com/toolrelay/toolrelay/mcptools"`) {
				t.Errorf("Open: %v, want Unimplemented naming mcptools", err)
			}
		})
	}
}

type closer struct{ closed *bool }

func (c closer) Close() error { *c.closed = true; return nil }

// TestToolSource: a registered tool source adds its tools before the
// backend is opened (which offers them), and what it opened closes with
// the runner.
// sourceSettings turn the test's tool source on.
type sourceSettings struct {
	On bool `json:"on" env:"TOOLRELAY_TEST_SOURCE"`
}

var sourceClosed bool

var registerSource = func() bool {
	adapter.RegisterTools("test-source", func(ctx context.Context, req *adapter.OpenRequest) (io.Closer, error) {
		var s sourceSettings
		if err := req.BackendSettings("test-source", &s); err != nil || !s.On {
			return nil, err
		}
		echo, err := core.NewTool("echo", "", func(_ context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return in.Text, nil
		}, nil)
		if err != nil {
			return nil, err
		}
		return closer{&sourceClosed}, req.Tools.Add(echo)
	})
	return true
}()

func TestToolSource(t *testing.T) {
	sourceClosed = false
	for _, k := range []string{"TOOLRELAY_CONFIG", "TOOLRELAY_MCP_SERVERS"} {
		t.Setenv(k, "")
	}
	t.Setenv("TOOLRELAY_BACKEND", "test-script")
	r, err := adapter.Open(t.Context(), nil, &adapter.Options{BackendSettings: []any{sourceSettings{On: true}, coretest.FakeSettings{Script: coretest.Simple("echo", `{"text":"from the source"}`, `{{output "echo"}}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), "echo", nil)
	if err != nil || res.Text != "from the source" {
		t.Errorf("Run = %+v, %v", res, err)
	}
	r.Close()
	if !sourceClosed {
		t.Error("the source's closer was not closed with the runner")
	}
}
