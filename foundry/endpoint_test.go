package foundry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/journal/driver"
)

// functionTools returns the definitions of function tools named names, as
// an agent definition's tools member lists them.
func functionTools(names ...string) []map[string]any {
	out := []map[string]any{}
	for _, n := range names {
		out = append(out, map[string]any{"type": "function", "name": n, "parameters": map[string]any{"type": "object", "properties": map[string]any{}}})
	}
	return out
}

// promptDef is a prompt agent's definition with function tools named
// tools.
func promptDef(tools ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"kind": "prompt", "model": "gpt-4.1-mini", "tools": functionTools(tools...)})
	return b
}

// hostedDef is a hosted agent's definition whose container speaks
// protocols, with function tools named tools.
func hostedDef(protocols []string, tools ...string) json.RawMessage {
	var ps []map[string]string
	for _, p := range protocols {
		ps = append(ps, map[string]string{"protocol": p, "version": "v1"})
	}
	b, _ := json.Marshal(map[string]any{"kind": "hosted", "container_protocol_versions": ps, "cpu": "1", "memory": "2Gi", "tools": functionTools(tools...)})
	return b
}

// weatherTools are the function tools weatherScript calls.
var weatherTools = []string{"getUserFavoriteCity", "getCityNickname", "getCurrentWeatherAtLocation"}

// existing returns backend options for the existing agent name.
func existing(srv *foundrytest.Server, name string, mode foundry.Mode, stream bool) *foundry.Options {
	o := options(srv, mode, stream)
	o.Definition, o.Agent = nil, name
	return o
}

// responseRequests returns the create-response requests the fake got.
func responseRequests(srv *foundrytest.Server) []foundrytest.Request {
	var out []foundrytest.Request
	for _, r := range srv.Requests() {
		if r.Op == foundrytest.OpCreateResponse {
			out = append(out, r)
		}
	}
	return out
}

// TestAgentEndpoint runs an agent named without a version whose endpoint
// is configured: its requests go to the agent's endpoint (with
// api-version=v1, no agent_reference: the endpoint picks the version), and
// its tools are checked against the versions the endpoint's version
// selector serves, not versions.latest (a new version gets no traffic
// until the selector routes some to it). On today's main the requests go
// to the project's route naming the agent, which runs the latest version,
// whose tools the script's calls are not.
func TestAgentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rules   []foundrytest.VersionRule
		missing []string
	}{
		// Version 1 serves all traffic; 2 (latest) has other tools.
		{"served version", []foundrytest.VersionRule{{Version: "1", Percent: 100}}, []string{"only_in_1"}},
		// A canary: the tools of every version with traffic are checked.
		{"canary", []foundrytest.VersionRule{{Version: "1", Percent: 90}, {Version: "3", Percent: 10}}, []string{"only_in_1", "only_in_3"}},
	} {
		for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				srv := newFake(t, weatherScript(), nil)
				srv.AddAgentVersion("routed", promptDef(append(weatherTools, "only_in_1")...))
				srv.AddAgentVersion("routed", promptDef("only_in_2"))
				if len(tc.rules) > 1 {
					srv.AddAgentVersion("routed", promptDef(append(weatherTools, "only_in_3")...))
					srv.AddAgentVersion("routed", promptDef("only_in_4")) // the latest, without traffic
				}
				srv.SetAgentEndpoint("routed", tc.rules...)
				tools := toolbox(t, &counter{})
				b := open(t, tools, existing(srv, "routed", mode, mode == foundry.Chain))
				if diff := cmp.Diff(tc.missing, b.MissingTools()); diff != "" {
					t.Errorf("MissingTools (-want +got):\n%s", diff)
				}
				res, err := newRunner(b, tools, nil).Run(context.Background(), "What's the weather like in my favorite city?", nil)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Text != weatherAnswer {
					t.Errorf("answer = %q, want %q", res.Text, weatherAnswer)
				}
				reqs := responseRequests(srv)
				if len(reqs) != 4 {
					t.Errorf("%d create-response requests, want 4", len(reqs))
				}
				for _, r := range reqs {
					if r.Path != "/agents/routed/endpoint/protocols/openai/responses" || r.Query.Get("api-version") != "v1" {
						t.Errorf("request to %s?%s, want the agent's endpoint with api-version=v1", r.Path, r.Query.Encode())
					}
					if strings.Contains(string(r.Body), "agent_reference") {
						t.Errorf("a request on the endpoint names an agent_reference: %s", r.Body)
					}
				}
				checkNoRefusals(t, srv)
			})
		}
	}
}

