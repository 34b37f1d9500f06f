package web

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/coretest"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// A transcriptCase is a case of testdata/cases.json: what the page does,
// step by step, and the UI messages the official client must make of the
// transcripts (checked by js/uistream.test.mjs).
type transcriptCase struct {
	Name  string `json:"name"`
	Steps []struct {
		Send   string           `json:"send"`
		Answer []approvalAnswer `json:"answer"`
	} `json:"steps"`
}

func loadCases(t *testing.T) []transcriptCase {
	t.Helper()
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []transcriptCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestTranscripts plays each case of testdata/cases.json through the
// handler and compares the responses, byte for byte, with the golden
// transcripts testdata/NAME-N.sse (go test -update rewrites them).
func TestTranscripts(t *testing.T) {
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			var bopts coretest.BackendOptions
			if tc.Name == "failure" {
				bopts.Fault = func(op string, n int) error {
					if op == "submit" {
						return errBoom
					}
					return nil
				}
			}
			s := newTestServer(t, scripts[tc.Name], nil, &bopts)
			for i, step := range tc.Steps {
				body := userMessage("chat-1", step.Send)
				if step.Answer != nil {
					body = answersMessage("chat-1", "msg-1", step.Answer)
				}
				got := readAll(t, s.post(t, "ann", body))
				if strings.Contains(got, "hunter2") {
					t.Errorf("the page was shown the service's error:\n%s", got)
				}
				golden := filepath.Join("testdata", fmt.Sprintf("%s-%d.sse", tc.Name, i+1))
				if *update {
					if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(chunks(string(want)), chunks(got)); diff != "" || got != string(want) {
					t.Errorf("%s (-want +got):\n%s", golden, diff)
				}
			}
		})
	}
}

// TestOfficialParser feeds the golden transcripts to the AI SDK's own
// client (npm ai 7.x: AbstractChat, DefaultChatTransport and its stream
// parser) and compares the UI messages it makes with those of
// testdata/cases.json (js/uistream.test.mjs). It needs Node.js and the
// packages `npm ci` installs in js (.ci/run does it); without them it is
// skipped.
func TestOfficialParser(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed: the transcripts are not tried with the official client")
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "ai")); err != nil {
		t.Skip("web/js has no node_modules: run `npm ci` there (as .ci/run does) to try the official client")
	}
	cmd := exec.CommandContext(t.Context(), node, "--test", "uistream.test.mjs")
	cmd.Dir = "js"
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test uistream.test.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
