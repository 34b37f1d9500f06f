// Package exampletest checks that an example behaves the same on every
// embedded fake, chosen by configuration alone.
package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/coretest"
)

// settings that would send an example elsewhere than where a test puts it.
var settings = []string{"TOOLRELAY_CONFIG", "TOOLRELAY_BACKEND", "TOOLRELAY_SCRIPT", "TOOLRELAY_CONCURRENCY", "TOOLRELAY_MAX_STEPS"}

// SameOnEveryFake runs the example's run function on fake-openai (chosen by
// TOOLRELAY_BACKEND) and on fake-foundry (chosen by a TOOLRELAY_CONFIG
// file), and checks that both print want.
func SameOnEveryFake(t *testing.T, run func(context.Context, io.Writer) error, want string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(file, []byte(`{"backend": "fake-foundry"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"fake-openai by environment", map[string]string{"TOOLRELAY_BACKEND": "fake-openai"}},
		{"fake-foundry by config file", map[string]string{"TOOLRELAY_CONFIG": file}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range settings {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			if err := run(t.Context(), &out); err != nil {
				t.Fatalf("run: %v", err)
			}
			if diff := cmp.Diff(want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// ScriptMatches checks that script, the one an example plays, is the one
// documented in the testdata file at path (which cmd/toolrelay-fake
// plays), comparing arguments as JSON values.
func ScriptMatches(t *testing.T, path string, script *coretest.Script) {
	t.Helper()
	want, err := coretest.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON := cmp.Comparer(func(a, b json.RawMessage) bool {
		var x, y any
		json.Unmarshal(a, &x)
		json.Unmarshal(b, &y)
		return cmp.Equal(x, y)
	})
	if diff := cmp.Diff(want, script, sameJSON); diff != "" {
		t.Errorf("script differs from %s (-testdata +example):\n%s", path, diff)
	}
}

// ClearEnv empties, for the test, every TOOLRELAY_ setting of the
// environment (but the TOOLRELAY_TEST_ ones, which tell tests where their
// services are), so that none sends the example elsewhere than where the
// test puts it.
func ClearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TOOLRELAY_") && !strings.HasPrefix(k, "TOOLRELAY_TEST_") {
			t.Setenv(k, "")
		}
	}
}

// GoRun runs the example in the test's directory as a user would, with
// go run and its environment cleared (ClearEnv), fails t unless it exits
// 0, and returns what it printed. It skips t in -short mode, and where
// the go command is missing.
func GoRun(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the program")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command: %v", err)
	}
	ClearEnv(t)
	cmd := exec.CommandContext(t.Context(), goBin, "run", ".")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}