// TestAgentEndpointPinned runs a version named in Options.AgentVersion of
// an agent whose endpoint serves another: the project's route, whose
// agent reference names the version, runs it.
func TestAgentEndpointPinned(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgentVersion("routed", promptDef("only_in_1"))
	srv.AddAgentVersion("routed", promptDef(weatherTools...))
	srv.SetAgentEndpoint("routed", foundrytest.VersionRule{Version: "1", Percent: 100})
	tools := toolbox(t, &counter{})
	o := existing(srv, "routed", foundry.Conversation, false)
	o.AgentVersion = "2"
	b := open(t, tools, o)
	if got := b.MissingTools(); len(got) != 0 {
		t.Errorf("MissingTools = %v, want none (version 2's tools)", got)
	}
	if _, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range responseRequests(srv) {
		if r.Path != "/openai/v1/responses" || !strings.Contains(string(r.Body), `"version":"2"`) {
			t.Errorf("request to %s with %s, want the project's route naming version 2", r.Path, r.Body)
		}
	}
	checkNoRefusals(t, srv)
}

// TestAgentRefused opens agents that toolrelay cannot run, and checks that
// each is refused by Open with a coded error naming the agent and why,
// before any conversation or response is requested. On today's main each
// opens (a workflow's or external agent's definition read as a prompt's,
// a disabled agent's state unread) and fails later, if at all.
func TestAgentRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(srv *foundrytest.Server) *foundry.Options
		code errcode.Code
		says []string
	}{
		{"disabled", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("off", promptDef(weatherTools...))
			srv.SetAgentState("off", "disabled", "admin")
			return existing(srv, "off", "", false)
		}, errcode.FailedPrecondition, []string{`agent "off"`, `state "disabled"`, `"admin"`}},
		{"disabled, made from a definition", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("test-agent", promptDef(weatherTools...))
			srv.SetAgentState("test-agent", "disabled", "")
			return options(srv, "", false)
		}, errcode.FailedPrecondition, []string{`agent "test-agent"`, `state "disabled"`}},
		{"workflow", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("flow", json.RawMessage(`{"kind":"workflow","workflow":"kind: workflow\n"}`))
			return existing(srv, "flow", "", false)
		}, errcode.Unimplemented, []string{`agent "flow"`, "workflow agent"}},
		{"external", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("elsewhere", json.RawMessage(`{"kind":"external","otel_agent_id":"x"}`))
			return existing(srv, "elsewhere", "", false)
		}, errcode.Unimplemented, []string{`agent "elsewhere"`, "external agent"}},
		{"hosted, another protocol", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("invoker", hostedDef([]string{"invocations"}, weatherTools...))
			return existing(srv, "invoker", "", false)
		}, errcode.Unimplemented, []string{`agent "invoker"`, "hosted agent", "invocations"}},
		{"a workflow the endpoint serves", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("mixed", promptDef(weatherTools...))
			srv.AddAgentVersion("mixed", json.RawMessage(`{"kind":"workflow"}`))
			srv.AddAgentVersion("mixed", promptDef(weatherTools...))
			srv.SetAgentEndpoint("mixed", foundrytest.VersionRule{Version: "1", Percent: 50}, foundrytest.VersionRule{Version: "2", Percent: 50})
			return existing(srv, "mixed", "", false)
		}, errcode.Unimplemented, []string{`agent "mixed" version "2"`, "workflow agent"}},
		{"hosted, a version the endpoint does not serve", func(srv *foundrytest.Server) *foundry.Options {
			srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, weatherTools...))
			srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, weatherTools...))
			srv.SetAgentEndpoint("sandbox", foundrytest.VersionRule{Version: "2", Percent: 100})
			o := existing(srv, "sandbox", "", false)
			o.AgentVersion = "1"
			return o
		}, errcode.FailedPrecondition, []string{`agent "sandbox"`, "hosted agent", `version "1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			o := tc.make(srv)
			b, err := foundry.Open(context.Background(), toolbox(t, &counter{}), o)
			if err == nil {
				b.Close()
				t.Fatalf("Open succeeded; want a %v error", tc.code)
			}
			if got := errcode.Of(err); got != tc.code {
				t.Errorf("Open: code %v, want %v: %v", got, tc.code, err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open: %v; want it to say %s", err, s)
				}
			}
			for _, r := range srv.Requests() {
				if r.Op == foundrytest.OpCreateResponse || r.Op == foundrytest.OpCreateConversation || r.Op == foundrytest.OpCreateAgentVersion {
					t.Errorf("Open sent %s %s before refusing", r.Method, r.Path)
				}
			}
		})
	}
}

// TestHostedAgentTools runs a hosted agent: on its endpoint, its function
// tools checked as a prompt agent's are (on today's main its definition is
// read as a prompt's, and the project's route it is called on refuses
// it).
func TestHostedAgentTools(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, append(weatherTools, "in_the_container")...))
	tools := toolbox(t, &counter{})
	b := open(t, tools, existing(srv, "sandbox", "", false))
	if diff := cmp.Diff([]string{"in_the_container"}, b.MissingTools()); diff != "" {
		t.Errorf("MissingTools (-want +got):\n%s", diff)
	}
	res, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != weatherAnswer {
		t.Errorf("answer = %q, want %q", res.Text, weatherAnswer)
	}
	checkNoRefusals(t, srv)
}

// TestHostedSessionResume stops a hosted agent's run after its first call
// ran (the results request failed), then resumes the thread in a fresh
// backend and runner that share only the journal, as a new process would.
// Every turn of the thread runs in the one session the service named for
// its first (x-agent-session-id), which each later request names
// (agent_session_id): the backend kept it as a note of the thread in the
// journal. On today's main a hosted agent is called on the project's
// route, which refuses it; with the route but without the session kept,
// the resumed turns run in new sandboxes.
func TestHostedSessionResume(t *testing.T) {
	for _, tc := range []struct {
		mode   foundry.Mode
		stream bool
	}{
		{foundry.Conversation, false},
		{foundry.Chain, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, weatherTools...))
			srv.SetAgentEndpoint("sandbox")
			journal := driver.NewMemory() // what survives the process
			ctx := context.Background()

			// Process 1: the first call runs, then sending its result fails.
			tools1 := toolbox(t, &counter{})
			o1 := existing(srv, "sandbox", tc.mode, tc.stream)
			o1.RequestOptions = noRetries
			b1 := open(t, tools1, o1)
			srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{}, foundrytest.Fault{Status: 500})
			res, err := newRunner(b1, tools1, journal).Run(ctx, "What's the weather like in my favorite city?", nil)
			if err == nil || res == nil || res.Thread == "" {
				t.Fatalf("Run = %+v, %v; want a failure on a thread to resume", res, err)
			}

			// Process 2: a fresh backend and runner, the same journal.
			tools2 := toolbox(t, &counter{})
			b2 := open(t, tools2, existing(srv, "sandbox", tc.mode, tc.stream))
			res, err = newRunner(b2, tools2, journal).Resume(ctx, res.Thread, nil)
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if res.Text != weatherAnswer {
				t.Errorf("answer = %q, want %q", res.Text, weatherAnswer)
			}
			checkSession(t, srv, 4)
		})
	}
}

// checkSession checks that the hosted agent's turns all ran in one
// session, made by the first request, that every later request named it,
// and that its sandbox served responses turns.
func checkSession(t *testing.T, srv *foundrytest.Server, responses int) {
	t.Helper()
	sessions := srv.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want 1: %+v", len(sessions), sessions)
	}
	s := sessions[0]
	if len(s.Responses) != responses {
		t.Errorf("the session's sandbox served %d responses, want %d", len(s.Responses), responses)
	}
	var named []string
	for _, r := range responseRequests(srv) {
		if r.Status == 200 {
			named = append(named, r.AgentSessionID())
		}
	}
	want := []string{""}
	for range responses - 1 {
		want = append(want, s.ID)
	}
	if diff := cmp.Diff(want, named); diff != "" {
		t.Errorf("agent_session_id of the answered requests (-want +got):\n%s", diff)
	}
}

// deadJournal is the journal as a worker that stopped sees it: its lease
// renewals never reach the store.
type deadJournal struct{ *driver.Memory }

func (deadJournal) Renew(context.Context, driver.Key, string, time.Duration) error { return nil }
func (deadJournal) RenewRun(context.Context, string, string, string, time.Duration) error {
	return nil
}

// TestHostedSessionTakeOver: a hosted agent's run whose worker stopped
// (stuck in its first call, its lease renewals lost) is taken over by
// another worker with a backend of its own, sharing only the journal; the
// turns it runs land in the session the first worker's turn ran in.
func TestHostedSessionTakeOver(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, weatherTools...))
	mem := driver.NewMemory()
	const lease = 300 * time.Millisecond // far longer than a run takes to reach its handler, even under -race
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	weather := func(stuck bool) *core.Toolbox {
		must := func(tool *core.Tool, err error) *core.Tool {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return tool
		}
		tb, err := core.NewToolbox(
			must(core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", func(context.Context, struct{}) (string, error) {
				if stuck && first.CompareAndSwap(false, true) {
					close(entered)
					<-release // the first worker is stuck here
				}
				return "Seattle, WA", nil
			}, &core.ToolOptions{Idempotent: true})),
			must(core.NewTool("getCityNickname", "Gets the nickname of a city.", func(context.Context, locationArgs) (string, error) {
				return "The Emerald City", nil
			}, nil)),
			must(core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", func(context.Context, weatherArgs) (string, error) {
				return "70f", nil
			}, nil)),
		)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	ctx := context.Background()
	tools1, tools2 := weather(true), weather(false)
	b1 := open(t, tools1, existing(srv, "sandbox", foundry.Conversation, false))
	b2 := open(t, tools2, existing(srv, "sandbox", foundry.Conversation, false))
	dead := core.NewRunner(b1, tools1, &core.Options{Journal: deadJournal{mem}, Owner: "dead", Lease: lease, Logger: discard})
	alive := core.NewRunner(b2, tools2, &core.Options{Journal: mem, Owner: "alive", Lease: lease, Logger: discard})

	firstDone := make(chan error, 1)
	go func() {
		_, err := dead.Run(ctx, "What's the weather like in my favorite city?", nil)
		firstDone <- err
	}()
	select {
	case <-entered:
	case err := <-firstDone:
		t.Fatalf("the first worker's run ended before its first call: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first worker's run never reached its first call")
	}
	var got []*core.Result
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(lease / 4) // until the stuck worker's lease expires
		var err error
		if got, err = alive.TakeOver(ctx); err != nil {
			t.Fatalf("TakeOver: %v", err)
		}
	}
	close(release)
	<-firstDone
	if len(got) != 1 || got[0].Text != weatherAnswer {
		t.Fatalf("TakeOver = %+v; want the run finished here with %q", got, weatherAnswer)
	}
	checkSession(t, srv, 4)
}

// cutter is an HTTP transport that, on its cut-th create-response
// request, passes the stream's answer on as far as its response.created
// event, then breaks the connection; every request after that fails, as
// in a process that died there.
type cutter struct {
	base http.RoundTripper
	cut  int
	mu   sync.Mutex
	n    int
	dead bool
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	dead := c.dead
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/responses") {
		c.n++
	}
	cut := c.n == c.cut && req.Method == http.MethodPost
	c.dead = c.dead || cut
	c.mu.Unlock()
	if dead {
		return nil, errors.New("cutter: the process is gone")
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil || !cut {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	i := bytes.Index(body, []byte("event: response.in_progress"))
	if i < 0 {
		return nil, fmt.Errorf("cutter: no response.created in %s", body)
	}
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:i]), iotest.ErrReader(io.ErrUnexpectedEOF)))
	return resp, nil
}

// TestHostedSessionMoved stops a hosted agent's chain as its second
// response streams, just after the service named the response (the run's
// thread moved there), in a process that then died; a fresh backend and
// runner resume that response in the session of the thread: the backend
// kept it for the response as soon as the stream named it, not only once
// the step completed.
func TestHostedSessionMoved(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgentVersion("sandbox", hostedDef([]string{"responses"}, weatherTools...))
	journal := driver.NewMemory()
	ctx := context.Background()

	tools1 := toolbox(t, &counter{})
	o1 := existing(srv, "sandbox", foundry.Chain, true)
	o1.RequestOptions = noRetries
	o1.HTTPClient = &http.Client{Transport: &cutter{base: srv.Client().Transport, cut: 2}}
	b1 := open(t, tools1, o1)
	res, err := newRunner(b1, tools1, journal).Run(ctx, "What's the weather like in my favorite city?", nil)
	if err == nil || res == nil || res.Thread == "" {
		t.Fatalf("Run = %+v, %v; want a failure on a thread to resume", res, err)
	}
	if got := responseRequests(srv); len(got) != 2 {
		t.Fatalf("%d create-response requests before the process died, want 2", len(got))
	}

	tools2 := toolbox(t, &counter{})
	b2 := open(t, tools2, existing(srv, "sandbox", foundry.Chain, true))
	res, err = newRunner(b2, tools2, journal).Resume(ctx, res.Thread, nil)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Text != weatherAnswer {
		t.Errorf("answer = %q, want %q", res.Text, weatherAnswer)
	}
	checkSession(t, srv, 4)
}
