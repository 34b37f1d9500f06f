package replaycheck_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/replay"
	"github.com/toolrelay/toolrelay/replay/replaycheck"
)

// lookupScript is the script the checked-in cassettes of testdata were
// recorded with (see TestCheckedInCassettes).
func lookupScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
}

// startFake starts the fake a checked-in cassette was recorded on, with
// its script, and returns its base URL and the client that trusts it.
func startFake(t *testing.T, backend string) (string, *http.Client) {
	t.Helper()
	if backend == "openai" {
		srv := openaitest.NewServer(lookupScript(), nil)
		t.Cleanup(srv.Close)
		return strings.TrimSuffix(srv.URL, "/v1"), nil
	}
	srv := foundrytest.NewServer(lookupScript(), &foundrytest.Options{Plain: true})
	t.Cleanup(srv.Close)
	return strings.TrimSuffix(srv.ProjectEndpoint(), "/api/projects/test-project"), srv.Client()
}

// TestCheckClean checks a fake of each backend against the cassette
// recorded on it, twice on the same fake: no difference, ids, timestamps
// and all. The fakes mint ids of their own (foundry's are random, the
// second run on the openai fake gets agent_2, sess_2, turn_2 …), which
// the check maps from recorded to live, in the requests that name them
// (DELETE /v1/agents/sessions/sess_1 is sent for sess_2) and in the
// answers compared.
func TestCheckClean(t *testing.T) {
	for _, backend := range []string{"openai", "foundry", "responses"} {
		t.Run(backend, func(t *testing.T) {
			target, client := startFake(t, backend)
			for run := range 2 {
				diffs, err := replaycheck.Check(t.Context(), filepath.Join("..", "testdata", backend+".yaml"), target, &replaycheck.CheckOptions{Client: client})
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				for _, d := range diffs {
					t.Errorf("run %d: %s", run, d)
				}
			}
		})
	}
}

