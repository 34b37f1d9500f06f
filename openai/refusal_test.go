package openai_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// TestAsyncFunctionSessionRefused: a session attached by SessionID whose
// agent, as the session runs it, declares a function async is refused
// before any input is sent (FailedPrecondition, naming the function), as
// an existing agent is at Open: whether the saved agent declares it or the
// session's override of its tools does.
func TestAsyncFunctionSessionRefused(t *testing.T) {
	weather := func(async bool) oai.PersistedAgentToolParamFunction {
		return oai.PersistedAgentToolParamFunction{Name: "get_weather", Parameters: map[string]any{"type": "object"}, Async: oai.Bool(async)}
	}
	tests := []struct {
		name     string
		saved    bool // the saved agent declares get_weather async
		override bool // the session's agent override does
	}{
		{name: "saved agent", saved: true},
		{name: "session override", override: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, setup{script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("Hello.")}}, {Steps: []coretest.Step{text("Sunny.")}}}}})
			client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
			fn := weather(tt.saved)
			agent, err := client.Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m", Tools: []oai.PersistedAgentToolParamUnion{{OfParamFunction: &fn}}})
			if err != nil {
				t.Fatal(err)
			}
			params := oai.BetaAgentSessionNewParams{
				Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
				AgentID:     oai.String(agent.ID),
				Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("hi")},
			}
			if tt.override {
				params.Agent.Tools = []oai.AgentToolParamUnion{{OfParamFunction: &oai.AgentToolParamFunction{
					Name: "get_weather", Parameters: map[string]any{"type": "object"}, Async: oai.Bool(true)}}}
			}
			sess, err := client.Beta.Agents.Sessions.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			b := h.open(openai.Options{SessionID: sess.ID})
			r := core.NewRunner(b, h.tools, &core.Options{Logger: discard()})
			_, err = r.Run(t.Context(), "weather?", nil)
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), `"get_weather" async`) || !strings.Contains(err.Error(), sess.ID) {
				t.Fatalf("Run = %v (%v), want FailedPrecondition naming the session and the async function", err, errcode.Of(err))
			}
			for _, req := range h.srv.Requests() {
				if req.Method == "POST" && strings.HasSuffix(req.Path, "/events") {
					t.Errorf("request %d: POST %s: input sent to a session that was refused", req.N, req.Path)
				}
			}
		})
	}
}

// TestResultRefusedAfterAccepted: a tool result the service accepted
// (202) and then refused (listed again in required_actions, or named by
// an error event) ends a streamed run with a FailedPrecondition error
// naming the call, not a wait for an event that never comes; the result is
// not sent again.
func TestResultRefusedAfterAccepted(t *testing.T) {
	for _, how := range []struct {
		name   string
		refuse openaitest.Refusal
		says   string
	}{
		{"listed again", openaitest.Relist, "listed the call again"},
		{"error event", openaitest.ErrorEvent, "invalid_request"},
	} {
		for _, run := range []string{"new session", "later turn"} {
			t.Run(how.name+"/"+run, func(t *testing.T) {
				weather := []coretest.Step{calls(call("get_weather", `{"city":"Roma"}`)), text("Sunny.")}
				script := oneTurn(weather...)
				if run == "later turn" {
					script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("Hello.")}}, {Steps: weather}}}
				}
				var refusing atomic.Bool
				refusing.Store(run == "new session")
				h := start(t, setup{script: script, server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
					if refusing.Load() && r.Method == "POST" && strings.HasSuffix(r.Path, "/events") && strings.Contains(string(r.Body), "tool_result") {
						return &openaitest.Fault{Refuse: how.refuse}
					}
					return nil
				}}})
				var opts *core.RunOptions
				if run == "later turn" {
					first, err := h.runner.Run(t.Context(), "hi", nil)
					if err != nil {
						t.Fatal(err)
					}
					opts = &core.RunOptions{Thread: first.Thread}
					refusing.Store(true)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				_, err := h.runner.Run(ctx, "weather?", opts)
				if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "result of call call_1") || !strings.Contains(err.Error(), "then refused it") || !strings.Contains(err.Error(), how.says) {
					t.Fatalf("Run = %v (%v), want FailedPrecondition saying the service refused the result it accepted", err, errcode.Of(err))
				}
				if n := resultPosts(h); n != 1 {
					t.Errorf("%d requests carried the result, want 1", n)
				}
			})
		}
	}
}

// TestResultRefusedPolling (issue 47, item 5, polling): a polling run
// whose result the service refuses after its 202 (the call listed again,
// nothing applied) ends, once the session lists nothing but that call for
// longer than the bound, with the refusal's FailedPrecondition, the result
// posted once; before, it polled until its context ended. A result the
// service applies within the bound is no refusal.
func TestResultRefusedPolling(t *testing.T) {
	defer openai.SetMaxUnapplied(300 * time.Millisecond)()
	var refusing atomic.Bool
	refusing.Store(true)
	h := start(t, setup{script: oneTurn(calls(call("get_weather", `{"city":"Roma"}`)), text("Sunny.")),
		backend: openai.Options{Delivery: openai.Polling, PollInterval: 20 * time.Millisecond},
		server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			if refusing.Load() && r.Method == "POST" && strings.HasSuffix(r.Path, "/events") && strings.Contains(string(r.Body), "tool_result") {
				return &openaitest.Fault{Refuse: openaitest.Relist}
			}
			return nil
		}}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := h.runner.Run(ctx, "weather?", nil)
	if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "result of call call_1") || !strings.Contains(err.Error(), "then refused it") {
		t.Fatalf("Run = %v (%v), want FailedPrecondition saying the service refused the result it accepted", err, errcode.Of(err))
	}
	if n := resultPosts(h); n != 1 {
		t.Errorf("%d requests carried the result, want 1", n)
	}
}

// TestNamespacedToolRefused: a tool named in a namespace ("crm.lookup",
// which the Responses backends offer as function lookup of namespace
// crm) is refused by Open, InvalidArgument naming it, before any request:
// sessions have no namespaces, and the service refuses a dotted name.
func TestNamespacedToolRefused(t *testing.T) {
	tool, err := core.NewTool("crm.lookup", "Look up a customer.", func(context.Context, struct{}) (string, error) { return "", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(&coretest.Script{}, nil)
	defer srv.Close()
	_, err = openai.Open(t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Agent: "agent_1", HTTPClient: srv.Client()})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), `"crm.lookup"`) {
		t.Errorf("Open = %v, want InvalidArgument naming the tool", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the service received %d requests, want none", n)
	}
}

// resultPosts counts the requests h's fake received that carried a tool
// result.
func resultPosts(h *harness) int {
	n := 0
	for _, r := range h.srv.Requests() {
		if r.Method == "POST" && strings.Contains(string(r.Body), "tool_result") {
			n++
		}
	}
	return n
}
