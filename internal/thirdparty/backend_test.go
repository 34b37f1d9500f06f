// Package thirdparty_test holds a backend written as a third party would
// write one, outside the module's packages, with only the public driver
// and adapter APIs: it registers itself, reads settings of its own, and is
// selected by configuration exactly as the built-in backends are.
package thirdparty_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// echoSettings are the settings of the echo backend: section "echo" of the
// configuration file, or the environment.
type echoSettings struct {
	// Tool is the tool the model calls with the user's input.
	Tool string `json:"tool,omitempty" env:"ECHO_TOOL"`
	// Prefix starts every answer.
	Prefix string `json:"prefix,omitempty" env:"ECHO_PREFIX"`
}

// echo is a backend whose "model" calls one tool with the user's input as
// {"text": input} and answers with the tool's output.
type echo struct {
	s echoSettings

	mu      sync.Mutex
	threads int
}

func init() {
	adapter.Register("echo", func(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
		var s echoSettings
		if err := req.BackendSettings("echo", &s); err != nil {
			return nil, err
		}
		if s.Tool == "" {
			return nil, errcode.Errorf(errcode.InvalidArgument, "echo: no tool configured")
		}
		return &echo{s: s}, nil
	})
}

func (e *echo) Name() string { return "echo" }

func (e *echo) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	thread := req.Thread
	if thread == "" {
		e.mu.Lock()
		e.threads++
		thread = "thread-" + strconv.Itoa(e.threads)
		e.mu.Unlock()
	}
	args, _ := json.Marshal(map[string]string{"text": req.Input})
	return &driver.Step{Thread: thread, Turn: "turn-1", Calls: []driver.Call{{
		Thread: thread, Turn: "turn-1", ID: "call-1", Name: e.s.Tool, Arguments: args,
	}}}, nil
}

func (e *echo) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	r := req.Results[0]
	if r.Failed {
		return &driver.Step{Thread: req.Step.Thread, Text: e.s.Prefix + "failed: " + r.Error}, nil
	}
	return &driver.Step{Thread: req.Step.Thread, Text: e.s.Prefix + r.Output.String()}, nil
}

func (e *echo) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return nil, errcode.Errorf(errcode.NotFound, "echo: no thread %q", thread)
}

func (e *echo) ErrorCode(err error) errcode.Code { return errcode.Of(err) }

func (e *echo) Close() error { return nil }

func shout(t *testing.T) *core.Toolbox {
	t.Helper()
	tool, err := core.NewTool("shout", "Shout the text.", func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return fmt.Sprintf("%s!", in.Text), nil
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

// TestThirdPartyBackend selects the echo backend by configuration — the
// environment, the configuration file, and code — as a program selects a
// built-in one.
func TestThirdPartyBackend(t *testing.T) {
	file := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(file, []byte(`{"backend": "echo", "echo": {"tool": "shout", "prefix": "file: "}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		opts *adapter.Options
		want string
	}{
		{"environment", map[string]string{"TOOLRELAY_BACKEND": "echo", "ECHO_TOOL": "shout", "ECHO_PREFIX": "env: "}, nil, "env: hello!"},
		{"file", map[string]string{adapter.SettingsFileEnv: file}, nil, "file: hello!"},
		{"file and code", map[string]string{adapter.SettingsFileEnv: file}, &adapter.Options{BackendSettings: []any{echoSettings{Prefix: "code: "}}}, "code: hello!"},
		{"default backend", map[string]string{"ECHO_TOOL": "shout"}, &adapter.Options{DefaultBackend: "echo"}, "hello!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"TOOLRELAY_BACKEND", adapter.SettingsFileEnv, "ECHO_TOOL", "ECHO_PREFIX"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r, err := adapter.Open(t.Context(), shout(t), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.Run(t.Context(), "hello", nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Text); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing setting", func(t *testing.T) {
		t.Setenv("TOOLRELAY_BACKEND", "echo")
		t.Setenv("ECHO_TOOL", "")
		t.Setenv(adapter.SettingsFileEnv, "")
		_, err := adapter.Open(t.Context(), shout(t), nil)
		if errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("Open without the tool setting = %v, want InvalidArgument", err)
		}
	})
}
