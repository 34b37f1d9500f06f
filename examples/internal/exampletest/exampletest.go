// Package exampletest checks that an example behaves the same on every
// embedded fake, chosen by configuration alone.
package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
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
