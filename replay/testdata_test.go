package replay_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry, fake-responses, foundry, responses
)

// record re-records the checked-in cassettes of testdata on the fakes:
// go test ./replay -run TestCheckedInCassettes -record
var recordFlag = flag.Bool("record", false, "re-record the cassettes of testdata on the fakes")

// projectRE finds the project endpoint of a recorded Foundry request.
var projectRE = regexp.MustCompile(`url: (https?://[^/\s]+/api/projects/[^/\s?]+)`)

// TestCheckedInCassettes replays the cassette of each built-in backend
// checked in under testdata, recorded on its fake through the replay
// setting, on the real backend with nothing listening where it sends: the
// run's answer is the one recorded.
func TestCheckedInCassettes(t *testing.T) {
	t.Setenv("TOOLRELAY_CONFIG", "")
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
	const want = "answer: found 7"
	tests := []struct {
		backend, fake string
		// offline is the real backend's environment, given the recorded
		// Foundry project endpoint (empty for openai).
		offline func(project string) map[string]string
	}{
		{"openai", "fake-openai", func(string) map[string]string {
			return map[string]string{"OPENAI_API_KEY": "sk-replay-no-key", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
		}},
		{"foundry", "fake-foundry", func(project string) map[string]string {
			return map[string]string{"AZURE_AI_PROJECT_ENDPOINT": project, "AGENT_TOKEN": "replay-no-token"}
		}},
		{"responses", "fake-responses", func(project string) map[string]string {
			return map[string]string{"OPENAI_API_KEY": "replay-no-key", "OPENAI_BASE_URL": project + "/openai/v1/"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			file := filepath.Join("testdata", tt.backend+".yaml")
			if *recordFlag {
				got, err := runWith(t, map[string]string{"TOOLRELAY_BACKEND": tt.fake, "TOOLRELAY_REPLAY": "record:" + file},
					&adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: script}}})
				if err != nil || got != want {
					t.Fatalf("recording: %q, %v; want %q", got, err, want)
				}
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (record it: go test ./replay -run TestCheckedInCassettes -record)", err)
			}
			project := ""
			if m := projectRE.FindSubmatch(b); m != nil {
				project = string(m[1])
			}
			env := tt.offline(project)
			env["TOOLRELAY_BACKEND"], env["TOOLRELAY_REPLAY"] = tt.backend, "replay:"+file
			got, err := runWith(t, env, nil)
			if err != nil {
				t.Fatalf("replaying %s: %v", file, err)
			}
			if got != want {
				t.Errorf("replayed answer %q, want %q", got, want)
			}
		})
	}
}
