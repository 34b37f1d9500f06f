package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/replay"
)

// recordJS re-records testdata/js-sessions.yaml, the cassette
// TestJSClientReplay replays, from the JavaScript flow itself:
//
//	(cd clients/js && npm ci) && go test ./cmd/toolrelay-fake -run TestJSClientReplay -record-js
//
// The flow (clients/js/replay-flow.mjs) runs against a reverse proxy
// whose transport records (package replay) in front of the openai fake
// playing testdata/weather.json. Re-record it when the flow, the script
// or the npm client's requests change.
var recordJS = flag.Bool("record-js", false, "re-record testdata/js-sessions.yaml from the JavaScript flow, on the openai fake")

// jsCassette is the cassette recorded from clients/js/replay-flow.mjs.
const jsCassette = "testdata/js-sessions.yaml"

// TestJSClientReplay serves testdata/js-sessions.yaml with -replay and
// runs the official openai npm client's sessions helper flow
// (clients/js/replay-flow.mjs: an agent, a streamed session whose tool
// calls the client's toolHandlers answer, finalResult) against it: the
// client runs the tools the recording's model asked for, in the recorded
// order, and gets the recorded answer. It needs Node.js and `npm ci` in
// clients/js; without them it is skipped.
func TestJSClientReplay(t *testing.T) {
	node, dir := nodeClient(t)
	if *recordJS {
		recordJSFlow(t, node, dir)
	}
	b, err := os.ReadFile(jsCassette)
	if err != nil {
		t.Fatalf("%v (record it: go test ./cmd/toolrelay-fake -run TestJSClientReplay -record-js)", err)
	}
	wantCalls, wantText := recordedFlow(t, b)
	if len(wantCalls) == 0 || wantText == "" {
		t.Fatalf("%s holds no tool call or no answer", jsCassette)
	}

	s := start(t, "-replay", jsCassette)
	out := runJSFlow(t, node, dir, s["BASE_URL"]+"/v1")
	var got struct {
		Calls  []string
		Result json.RawMessage
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the flow printed %q: %v", out, err)
	}
	if !slices.Equal(got.Calls, wantCalls) {
		t.Errorf("the client ran %v, want the recorded %v", got.Calls, wantCalls)
	}
	text, _ := json.Marshal(wantText)
	if !strings.Contains(string(got.Result), strings.Trim(string(text), `"`)) {
		t.Errorf("finalResult %s holds no recorded answer %s", got.Result, text)
	}
}

// nodeClient returns node and clients/js, skipping the test without them.
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../../clients/js")
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed: the official JavaScript client is not tried")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		t.Skip("clients/js has no node_modules: run `npm ci` there (as .ci/run does) to try the official JavaScript client")
	}
	return node, dir
}

// runJSFlow runs clients/js/replay-flow.mjs against baseURL and returns
// the line it printed.
func runJSFlow(t *testing.T, node, dir, baseURL string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "replay-flow.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE_URL="+baseURL)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node replay-flow.mjs against %s: %v\n%s", baseURL, err, out)
	}
	return out
}

// recordJSFlow records jsCassette: the flow against a recording proxy in
// front of the openai fake.
func recordJSFlow(t *testing.T, node, dir string) {
	t.Helper()
	script, err := coretest.LoadScript("../../testdata/weather.json")
	if err != nil {
		t.Fatal(err)
	}
	fake := openaitest.NewServer(script, nil)
	defer fake.Close()
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	tape, err := replay.OpenFile(replay.Record, jsCassette, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     tape.Wrap(nil),
		FlushInterval: -1,
	})
	runJSFlow(t, node, dir, proxy.URL+"/v1")
	proxy.Close()
	if err := tape.Close(); err != nil {
		t.Fatal(err)
	}
}

// recordedFlow returns the tools the recorded sessions asked for, in
// order, and the text of the last answer recorded.
func recordedFlow(t *testing.T, cassette []byte) (calls []string, text string) {
	t.Helper()
	var c struct {
		Interactions []struct {
			Response struct {
				Body string `yaml:"body"`
			} `yaml:"response"`
		} `yaml:"interactions"`
	}
	if err := yaml.Unmarshal(cassette, &c); err != nil {
		t.Fatal(err)
	}
	for _, in := range c.Interactions {
		for _, line := range strings.Split(in.Response.Body, "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var e struct {
				Type    string
				Text    string
				Session struct {
					RequiredActions []struct{ Name string } `json:"required_actions"`
				}
			}
			if json.Unmarshal([]byte(data), &e) != nil {
				continue
			}
			switch e.Type {
			case "agent.session.requires_action":
				for _, a := range e.Session.RequiredActions {
					calls = append(calls, a.Name)
				}
			case "agent.session.turn.output_text.done":
				text = e.Text
			}
		}
	}
	return calls, text
}
