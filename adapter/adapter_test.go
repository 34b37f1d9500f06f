package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

func writeConfig(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadPrecedence checks that code wins over the environment, which
// wins over the file.
func TestLoadPrecedence(t *testing.T) {
	t.Setenv(adapter.ConfigFileEnv, writeConfig(t, map[string]any{
		"backend": "from-file", "max_steps": 3, "concurrency": 2, "tool_timeout": "5s",
		"settings": map[string]string{"region": "file", "zone": "file"},
	}))
	t.Setenv("TOOLRELAY_MAX_STEPS", "7")
	t.Setenv("TOOLRELAY_CONCURRENCY", "")
	t.Setenv("TOOLRELAY_SETTING_ZONE", "env")
	got, err := adapter.Load(&adapter.Config{Backend: "from-code"})
	if err != nil {
		t.Fatal(err)
	}
	want := &adapter.Config{
		Backend: "from-code", MaxSteps: 7, Concurrency: 2, ToolTimeout: adapter.Duration(5 * time.Second),
		Settings: map[string]string{"region": "file", "zone": "env"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"missing file", map[string]string{adapter.ConfigFileEnv: "/nonexistent/toolrelay.json"}, "config file"},
		{"unknown key", map[string]string{adapter.ConfigFileEnv: writeConfig(t, map[string]any{"backnd": "x"})}, `unknown field "backnd"`},
		{"bad number", map[string]string{"TOOLRELAY_MAX_STEPS": "ten"}, `TOOLRELAY_MAX_STEPS="ten"`},
		{"bad duration", map[string]string{"TOOLRELAY_TOOL_TIMEOUT": "5 parsecs"}, "TOOLRELAY_TOOL_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if _, err := adapter.Load(nil); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Load error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

var registerOnce = func() bool {
	adapter.Register("test-script", func(ctx context.Context, req *adapter.OpenRequest) (core.Backend, error) {
		if req.Script == nil {
			return nil, errors.New("test-script: no script")
		}
		return coretest.NewBackend(req.Script, &coretest.BackendOptions{Tools: req.Tools}), nil
	})
	return true
}()

func TestOpenByName(t *testing.T) {
	tool, err := core.NewTool("get_horoscope", "", func(_ context.Context, in struct {
		Sign string `json:"sign"`
	}) (string, error) {
		return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := core.NewToolbox(tool)
	script := coretest.Simple("get_horoscope", `{"sign":"Aquarius"}`, `{{output "get_horoscope"}}`)

	t.Setenv("TOOLRELAY_BACKEND", "test-script")
	t.Setenv("TOOLRELAY_MAX_STEPS", "1")
	r, err := adapter.Open(t.Context(), tb, &adapter.Options{DefaultBackend: "does-not-matter", Script: script})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Run(t.Context(), "What is my horoscope? I am an Aquarius.", nil)
	if err != nil || res.Text != "Aquarius: Next Tuesday you will befriend a baby otter." {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Setenv("TOOLRELAY_BACKEND", "")
	_, err := adapter.Open(t.Context(), nil, nil)
	if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), "no backend configured") {
		t.Errorf("Open with no backend: %v", err)
	}
	_, err = adapter.Open(t.Context(), nil, &adapter.Options{Config: adapter.Config{Backend: "opneai"}})
	if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), `unknown backend "opneai" (known: `) || !strings.Contains(err.Error(), "test-script") {
		t.Errorf("Open of an unknown backend: %v", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	open := func(context.Context, *adapter.OpenRequest) (core.Backend, error) { return nil, nil }
	for _, name := range []string{"test-script", "openai", "fake-foundry", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			adapter.Register(name, open)
		}()
	}
}

// TestDocListsEverySetting checks that the package doc's table names every
// environment variable and file key of Config.
func TestDocListsEverySetting(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	others, _ := filepath.Glob("*.go")
	for _, f := range others {
		if !strings.HasSuffix(f, "_test.go") && f != "config.go" && f != "doc.go" {
			b, _ := os.ReadFile(f)
			src = append(src, b...)
		}
	}
	for _, m := range regexp.MustCompile(`env:"([A-Z0-9_]+)"`).FindAllSubmatch(src, -1) {
		if !strings.Contains(string(doc), string(m[1])) {
			t.Errorf("doc.go does not list %s", m[1])
		}
	}
}
