package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	oai "github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

const customer123 = `{"found":true,"customer":{"name":"Example Customer","plan":"pro"}}`

// TestRun runs whole turns against the fake and checks the answer and the
// results the service received.
func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		script  *coretest.Script
		barrier int
		want    string
		results []coretest.Delivered // call ids ignored
	}{
		{
			name:    "one call",
			script:  oneTurn(calls(call("get_customer", `{"customer_id":"123"}`)), text(`Customer: {{output "get_customer"}}`)),
			want:    "Customer: " + customer123,
			results: []coretest.Delivered{{Name: "get_customer", Output: customer123}},
		},
		{
			name: "three calls in one step, run concurrently",
			script: oneTurn(
				calls(call("get_weather", `{"city":"Lisbon"}`), call("get_weather", `{"city":"Porto"}`), call("get_weather", `{"city":"Faro"}`)),
				text(`{{result 0}}; {{result 1}}; {{result 2}}`)),
			barrier: 3,
			want:    "sunny in Lisbon; sunny in Porto; sunny in Faro",
			results: []coretest.Delivered{
				{Name: "get_weather", Output: "sunny in Lisbon"},
				{Name: "get_weather", Output: "sunny in Porto"},
				{Name: "get_weather", Output: "sunny in Faro"},
			},
		},
		{
			name: "a chain of three steps",
			script: oneTurn(
				calls(call("get_customer", `{"customer_id":"123"}`)),
				calls(call("get_plan_price", `{"plan":"pro"}`)),
				calls(call("get_weather", `{"city":"Lisbon"}`)),
				text(`{{output "get_plan_price"}}, {{output "get_weather"}}`)),
			want: "pro costs 20 USD a month, sunny in Lisbon",
			results: []coretest.Delivered{
				{Name: "get_customer", Output: customer123},
				{Name: "get_plan_price", Output: "pro costs 20 USD a month"},
				{Name: "get_weather", Output: "sunny in Lisbon"},
			},
		},
		{
			name:    "a failing function",
			script:  oneTurn(calls(call("charge_card", `{"amount":30}`)), text(`failed={{failed "charge_card"}}: {{output "charge_card"}}`)),
			want:    "failed=true: card declined: insufficient funds for 30",
			results: []coretest.Delivered{{Name: "charge_card", Failed: true, Error: "card declined: insufficient funds for 30"}},
		},
		{
			name:    "an unknown function",
			script:  oneTurn(calls(coretest.Call{Name: "delete_everything", Arguments: json.RawMessage(`{}`), Unoffered: true}), text(`failed={{failed "delete_everything"}}`)),
			want:    "failed=true",
			results: []coretest.Delivered{{Name: "delete_everything", Failed: true, Error: `unknown tool "delete_everything"`}},
		},
		{
			name: "arguments sent as a JSON string",
			script: oneTurn(calls(coretest.Call{Name: "get_customer", Arguments: json.RawMessage(`{"customer_id":"123"}`), AsString: true}),
				text(`{{output "get_customer"}}`)),
			want:    customer123,
			results: []coretest.Delivered{{Name: "get_customer", Output: customer123}},
		},
		{
			name:    "a content array and a null output",
			script:  oneTurn(calls(call("get_picture", `{}`), call("forget", `{}`)), text(`{{result 0}} / {{result 1}}`)),
			want:    `[{"text":"a cat","type":"input_text"},{"image_url":"https://example.com/cat.png","type":"input_image"}] / null`,
			results: []coretest.Delivered{{Name: "get_picture", Output: `[{"text":"a cat","type":"input_text"},{"image_url":"https://example.com/cat.png","type":"input_image"}]`}, {Name: "forget", Output: "null"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, setup{script: tt.script, barrier: tt.barrier})
			res, err := h.runner.Run(t.Context(), "hello", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != tt.want {
				t.Errorf("answer = %q, want %q", res.Text, tt.want)
			}
			got := h.results()
			if tt.name == "an unknown function" && len(got) == 1 && strings.Contains(got[0].Error, "delete_everything") {
				got[0].Error = tt.results[0].Error // the runner's wording is its own
			}
			if diff := cmp.Diff(tt.results, got, cmpopts.IgnoreFields(coretest.Delivered{}, "CallID")); diff != "" {
				t.Errorf("results received (-want +got):\n%s", diff)
			}
			if res.Usage.TotalTokens == 0 {
				t.Errorf("usage = %+v, want the turn's tokens", res.Usage)
			}
			h.checkOnce()
		})
	}
}

