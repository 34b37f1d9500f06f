package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// twoSteps is a turn of two steps of calls, then an answer built from both.
func twoSteps() []coretest.Step {
	return []coretest.Step{
		calls(call("get_customer", `{"customer_id":"123"}`)),
		calls(call("get_plan_price", `{"plan":"pro"}`)),
		text(`{{output "get_customer"}} / {{output "get_plan_price"}}`),
	}
}

const twoStepsAnswer = customer123 + " / pro costs 20 USD a month"

// cutStream closes the first event stream that matches after n events
// (n <= 0: before the first).
func cutStream(match func(r *openaitest.Request) bool, n int) func(r *openaitest.Request) *openaitest.Fault {
	var done atomic.Bool
	return func(r *openaitest.Request) *openaitest.Fault {
		if !r.Stream || !match(r) || !done.CompareAndSwap(false, true) {
			return nil
		}
		if n <= 0 {
			n = -1
		}
		return &openaitest.Fault{CloseAfter: n}
	}
}

func anyRequest(*openaitest.Request) bool { return true }

// TestStreamCut cuts the creation stream of a two-step turn after each of
// its events in turn: every run completes with the right answer and no
// function runs twice.
func TestStreamCut(t *testing.T) {
	dry := start(t, setup{script: oneTurn(twoSteps()...)})
	res, err := dry.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(dry.srv.Events(res.Thread))
	if n < 15 {
		t.Fatalf("the turn has %d events; the test expects a longer turn", n)
	}
	for i := 1; i <= n; i++ {
		t.Run(fmt.Sprintf("after event %d", i), func(t *testing.T) {
			h := start(t, setup{
				script: oneTurn(twoSteps()...),
				server: &openaitest.Options{Fault: cutStream(anyRequest, i)},
			})
			// Results never delivered leave the turn waiting for them:
			// the deadline ends the run then.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := h.runner.Run(ctx, "hi", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q, want %q", res.Text, twoStepsAnswer)
			}
			h.checkOnce()
		})
	}
}

// TestStreamCutSubscription does the same on a later turn of a session,
// whose events come on a subscription (GET .../events), including a cut
// before the first event.
func TestStreamCutSubscription(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("Hello.")}}, {Steps: twoSteps()}}}
	subscription := func(r *openaitest.Request) bool { return r.Method == "GET" }
	for i := 0; i <= 20; i++ {
		t.Run(fmt.Sprintf("after event %d", i), func(t *testing.T) {
			h := start(t, setup{script: script, server: &openaitest.Options{Fault: cutStream(subscription, i)}})
			first, err := h.runner.Run(t.Context(), "hi", nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.runner.Run(t.Context(), "again", &core.RunOptions{Thread: first.Thread})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q, want %q", res.Text, twoStepsAnswer)
			}
			h.checkOnce()
		})
	}
}

// TestStreamDropsBounded: a stream that keeps dropping while the session
// shows no progress fails the run after Options.MaxReconnects resumptions,
// instead of waiting forever.
func TestStreamDropsBounded(t *testing.T) {
	const reconnects = 2
	var subscriptions atomic.Int32
	h := start(t, setup{
		script: oneTurn(twoSteps()...),
		server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			switch {
			case r.Stream && r.Method == "POST":
				return &openaitest.Fault{CloseAfter: 1} // only agent.session.created
			case r.Stream:
				subscriptions.Add(1)
				return &openaitest.Fault{CloseAfter: -1}
			case r.Method == "GET" && r.Path == "agents/sessions/sess_1":
				return &openaitest.Fault{Status: 200, Body: `{"id":"sess_1","object":"agent.session","status":"in_progress","required_actions":[]}`}
			}
			return nil
		}},
		backend: openai.Options{MaxReconnects: reconnects},
	})
	_, err := h.runner.Run(t.Context(), "hi", nil)
	if err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("err = %v, want the stream-dropped error", err)
	}
	if got := subscriptions.Load(); got != reconnects {
		t.Errorf("re-subscribed %d times, want %d", got, reconnects)
	}
}

// resultsPost matches the requests that post tool results.
func resultsPost(r *openaitest.Request) bool {
	ev := r.Events()
	return r.Method == "POST" && len(ev) > 0 && ev[0] == "agent.session.input.tool_result"
}

// onFirst injects f into the first request that matches.
func onFirst(match func(*openaitest.Request) bool, f openaitest.Fault) func(*openaitest.Request) *openaitest.Fault {
	var done atomic.Bool
	return func(r *openaitest.Request) *openaitest.Fault {
		if match(r) && done.CompareAndSwap(false, true) {
			return &f
		}
		return nil
	}
}

