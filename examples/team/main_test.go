package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/examples/internal/exampletest"
)

// want is what the program prints: the triage agent's calls, the refund
// agent's call inside the first (with its path), the refund tool's
// effects, once per order, and the triage agent's answer.
const want = `triage calls refund_agent {"order":"7"}
triage > refund_agent calls refund {"order":"7"}
  (refund tool: order 7 refunded)
triage > refund_agent: refund ok
triage: refund_agent ok
triage calls refund_desk {"message":"{\"order\": \"8\"}"}
  (refund tool: order 8 refunded)
triage: refund_desk ok
Triage: Order 7: Done: order 7 refunded. Order 8: Done: order 8 refunded.
`

// checkOutput checks out is want, and a line of tokens.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	got, tokens, ok := strings.Cut(out, "Tokens: ")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if !ok || strings.HasPrefix(tokens, "0 ") {
		t.Errorf("no tokens counted: %q", tokens)
	}
}

func TestRun(t *testing.T) {
	exampletest.ClearEnv(t)
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String())
}

// TestGoRun runs the example as a user would, with go run, and checks it
// exits 0 and prints what run prints.
func TestGoRun(t *testing.T) {
	checkOutput(t, exampletest.GoRun(t))
}

// TestReadmeHasTheCode checks that README's section "Agents that call
// agents" shows this program's code as it is, from its package clause on
// (internal/doccheck compiles README's samples; this keeps the one of the
// section the program's own).
func TestReadmeHasTheCode(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Agents that call agents\n")
	if !ok {
		t.Fatal(`README has no section "Agents that call agents"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, code, ok := strings.Cut(string(src), "\npackage main\n")
	if !ok {
		t.Fatal("main.go has no package clause")
	}
	code = "```go\npackage main\n" + code + "```\n"
	if !strings.Contains(section, code) {
		t.Errorf("README's section does not show main.go's code from its package clause on; it should hold:\n%s", code)
	}
}