// TestResultsOneRequest checks that the results of one step go in one
// request, keyed by the results' own idempotency keys.
func TestResultsOneRequest(t *testing.T) {
	h := start(t, setup{script: oneTurn(
		calls(call("get_plan_price", `{"plan":"a"}`), call("get_plan_price", `{"plan":"b"}`)),
		calls(call("get_plan_price", `{"plan":"c"}`)),
		text("done"))})
	res, err := h.runner.Run(t.Context(), "prices", nil)
	if err != nil {
		t.Fatal(err)
	}
	var posts []openaitest.Request
	for _, r := range h.srv.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/events") {
			posts = append(posts, r)
		}
	}
	if len(posts) != 2 {
		t.Fatalf("got %d results requests, want 2 (one per step)", len(posts))
	}
	if got := posts[0].Events(); len(got) != 2 {
		t.Errorf("first request carries %d events, want 2", len(got))
	}
	// A single result's request carries that result's own key.
	if got, want := posts[1].Header.Get("Idempotency-Key"), res.Calls[2].IdempotencyKey; got != want {
		t.Errorf("Idempotency-Key = %q, want the result's key %q", got, want)
	}
	if k := posts[0].Header.Get("Idempotency-Key"); k == "" || k == res.Calls[0].IdempotencyKey || k == res.Calls[1].IdempotencyKey {
		t.Errorf("Idempotency-Key of a batch = %q, want one derived from both results' keys", k)
	}
}

// TestWireShapes checks what the backend sends: the session environment,
// the agent made from the toolbox, and a tool result.
func TestWireShapes(t *testing.T) {
	h := start(t, setup{script: oneTurn(calls(call("charge_card", `{"amount":1}`)), text("ok"))})
	if _, err := h.runner.Run(t.Context(), "pay", nil); err != nil {
		t.Fatal(err)
	}
	var agent, sess, result map[string]any
	for _, r := range h.srv.Requests() {
		switch {
		case r.Method == "POST" && r.Path == "agents":
			json.Unmarshal(r.Body, &agent)
		case r.Method == "POST" && r.Path == "agents/sessions":
			json.Unmarshal(r.Body, &sess)
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/events"):
			var body struct{ Events []map[string]any }
			json.Unmarshal(r.Body, &body)
			result = body.Events[0]
		}
	}
	if got := sess["environment"]; !cmp.Equal(got, map[string]any{"type": "none"}) {
		t.Errorf("environment = %v, want {type: none}", got)
	}
	if sess["stream"] != true || sess["input"] != "pay" || sess["agent_id"] == nil {
		t.Errorf("session request = %v, want stream, input and agent_id", sess)
	}
	if agent["model"] != openai.DefaultModel {
		t.Errorf("agent model = %v, want %s", agent["model"], openai.DefaultModel)
	}
	tools, _ := agent["tools"].([]any)
	var search, deferred bool
	for _, tl := range tools {
		m := tl.(map[string]any)
		if m["type"] == "tool_search" {
			search = true
		}
		if m["name"] == "lookup_order" {
			deferred = m["defer_loading"] == true
		}
		if _, ok := m["strict"]; ok {
			t.Errorf("tool %v has a strict flag; the API has none", m["name"])
		}
		if m["name"] == "get_customer" {
			want := map[string]any{"type": "object", "properties": map[string]any{"customer_id": map[string]any{"type": "string"}},
				"required": []any{"customer_id"}, "additionalProperties": false}
			if diff := cmp.Diff(want, m["parameters"]); diff != "" {
				t.Errorf("get_customer parameters (-want +got):\n%s", diff)
			}
		}
	}
	if !search || !deferred {
		t.Errorf("tools: tool_search=%v, lookup_order deferred=%v; want both", search, deferred)
	}
	want := map[string]any{"type": "agent.session.input.tool_result", "turn_id": "turn_1", "call_id": "call_1",
		"success": false, "error": "card declined: insufficient funds for 1"}
	if diff := cmp.Diff(want, result); diff != "" {
		t.Errorf("tool result (-want +got):\n%s", diff)
	}
}

