package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

// clearEnv unsets the settings that would send the example elsewhere than
// the embedded fake.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"TOOLRELAY_CONFIG", "TOOLRELAY_BACKEND", "TOOLRELAY_SCRIPT"} {
		t.Setenv(k, "")
	}
}

func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"Calling get_customer...", "Agent response:", "Example Customer", `"plan":"pro"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRun(t *testing.T) {
	clearEnv(t)
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkOutput(t, out.String())
	if n := strings.Count(out.String(), "Calling "); n != 1 {
		t.Errorf("%d calls printed, want 1", n)
	}
}

func TestGetCustomer(t *testing.T) {
	tests := []struct {
		id   string
		want lookup
	}{
		{"123", lookup{Found: true, Customer: &Customer{Name: "Example Customer", Plan: "pro"}}},
		{"124", lookup{}},
	}
	for _, tt := range tests {
		got, err := getCustomer(t.Context(), customerArgs{CustomerID: tt.id})
		if err != nil || got.Found != tt.want.Found || (got.Customer == nil) != (tt.want.Customer == nil) ||
			(got.Customer != nil && *got.Customer != *tt.want.Customer) {
			t.Errorf("getCustomer(%q) = %+v, %v; want %+v", tt.id, got, err, tt.want)
		}
	}
}

// TestGoRun runs the example as a user would, with go run, and checks it
// exits 0 and prints the customer's name and plan.
func TestGoRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the program")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command: %v", err)
	}
	clearEnv(t)
	cmd := exec.CommandContext(t.Context(), goBin, "run", ".")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run: %v\n%s", err, stderr.String())
	}
	checkOutput(t, stdout.String())
}

// TestScriptMatchesTestdata checks that the script the example plays is the
// one documented in testdata/, which cmd/toolrelay-fake plays.
func TestScriptMatchesTestdata(t *testing.T) {
	exampletest.ScriptMatches(t, "../../testdata/customer.json", script)
}

// TestSameOnEveryFake checks that configuration alone moves the example
// between the fakes, with the same output.
func TestSameOnEveryFake(t *testing.T) {
	exampletest.SameOnEveryFake(t, run, "Calling get_customer...\n"+
		`Agent response: Here is what I found for customer 123: {"found":true,"customer":{"name":"Example Customer","plan":"pro"}}`+"\n")
}
