package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lookupScript is the script replay/testdata's cassettes were recorded
// with, as coretest JSON.
const lookupScript = `{"turns": [{"steps": [
	{"calls": [{"name": "lookup", "arguments": {"id": "7"}}]},
	{"text": "answer: {{output \"lookup\"}}"}]}]}`

// TestCheck runs -check: a cassette recorded on a fake checks clean
// against a fake started in the command (openai and foundry, the backend
// told by the cassette) or one already serving (-target), exit 0; a
// cassette whose recorded answer was changed prints the difference,
// naming the interaction and the JSON path, exit 1; a file that cannot
// be read, or a -check without a fake to check, exits 2 with a message.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	lookup := filepath.Join(dir, "lookup.json")
	if err := os.WriteFile(lookup, []byte(lookupScript), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../examples/customer/testdata/customer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const found = `"text":"Here is what I found for customer 123: {\"found\":true`
	if !bytes.Contains(b, []byte(found)) {
		t.Fatalf("customer.yaml holds no %s", found)
	}
	tampered := filepath.Join(dir, "tampered.yaml")
	if err := os.WriteFile(tampered, bytes.Replace(b, []byte(found), []byte(`"text":"Here is what I found for customer 124: {\"found\":true`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	served := start(t, "-backend", "openai", "-script", "../../testdata/customer.json")

	tests := []struct {
		name       string
		args       []string
		wantStatus int
		want       []string // in the output
	}{
		{"openai clean", []string{"-check", "../../examples/customer/testdata/customer.yaml", "-script", "../../testdata/customer.json"}, 0,
			[]string{"every answer is the recorded one"}},
		{"foundry clean", []string{"-check", "../../replay/testdata/foundry.yaml", "-script", lookup}, 0,
			[]string{"every answer is the recorded one"}},
		{"js clean", []string{"-check", jsCassette, "-script", "../../testdata/weather.json"}, 0,
			[]string{"every answer is the recorded one"}},
		{"target clean", []string{"-check", "../../examples/customer/testdata/customer.yaml", "-target", strings.TrimSuffix(served["BASE_URL"], "/v1")}, 0,
			[]string{"every answer is the recorded one"}},
		{"tampered", []string{"-check", tampered, "-script", "../../testdata/customer.json"}, 1,
			[]string{"#2 POST /v1/agents/sessions: the answer differs at body[11].data.text", `"4",`, `"3",`, "the answers to 1 of its requests differ"}},
		{"missing", []string{"-check", filepath.Join(dir, "missing.yaml"), "-script", "../../testdata/customer.json"}, 2,
			[]string{"toolrelay-fake: -check: open ", "no such file"}},
		{"garbled", []string{"-check", lookup, "-target", "http://127.0.0.1:1"}, 2,
			[]string{"not a go-vcr cassette"}},
		{"no fake", []string{"-check", tampered}, 2,
			[]string{"-check needs -target URL"}},
		{"bad flag", []string{"-check", tampered, "-nope"}, 2,
			[]string{"flag provided but not defined: -nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE_MAIN=1")
			out, err := cmd.CombinedOutput()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.wantStatus {
				t.Errorf("exit status %d, want %d; output:\n%s", status, tt.wantStatus, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output holds no %q:\n%s", w, out)
				}
			}
		})
	}
}