// TestDeferredTool: the agent carries defer_loading and tool_search, the
// fake lets the model call the tool only after a search, and the call is
// served.
func TestDeferredTool(t *testing.T) {
	t.Run("after a search", func(t *testing.T) {
		h := start(t, setup{script: oneTurn(
			coretest.Step{Search: "order", Calls: []coretest.Call{call("lookup_order", `{"order_id":"A1"}`)}},
			text(`{{output "lookup_order"}}`))})
		res, err := h.runner.Run(t.Context(), "where is A1?", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "order A1 has shipped" {
			t.Errorf("answer = %q", res.Text)
		}
	})
	t.Run("without a search", func(t *testing.T) {
		h := start(t, setup{script: oneTurn(calls(call("lookup_order", `{"order_id":"A1"}`)), text("no"))})
		_, err := h.runner.Run(t.Context(), "where is A1?", nil)
		var te *driver.TurnError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "deferred") {
			t.Fatalf("err = %v, want a failed turn about the deferred tool", err)
		}
		if n := h.runCounts()["call_1"]; n != 0 {
			t.Errorf("lookup_order ran %d times", n)
		}
	})
}

// TestSecondTurn runs two turns on one session: the second subscribes to
// the events stream before it posts its input.
func TestSecondTurn(t *testing.T) {
	h := start(t, setup{script: &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{text("Hello.")}},
		{Steps: []coretest.Step{calls(call("get_customer", `{"customer_id":"123"}`)), text(`{{output "get_customer"}}`)}},
	}}})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.runner.Run(t.Context(), "customer 123?", &core.RunOptions{Thread: first.Thread})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != customer123 || res.Thread != first.Thread || res.Turn == first.Turn {
		t.Errorf("second run = %+v, want the customer on the same session, another turn", res)
	}
	subscribed, posted := 0, 0
	for _, r := range h.srv.Requests() {
		switch {
		case r.Method == "GET" && strings.HasSuffix(r.Path, "/events") && subscribed == 0:
			subscribed = r.N
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/events") && posted == 0:
			if ev := r.Events(); len(ev) == 1 && ev[0] == "agent.session.input.message" {
				posted = r.N
			}
		}
	}
	if subscribed == 0 || posted == 0 || subscribed > posted {
		t.Errorf("subscription is request %d, input is request %d; want the subscription first", subscribed, posted)
	}
}

// TestStrayCall: a function_call item that required_actions does not list
// is never run.
func TestStrayCall(t *testing.T) {
	h := start(t, setup{
		script: oneTurn(calls(call("get_customer", `{"customer_id":"123"}`)), text(`{{output "get_customer"}}`)),
		server: &openaitest.Options{StrayCalls: true},
	})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != customer123 {
		t.Errorf("answer = %q", res.Text)
	}
	if got, want := sortedKeys(h.runCounts()), []string{"call_1"}; !cmp.Equal(got, want) {
		t.Errorf("handlers ran for %v, want only %v (not the stray call)", got, want)
	}
	for _, d := range h.results() {
		if strings.Contains(d.CallID, "stray") {
			t.Errorf("a result was sent for the stray call %s", d.CallID)
		}
	}
	// The stray call is in the session's history, as a function_call item.
	page, err := h.backend.Client().Beta.Agents.Sessions.Items.List(t.Context(), res.Thread, oai.BetaAgentSessionItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	stray := false
	for _, it := range page.Data {
		stray = stray || (it.Type == "function_call" && strings.Contains(it.CallID, "stray"))
	}
	if !stray {
		t.Error("the fake did not announce a stray function_call")
	}
}

// TestDuplicateEvents: every event arrives twice; each call still runs
// once and the answer is not doubled.
func TestDuplicateEvents(t *testing.T) {
	h := start(t, setup{
		script: oneTurn(calls(call("get_customer", `{"customer_id":"123"}`)), calls(call("get_plan_price", `{"plan":"pro"}`)), text("done")),
		server: &openaitest.Options{DuplicateEvents: true},
	})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" || res.Steps != 2 {
		t.Errorf("result = %q after %d steps, want done after 2", res.Text, res.Steps)
	}
	h.checkOnce()
}