// TestLostResponse: the service applies a results request but its response
// is lost. Whether the SDK resends it (same key and body: the service
// answers from its idempotency store) or the backend reads the session and
// finds the calls no longer pending, the resend is harmless.
func TestLostResponse(t *testing.T) {
	for _, retries := range []int{2, 0} {
		t.Run(fmt.Sprintf("SDK retries %d", retries), func(t *testing.T) {
			h := start(t, setup{
				script:  oneTurn(twoSteps()...),
				server:  &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Drop: true})},
				backend: openai.Options{RequestOptions: []option.RequestOption{option.WithMaxRetries(retries)}},
			})
			res, err := h.runner.Run(t.Context(), "hi", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q", res.Text)
			}
			h.checkOnce()
			var dropped, replayed bool
			for _, r := range h.srv.Requests() {
				dropped = dropped || r.Dropped
				replayed = replayed || (resultsPost(&r) && r.Status == 202 && dropped && retries > 0)
			}
			if !dropped || (retries > 0 && !replayed) {
				t.Errorf("dropped=%v replayed=%v; want the fault to have happened", dropped, replayed)
			}
		})
	}
}

// TestResultsNotApplied: a results request fails with a 5xx the SDK does
// not retry, and the service did not apply it. The backend reads the
// session, finds the calls still pending (by turn and call id), and sends
// their results again: the run completes, each result delivered once.
func TestResultsNotApplied(t *testing.T) {
	for _, delivery := range []openai.Delivery{openai.Streaming, openai.Polling} {
		t.Run(string(delivery), func(t *testing.T) {
			h := start(t, setup{
				script:  oneTurn(twoSteps()...),
				server:  &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Status: 503})},
				backend: openai.Options{Delivery: delivery, RequestOptions: []option.RequestOption{option.WithMaxRetries(0)}},
			})
			res, err := h.runner.Run(t.Context(), "hi", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q, want %q", res.Text, twoStepsAnswer)
			}
			h.checkOnce()
		})
	}
}

// TestRateLimited: a 429 with Retry-After-Ms is retried and the run
// completes; a 429 that persists is ResourceExhausted.
func TestRateLimited(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		h := start(t, setup{
			script: oneTurn(twoSteps()...),
			server: &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Status: 429, RetryAfter: time.Millisecond})},
		})
		res, err := h.runner.Run(t.Context(), "hi", nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res.Text != twoStepsAnswer {
			t.Errorf("answer = %q", res.Text)
		}
		var keys []string
		for _, r := range h.srv.Requests() {
			if resultsPost(&r) {
				keys = append(keys, fmt.Sprintf("%d %s", r.Status, r.Header.Get("Retry-After-Ms")+r.Header.Get("Idempotency-Key")))
			}
		}
		if len(keys) != 3 || !strings.HasPrefix(keys[0], "429 ") || keys[0][4:] != keys[1][4:] {
			t.Errorf("results requests = %q, want a 429 then the same request accepted", keys)
		}
		h.checkOnce()
	})
	t.Run("always", func(t *testing.T) {
		h := start(t, setup{
			script: oneTurn(twoSteps()...),
			server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
				return &openaitest.Fault{Status: 429, RetryAfter: time.Millisecond}
			}},
		})
		_, err := h.runner.Run(t.Context(), "hi", nil)
		if errcode.Of(err) != errcode.ResourceExhausted {
			t.Errorf("err = %v, want ResourceExhausted", err)
		}
	})
}

// TestUnauthorized: a refused API key gives a clear error naming
// authentication.
func TestUnauthorized(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi")), server: &openaitest.Options{APIKey: "right"}, backend: openai.Options{APIKey: "wrong"}})
	_, err := h.runner.Run(t.Context(), "hi", nil)
	if errcode.Of(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), "authentication") {
		t.Errorf("err = %v, want PermissionDenied naming authentication", err)
	}
	var api *oai.Error
	if !errors.As(err, &api) || api.StatusCode != 401 {
		t.Errorf("errors.As(*openai.Error) = %v, want 401", api)
	}
}

