package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

// TestRun checks the sample's expected output.
func TestRun(t *testing.T) {
	exampletest.ClearEnv(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := "Agent response: Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter.\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// TestSchema checks that the tool's schema is the sample's.
func TestSchema(t *testing.T) {
	tools, err := newTools()
	if err != nil {
		t.Fatal(err)
	}
	tool := tools.Lookup("get_horoscope")
	want := `{"type":"object","properties":{"sign":{"type":"string","description":"An astrological sign like Taurus or Aquarius"}},"required":["sign"],"additionalProperties":false}`
	if diff := cmp.Diff(want, string(tool.Parameters())); diff != "" {
		t.Errorf("schema mismatch (-want +got):\n%s", diff)
	}
	if !tool.Strict() || tool.Description() != "Get today's horoscope for an astrological sign." {
		t.Errorf("strict = %v, description = %q", tool.Strict(), tool.Description())
	}
}

// TestScriptMatchesTestdata checks that the script the example plays is the
// one documented in testdata/, which cmd/toolrelay-fake plays.
func TestScriptMatchesTestdata(t *testing.T) {
	exampletest.ScriptMatches(t, "../../testdata/horoscope.json", script)
}

// TestSameOnEveryFake checks that configuration alone moves the example
// between the fakes, with the same output.
func TestSameOnEveryFake(t *testing.T) {
	exampletest.SameOnEveryFake(t, run, "Agent response: Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter.\n")
}