// TestDuplicateEventsSecondTurn: with every event twice, a second turn on
// the same session runs each call once too, and a session between turns
// holds no event ids (they belong to a turn that is over).
func TestDuplicateEventsSecondTurn(t *testing.T) {
	turn := coretest.Turn{Steps: []coretest.Step{calls(call("get_customer", `{"customer_id":"123"}`)), text(`{{output "get_customer"}}`)}}
	h := start(t, setup{
		script: &coretest.Script{Turns: []coretest.Turn{turn, turn}},
		server: &openaitest.Options{DuplicateEvents: true},
	})
	thread := ""
	for i := range 2 {
		res, err := h.runner.Run(t.Context(), "customer 123?", &core.RunOptions{Thread: thread})
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if res.Text != customer123 {
			t.Errorf("turn %d: answer %q, want %q", i+1, res.Text, customer123)
		}
		thread = res.Thread
		if n := h.backend.SeenEvents(thread); n != 0 {
			t.Errorf("after turn %d the session holds %d event ids, want 0", i+1, n)
		}
	}
	h.checkOnce()
}

// TestPolling runs a turn without any event stream.
func TestPolling(t *testing.T) {
	h := start(t, setup{
		script:  oneTurn(calls(call("get_customer", `{"customer_id":"123"}`)), calls(call("get_plan_price", `{"plan":"pro"}`)), text(`{{output "get_plan_price"}}`)),
		backend: openai.Options{Delivery: openai.Polling, PollInterval: time.Millisecond},
	})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "pro costs 20 USD a month" {
		t.Errorf("answer = %q", res.Text)
	}
	for _, r := range h.srv.Requests() {
		if r.Stream {
			t.Errorf("request %d (%s %s) opened an event stream in polling mode", r.N, r.Method, r.Path)
		}
	}
	h.checkOnce()
}

// TestTurnFailed: a turn the service fails ends the run with a
// *TurnError carrying the service's code and message.
func TestTurnFailed(t *testing.T) {
	h := start(t, setup{script: oneTurn(calls(call("get_customer", `{"customer_id":"1"}`)),
		coretest.Step{Fail: &coretest.Failure{Code: "rate_limit_exceeded", Message: "slow down"}})})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	var te *driver.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a *TurnError", err)
	}
	want := &driver.TurnError{Backend: "openai", Thread: res.Thread, Turn: "turn_1", Status: "failed", Code: "rate_limit_exceeded", Message: "slow down"}
	if diff := cmp.Diff(want, te); diff != "" {
		t.Errorf("TurnError (-want +got):\n%s", diff)
	}
	if got := errcode.Of(err); got != errcode.ResourceExhausted {
		t.Errorf("code = %v, want ResourceExhausted", got)
	}
}