// TestUnknownPendingRace: a result refused as "Unknown pending tool call"
// for a call just announced is sent again shortly, with the same key.
func TestUnknownPendingRace(t *testing.T) {
	defer openai.SetUnknownCallDelays([]time.Duration{time.Millisecond, time.Millisecond})()
	body := `{"error":{"message":"Unknown pending tool call: call_1","type":"invalid_request_error","code":"invalid_request_error","param":null}}`
	for _, refusals := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d refusals", refusals), func(t *testing.T) {
			var n atomic.Int32
			h := start(t, setup{
				script: oneTurn(twoSteps()...),
				server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
					if resultsPost(r) && n.Add(1) <= int32(refusals) {
						return &openaitest.Fault{Status: 400, Body: body}
					}
					return nil
				}},
			})
			res, err := h.runner.Run(t.Context(), "hi", nil)
			if refusals == 3 {
				if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "Unknown pending tool call") {
					t.Fatalf("err = %v, want the refusal after the retries", err)
				}
				return
			}
			if err != nil || res.Text != twoStepsAnswer {
				t.Fatalf("Run = %v, %v", res, err)
			}
			var keys []string
			for _, r := range h.srv.Requests() {
				if resultsPost(&r) {
					keys = append(keys, r.Header.Get("Idempotency-Key"))
				}
			}
			if len(keys) != 3 || keys[0] != keys[1] {
				t.Errorf("keys = %q, want the refused request resent with its key", keys)
			}
			h.checkOnce()
		})
	}
}

// TestResumeNewProcess: a results request fails (not applied) and the
// process gives up; a new process resumes the session with the same
// journal: the kept result is sent again with the same key, and no function
// runs twice.
func TestResumeNewProcess(t *testing.T) {
	journal := driver.NewMemory()
	h := start(t, setup{
		script:  oneTurn(twoSteps()...),
		server:  &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Status: 500, RetryAfter: time.Millisecond})},
		backend: openai.Options{RequestOptions: []option.RequestOption{option.WithMaxRetries(0)}, MaxReconnects: -1, Keep: true},
		runner:  core.Options{Journal: journal},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err == nil {
		t.Fatal("the first run succeeded; want it to fail on the 500")
	}
	h.backend.Close() // the process ends

	b2 := h.open(openai.Options{})
	r2 := core.NewRunner(b2, h.tools, &core.Options{Journal: journal, Logger: discard()})
	res, err := r2.Resume(t.Context(), first.Thread, nil)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Text != twoStepsAnswer {
		t.Errorf("answer = %q", res.Text)
	}
	h.checkOnce()
	var keys []string
	for _, r := range h.srv.Requests() {
		if resultsPost(&r) {
			keys = append(keys, r.Header.Get("Idempotency-Key"))
		}
	}
	if len(keys) != 3 || keys[0] != keys[1] {
		t.Errorf("results keys = %q, want the first result resent with its key", keys)
	}
}