// TestCheckTampered checks a fake against cassettes whose recorded
// answers were changed: each difference names the interaction and the
// JSON path, and shows the values (-recorded +target).
func TestCheckTampered(t *testing.T) {
	tests := []struct {
		name, backend string
		old, new      string // the recorded text replaced
		want          replaycheck.Difference
		wantDiff      []string // in the go-cmp difference
	}{{
		name: "value", backend: "openai",
		old: `"text":"answer: found 7"}`, new: `"text":"answer: found 8"}`,
		want:     replaycheck.Difference{Interaction: 2, Method: "POST", Path: "/v1/agents/sessions", Paths: []string{"body[11].data.text"}},
		wantDiff: []string{`-`, `"answer: found 8"`, `+`, `"answer: found 7"`},
	}, {
		name: "item removed", backend: "openai",
		old: `"required_actions":[{"type":"function_call","turn_id":"turn_1","call_id":"call_1","name":"lookup","arguments":{"id":"7"}}]`, new: `"required_actions":[]`,
		want: replaycheck.Difference{Interaction: 2, Method: "POST", Path: "/v1/agents/sessions", Paths: []string{"body[5].data.session.required_actions[0] (only the target's)"}},
	}, {
		name: "status", backend: "openai",
		old: "status: 202 Accepted\n        code: 202", new: "status: 200 OK\n        code: 200",
		want: replaycheck.Difference{Interaction: 3, Method: "POST", Path: "/v1/agents/sessions/sess_1/events", Paths: []string{"status"}},
	}, {
		name: "id", backend: "openai",
		old: `{"deleted":true,"id":"sess_1"`, new: `{"deleted":true,"id":"sess_2"`,
		want: replaycheck.Difference{Interaction: 4, Method: "DELETE", Path: "/v1/agents/sessions/sess_1", Paths: []string{"body.id"}},
	}, {
		name: "foundry output", backend: "foundry",
		old: `"status":"completed"`, new: `"status":"incomplete"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "testdata", tt.backend+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tt.old) {
				t.Fatalf("testdata/%s.yaml holds no %s", tt.backend, tt.old)
			}
			file := filepath.Join(t.TempDir(), "tampered.yaml")
			tampered := strings.Replace(string(b), tt.old, tt.new, 1)
			if err := os.WriteFile(file, []byte(tampered), 0o644); err != nil {
				t.Fatal(err)
			}
			target, client := startFake(t, tt.backend)
			diffs, err := replaycheck.Check(t.Context(), file, target, &replaycheck.CheckOptions{Client: client})
			if err != nil {
				t.Fatal(err)
			}
			if len(diffs) != 1 {
				t.Fatalf("%d differences, want 1: %v", len(diffs), diffs)
			}
			d := diffs[0]
			t.Logf("%s", d)
			if tt.want.Method == "" {
				if len(d.Paths) == 0 || d.Diff == "" {
					t.Errorf("a difference with no path or no diff: %s", d)
				}
				return
			}
			if diff := cmp.Diff(tt.want, d, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Diff" }, cmp.Ignore())); diff != "" {
				t.Errorf("difference (-want +got):\n%s", diff)
			}
			for _, w := range tt.wantDiff {
				if !strings.Contains(d.Diff, w) {
					t.Errorf("the go-cmp difference holds no %q:\n%s", w, d.Diff)
				}
			}
			if s := d.String(); !strings.Contains(s, "#"+string(rune('0'+d.Interaction))+" ") || !strings.Contains(s, d.Paths[0]) {
				t.Errorf("String() names no interaction or path: %s", s)
			}
		})
	}
}

// TestCheckErrors: a cassette that cannot be read, or a target that is
// not a URL, is an error with a code and a clear message, not a
// difference.
func TestCheckErrors(t *testing.T) {
	dir := t.TempDir()
	garbled := filepath.Join(dir, "garbled.yaml")
	if err := os.WriteFile(garbled, []byte("interactions: [[[\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file, target string
		code         errcode.Code
		msg          string
	}{
		{filepath.Join(dir, "missing.yaml"), "http://127.0.0.1:1", errcode.NotFound, "no such file"},
		{garbled, "http://127.0.0.1:1", errcode.InvalidArgument, "not a go-vcr cassette"},
		{dir, "http://127.0.0.1:1", errcode.InvalidArgument, "not a regular file"},
		{filepath.Join("..", "testdata", "openai.yaml"), "127.0.0.1:8080", errcode.InvalidArgument, "not a base URL"},
		{filepath.Join("..", "testdata", "openai.yaml"), "http://127.0.0.1:1", errcode.Unavailable, "#0 GET /v1/agents?limit=100&order=desc"},
	}
	for _, tt := range tests {
		diffs, err := replaycheck.Check(t.Context(), tt.file, tt.target, nil)
		if errcode.Of(err) != tt.code || err == nil || !strings.Contains(err.Error(), tt.msg) || diffs != nil {
			t.Errorf("Check(%s, %s) = %v, %v; want code %v and %q", tt.file, tt.target, diffs, err, tt.code, tt.msg)
		}
	}
}

// TestCheckStream records a stream of two events from a handler, then
// checks handlers that answer otherwise: the same events (clean), the
// same events and a stream that does not end (a difference at "stream"
// once CheckOptions.Wait passes), one event of two (the second "only
// recorded"), and an event's data that is not JSON.
func TestCheckStream(t *testing.T) {
	const events = "data: {\"type\":\"a\",\"id\":\"x_1\",\"created_at\":1}\n\nevent: done\ndata: {\"type\":\"b\",\"x_id\":\"x_1\"}\n\n"
	sse := func(body string, hang bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte(body))
			w.(http.Flusher).Flush()
			if hang {
				<-r.Context().Done()
			}
		}
	}
	file := filepath.Join(t.TempDir(), "stream.yaml")
	rec, err := replay.OpenFile(replay.Record, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := httptest.NewServer(sse(events, false))
	resp, err := (&http.Client{Transport: rec.Wrap(nil)}).Get(src.URL + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	src.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		h    http.HandlerFunc
		want []string // the paths of the differences; nil: none
	}{
		{"same", sse(strings.ReplaceAll(strings.ReplaceAll(events, "x_1", "x_9"), `"created_at":1`, `"created_at":2`), false), nil},
		{"endless", sse(events, true), []string{"stream"}},
		{"one event", sse(events[:strings.Index(events, "event:")], false), []string{"body[1] (only recorded)"}},
		{"not JSON", sse("data: {\"type\":\"a\",\"id\":\"x_1\",\"created_at\":1}\n\nevent: done\ndata: hello\n\n", false), []string{"body[1].data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.h)
			defer srv.Close()
			diffs, err := replaycheck.Check(t.Context(), file, srv.URL, &replaycheck.CheckOptions{Wait: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diffs {
				t.Logf("%s", d)
				got = append(got, d.Paths...)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("paths of the differences (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckStreamAnsweredPlain: a recorded stream the target answers with
// a JSON error shows the error's body, not only the events missing.
func TestCheckStreamAnsweredPlain(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"resource_not_found","message":"No agent found with id 'agent_1'."}}`))
	}))
	defer srv.Close()
	diffs, err := replaycheck.Check(t.Context(), filepath.Join("..", "testdata", "openai.yaml"), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var two *replaycheck.Difference
	for i := range diffs {
		if diffs[i].Interaction == 2 {
			two = &diffs[i]
		}
	}
	if two == nil || !strings.Contains(two.Diff, "No agent found") || !slices.Contains(two.Paths, "status") {
		t.Errorf("the stream answered 404: %v", two)
	}
}