// TestStartFailureNamesSession: a turn that fails on the creation stream
// still names the session it created, so that the run can be resumed or
// the session inspected.
func TestStartFailureNamesSession(t *testing.T) {
	h := start(t, setup{script: oneTurn(coretest.Step{Fail: &coretest.Failure{Code: "server_error", Message: "boom"}})})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	var te *driver.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a *TurnError", err)
	}
	if res == nil || len(h.srv.Sessions()) != 1 || res.Thread != h.srv.Sessions()[0] {
		t.Fatalf("Run = %+v; want a Result naming the session %v", res, h.srv.Sessions())
	}
	if te.Thread != res.Thread {
		t.Errorf("TurnError.Thread = %q, want %q", te.Thread, res.Thread)
	}
}

// TestMaxStepsCancels: a run that reaches its step limit cancels the turn
// rather than leaving it parked.
func TestMaxStepsCancels(t *testing.T) {
	h := start(t, setup{
		script: oneTurn(calls(call("get_plan_price", `{"plan":"a"}`)), calls(call("get_plan_price", `{"plan":"b"}`)), text("done")),
		runner: core.Options{MaxSteps: 1},
	})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	if !errors.Is(err, core.ErrMaxSteps) {
		t.Fatalf("err = %v, want ErrMaxSteps", err)
	}
	rec := h.srv.Received()
	if last := rec[len(rec)-1]; last.Kind != "cancel" || last.Thread != res.Thread {
		t.Errorf("last received = %+v, want a cancel of %s", last, res.Thread)
	}
	if got := h.srv.SessionStatus(res.Thread); got != "idle" {
		t.Errorf("session status = %q, want idle (turn cancelled)", got)
	}
	events := h.srv.Events(res.Thread)
	if !containsString(events, "agent.session.turn.cancelled") {
		t.Errorf("events = %v, want a turn.cancelled", events)
	}
}

// TestContextCanceled: canceling the caller's context while a tool runs
// ends the run with Canceled and leaves the turn waiting on the service
// (for a resume); Runner.Cancel abandons it.
func TestContextCanceled(t *testing.T) {
	h := start(t, setup{script: oneTurn(calls(call("block", `{}`)), text("never"))})
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(withBlocked(t.Context(), started))
	go func() {
		<-started
		cancel()
	}()
	res, err := h.runner.Run(ctx, "hi", nil)
	if errcode.Of(err) != errcode.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	rec := h.srv.Received()
	if last := rec[len(rec)-1]; last.Kind != "input" {
		t.Errorf("last received = %+v, want the input (the turn left waiting)", last)
	}
	if got := h.srv.SessionStatus(res.Thread); got != "requires_action" {
		t.Errorf("session status = %q, want requires_action", got)
	}
	if err := h.runner.Cancel(t.Context(), res.Thread); err != nil {
		t.Fatal(err)
	}
	rec = h.srv.Received()
	if last := rec[len(rec)-1]; last.Kind != "cancel" || last.Thread != res.Thread {
		t.Errorf("last received after Runner.Cancel = %+v, want a cancel of %s", last, res.Thread)
	}
}

// TestErrorCodes checks how service errors map to core codes, and that the
// SDK's error stays reachable.
func TestErrorCodes(t *testing.T) {
	tests := []struct {
		status int
		want   errcode.Code
	}{
		{400, errcode.InvalidArgument},
		{401, errcode.PermissionDenied},
		{403, errcode.PermissionDenied},
		{404, errcode.NotFound},
		{409, errcode.FailedPrecondition},
		{429, errcode.ResourceExhausted},
		{500, errcode.Internal},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			h := start(t, setup{
				script: oneTurn(text("hi")),
				server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
					if r.Method == "POST" && r.Path == "agents" {
						return &openaitest.Fault{Status: tt.status, RetryAfter: 1}
					}
					return nil
				}},
			})
			_, err := h.runner.Run(t.Context(), "hi", nil)
			if got := errcode.Of(err); got != tt.want {
				t.Errorf("code = %v, want %v (err %v)", got, tt.want, err)
			}
			var api *oai.Error
			if !errors.As(err, &api) || api.StatusCode != tt.status {
				t.Errorf("errors.As(*openai.Error) = %v, want status %d", api, tt.status)
			}
		})
	}
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