// TestResumeAlreadyDelivered: a new process resumes from a stale read of
// the session that still lists a call whose result the journal shows as
// submitted. Sent again, the result is either answered from the service's
// idempotency store or refused as "Unknown pending tool call", which then
// means it was delivered; either way the run goes on from the session's
// real state.
func TestResumeAlreadyDelivered(t *testing.T) {
	for _, tt := range []struct {
		name     string
		forget   bool
		statuses []int
	}{
		{"answered from the idempotency store", false, []int{202, 500, 202, 202}},
		{"refused as not pending", true, []int{202, 500, 400, 202}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			journal := driver.NewMemory()
			var stale atomic.Bool
			var resultsPosts atomic.Int32
			h := start(t, setup{
				script: oneTurn(twoSteps()...),
				server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
					switch {
					case r.Method == "GET" && r.Path == "agents/sessions/sess_1" && stale.CompareAndSwap(true, false):
						return &openaitest.Fault{Status: 200, Body: `{"id":"sess_1","object":"agent.session","status":"requires_action",` +
							`"required_actions":[{"type":"function_call","turn_id":"turn_1","call_id":"call_1","name":"get_customer","arguments":{"customer_id":"123"}}]}`}
					case resultsPost(r) && resultsPosts.Add(1) == 2:
						// Process 1's second results request fails, not applied.
						return &openaitest.Fault{Status: 500, RetryAfter: time.Millisecond}
					}
					return nil
				}},
				backend: openai.Options{RequestOptions: []option.RequestOption{option.WithMaxRetries(0)}, MaxReconnects: -1, Keep: true},
				runner:  core.Options{Journal: journal},
			})
			first, err := h.runner.Run(t.Context(), "hi", nil)
			if err == nil {
				t.Fatal("the first run succeeded; want it to fail on the 500")
			}
			h.backend.Close()
			if tt.forget {
				h.srv.ForgetIdempotencyKeys()
			}

			stale.Store(true)
			b2 := h.open(openai.Options{})
			res, err := core.NewRunner(b2, h.tools, &core.Options{Journal: journal, Logger: discard()}).Resume(t.Context(), first.Thread, nil)
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q", res.Text)
			}
			if len(res.Calls) != 2 || !res.Calls[0].Resend || res.Calls[0].Call.ID != "call_1" {
				t.Errorf("resumed results = %+v, want call_1 resent, then call_2", res.Calls)
			}
			h.checkOnce()
			var statuses []int
			for _, r := range h.srv.Requests() {
				if resultsPost(&r) {
					statuses = append(statuses, r.Status)
				}
			}
			if diff := cmp.Diff(tt.statuses, statuses); diff != "" {
				t.Errorf("results requests statuses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResumeIdle: resuming a session whose turn is over gives its answer
// without running anything.
func TestResumeIdle(t *testing.T) {
	h := start(t, setup{script: oneTurn(twoSteps()...), backend: openai.Options{Keep: true}})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	b2 := h.open(openai.Options{})
	res, err := core.NewRunner(b2, h.tools, &core.Options{Logger: discard()}).Resume(t.Context(), first.Thread, nil)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Text != twoStepsAnswer || res.Turn != first.Turn || res.Steps != 0 {
		t.Errorf("Resume = %+v, want the first run's answer with no step", res)
	}
	h.checkOnce()
}

// TestResumeUnknown: resuming a session that does not exist is NotFound.
func TestResumeUnknown(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	_, err := h.runner.Resume(t.Context(), "sess_missing", nil)
	if errcode.Of(err) != errcode.NotFound {
		t.Errorf("err = %v, want NotFound", err)
	}
}

// TestUnsupportedAction: a required action that is not a function call
// ends the run with a clear error instead of waiting forever.
func TestUnsupportedAction(t *testing.T) {
	var approval atomic.Bool
	h := start(t, setup{
		script: oneTurn(text("hi")),
		server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			if r.Method == "GET" && r.Path == "agents/sessions/sess_1" && approval.Load() {
				return &openaitest.Fault{Status: 200, Body: `{"id":"sess_1","object":"agent.session","status":"requires_action",` +
					`"required_actions":[{"type":"computer_use_approval_request","request_id":"req_1","turn_id":"turn_2","request":{"type":"browser_authentication","credential_origin":"https://example.com","reason":"login","fields":[],"options":[]}}]}`}
			}
			return nil
		}},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	approval.Store(true)
	_, err = h.runner.Resume(t.Context(), first.Thread, nil)
	var ue *openai.UnsupportedActionError
	if !errors.As(err, &ue) || ue.Type != "computer_use_approval_request" || ue.Request != "browser_authentication" || errcode.Of(err) != errcode.Unimplemented {
		t.Fatalf("err = %v, want an Unimplemented *UnsupportedActionError for browser_authentication", err)
	}
	if !strings.Contains(err.Error(), "unsupported action") || !strings.Contains(err.Error(), "browser_authentication") {
		t.Errorf("err = %q, want it to say unsupported action and name the request", err)
	}
}

// TestOriginAccess: a session's computer-use request for a browser's access
// to an origin is a call of kind ServiceApproval named browser_origin_access;
// the decision goes back as agent.session.input.computer_use_approval_request_result
// (browser_origin_access, approve or deny), the model carries on with it,
// and an MCP approval request in the same step is answered on its own wire.
func TestOriginAccess(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approved bool
		want     []coretest.Delivered
	}{
		{"approve", true, []coretest.Delivered{{Name: "open_site", Output: "approved"}, {Name: "delete_repo", Failed: true, Error: "denied"}}},
		{"deny", false, []coretest.Delivered{{Name: "open_site", Failed: true, Error: "denied"}, {Name: "delete_repo", Failed: true, Error: "denied"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, setup{script: oneTurn(
				calls(coretest.Call{Name: "open_site", Approval: true, Origin: "https://shop.example"},
					coretest.Call{Name: "delete_repo", Arguments: json.RawMessage(`{"repo":"old"}`), Approval: true}),
				text(`{{result 0}} / {{result 1}}`))})
			res, err := h.runner.Run(t.Context(), "buy it", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 2 {
				t.Fatalf("Run = %v (%d pending), want a pause on both requests", err, len(res.Pending))
			}
			site := res.Pending[0]
			var args struct{ Origin, Reason string }
			if err := json.Unmarshal(site.Arguments, &args); err != nil || site.Tool != openai.OriginAccess || args.Origin != "https://shop.example" || args.Reason == "" {
				t.Fatalf("pending = %+v (%s), want the origin access request with its origin and reason", site, site.Arguments)
			}
			if err := h.runner.Decide(t.Context(), res.Thread, site.Key.Call, core.Decision{Approved: tc.approved, Reason: "policy", Actor: "ada"}); err != nil {
				t.Fatal(err)
			}
			if err := h.runner.Decide(t.Context(), res.Thread, res.Pending[1].Key.Call, core.Decision{Actor: "ada"}); err != nil {
				t.Fatal(err)
			}
			res, err = h.runner.Resume(t.Context(), res.Thread, nil)
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			got := h.results()
			for i := range got {
				got[i].CallID = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answers the service received (-want +got):\n%s", diff)
			}
			if want := map[bool]string{true: "approved", false: "denied"}[tc.approved]; !strings.HasPrefix(res.Text, want) {
				t.Errorf("answer = %q, want the model told %s", res.Text, want)
			}
		})
	}
}

// TestExistingAgent: with an agent id, Open reads the agent and reports the
// functions it declares without an implementation; calls to them get a
// failed result. An unknown agent fails Open with NotFound.
func TestExistingAgent(t *testing.T) {
	h := start(t, setup{script: oneTurn(calls(call("delete_account", `{"id":"1"}`)), text(`{{output "delete_account"}}`))})
	client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
	params := oai.BetaAgentNewParams{Model: "m", Tools: []oai.PersistedAgentToolParamUnion{
		oai.PersistedAgentToolParamOfParamFunction("Delete an account.", "delete_account", map[string]any{"type": "object"}),
		oai.PersistedAgentToolParamOfParamFunction("Look up a customer.", "get_customer", map[string]any{"type": "object"}),
	}}
	agent, err := client.Beta.Agents.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	b := h.open(openai.Options{Agent: agent.ID})
	if diff := cmp.Diff([]string{"delete_account"}, b.MissingTools()); diff != "" {
		t.Errorf("MissingTools (-want +got):\n%s", diff)
	}
	res, err := core.NewRunner(b, h.tools, &core.Options{Logger: discard()}).Run(t.Context(), "delete", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, `unknown tool "delete_account"`) {
		t.Errorf("answer = %q, want the model told the tool is unknown", res.Text)
	}
	if got := h.srv.Agents(); len(got) != 1 {
		t.Errorf("agents = %v, want only the existing one (none made from the toolbox)", got)
	}

	_, err = openai.Open(t.Context(), h.tools, &openai.Options{Agent: "agent_missing", BaseURL: h.srv.URL, APIKey: "k", Logger: discard()})
	if errcode.Of(err) != errcode.NotFound {
		t.Errorf("Open with an unknown agent: err = %v, want NotFound", err)
	}
}

// TestClose: Close deletes the sessions and the agent the backend created,
// unless Keep is set.
func TestClose(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			h := start(t, setup{script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("a")}}}}, backend: openai.Options{Keep: keep}})
			for range 2 {
				if _, err := h.runner.Run(t.Context(), "hi", nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.backend.Close(); err != nil {
				t.Fatal(err)
			}
			want := 0
			if keep {
				want = 2
			}
			if got := len(h.srv.Sessions()); got != want {
				t.Errorf("%d sessions left, want %d", got, want)
			}
			if got := len(h.srv.Agents()); got != want/2 {
				t.Errorf("%d agents left, want %d", got, want/2)
			}
			if _, err := h.runner.Run(t.Context(), "hi", nil); errcode.Of(err) != errcode.FailedPrecondition {
				t.Errorf("Run after Close: err = %v, want FailedPrecondition", err)
			}
		})
	}
}

