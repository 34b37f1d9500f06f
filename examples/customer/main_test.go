package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"Calling get_customer...", "Agent response:", "Example Customer", `"plan":"pro"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRun(t *testing.T) {
	exampletest.ClearEnv(t)
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

// replayEnv sets the environment that replays cassette on the real
// openai backend, with nothing listening at its base URL: the run needs
// no fake, no key and no network.
func replayEnv(t *testing.T, cassette string) {
	t.Helper()
	exampletest.ClearEnv(t)
	t.Setenv("TOOLRELAY_BACKEND", "openai")
	t.Setenv("OPENAI_API_KEY", "unused")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("TOOLRELAY_REPLAY", "replay:"+cassette)
}

// TestReplay replays testdata/customer.yaml, recorded on the embedded fake
// with
//
//	TOOLRELAY_REPLAY=record:examples/customer/testdata/customer.yaml go run ./examples/customer
//
// and checks the program prints what it printed then.
func TestReplay(t *testing.T) {
	replayEnv(t, filepath.Join("testdata", "customer.yaml"))
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkOutput(t, out.String())
}

// TestReplayChanged replays a cassette in which the program had sent
// another plan: the run fails, and the error shows the difference.
func TestReplayChanged(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "customer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sent := `\"plan\":\"pro\"}}","type":"agent.session.input.tool_result"`
	changed := strings.Replace(string(b), sent, strings.Replace(sent, "pro", "basic", 1), 1)
	if changed == string(b) {
		t.Fatal("the cassette does not hold the result sent")
	}
	file := filepath.Join(t.TempDir(), "customer.yaml")
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	replayEnv(t, file)
	err = run(t.Context(), io.Discard)
	if err == nil {
		t.Fatal("a run that sends what was not recorded passed")
	}
	for _, want := range []string{"is not recorded", "-recorded +sent", `basic`, `pro`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// TestGoRun runs the example as a user would, with go run, and checks it
// exits 0 and prints the customer's name and plan.
func TestGoRun(t *testing.T) {
	checkOutput(t, exampletest.GoRun(t))
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