// TestConcurrentResume (issue 30, item 5): several Resumes of one thread
// in one process at once (a user clicking twice, two handlers of one
// request) are taken one at a time: each ends with the answer, no
// function runs twice, and none hangs (under -race: no data race in the
// backend's handling of the session's stream).
func TestConcurrentResume(t *testing.T) {
	for attempt := range 3 {
		t.Run(fmt.Sprint(attempt), func(t *testing.T) {
			h := start(t, setup{
				script:  oneTurn(twoSteps()...),
				server:  &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Status: 500, RetryAfter: time.Millisecond})},
				backend: openai.Options{RequestOptions: []option.RequestOption{option.WithMaxRetries(0)}, MaxReconnects: -1, Keep: true},
				runner:  core.Options{Journal: driver.NewMemory()},
			})
			first, err := h.runner.Run(t.Context(), "hi", nil)
			if err == nil {
				t.Fatal("the first run succeeded; want it to fail on the 500")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			const n = 4
			errs := make(chan error, n)
			for range n {
				go func() {
					res, err := h.runner.Resume(ctx, first.Thread, nil)
					if err == nil && res.Text != twoStepsAnswer {
						err = fmt.Errorf("answer %q", res.Text)
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Errorf("Resume: %v", err)
				}
			}
			h.checkOnce()
		})
	}
}
