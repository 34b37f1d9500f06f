package openaitest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// do sends a raw request to the fake and returns the response.
func do(t *testing.T, srv *openaitest.Server, method, path, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-key")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// frames reads the SSE data frames of a stream until it ends.
func frames(t *testing.T, r io.Reader) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("frame %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

const agentBody = `{"model":"m","tools":[{"type":"function","name":"get_customer","description":"d","parameters":{"type":"object"}}]}`

func customerScript() *coretest.Script {
	return coretest.Simple("get_customer", `{"customer_id":"123"}`, `Found: {{output "get_customer"}}`)
}

// TestAuthentication: a request without the bearer key, or with another
// key, is answered 401.
func TestAuthentication(t *testing.T) {
	srv := openaitest.NewServer(customerScript(), &openaitest.Options{APIKey: "test-key"})
	defer srv.Close()
	for _, auth := range []string{"", "Bearer ", "Bearer other", "Basic test-key"} {
		res := do(t, srv, "POST", "agents", agentBody, map[string]string{"Authorization": auth})
		if res.StatusCode != 401 || !strings.Contains(readAll(t, res.Body), "invalid_api_key") {
			t.Errorf("Authorization %q: status %d, want 401 invalid_api_key", auth, res.StatusCode)
		}
	}
	if res := do(t, srv, "POST", "agents", agentBody, nil); res.StatusCode != 200 {
		t.Errorf("with the key: status %d, want 200", res.StatusCode)
	}
}

// TestStreamShape reads a creation stream raw and checks the SDK's hard
// requirements: unique event ids, no top-level error key, turn objects on
// turn lifecycle events, the call announced by turn.item.added before
// requires_action, and the session id on agent.session.created.
func TestStreamShape(t *testing.T) {
	srv := openaitest.NewServer(customerScript(), nil)
	defer srv.Close()
	var agent struct{ ID string }
	json.Unmarshal([]byte(readAll(t, do(t, srv, "POST", "agents", agentBody, nil).Body)), &agent)
	res := do(t, srv, "POST", "agents/sessions", `{"environment":{"type":"none"},"agent_id":"`+agent.ID+`","input":"hi","stream":true}`, nil)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	// The stream waits for the result: read until requires_action, answer,
	// then read to the end.
	sc := bufio.NewReader(res.Body)
	var evs []map[string]json.RawMessage
	for {
		line, err := sc.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before requires_action: %v", err)
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var m map[string]json.RawMessage
		json.Unmarshal([]byte(data), &m)
		evs = append(evs, m)
		if str(m["type"]) == "agent.session.requires_action" {
			break
		}
	}
	var sess struct {
		Session struct {
			ID              string
			RequiredActions []struct {
				TurnID string `json:"turn_id"`
				CallID string `json:"call_id"`
			} `json:"required_actions"`
		}
	}
	json.Unmarshal(mustMarshal(evs[len(evs)-1]), &sess)
	a := sess.Session.RequiredActions[0]
	post := `{"events":[{"type":"agent.session.input.tool_result","turn_id":"` + a.TurnID + `","call_id":"` + a.CallID + `","success":true,"output":"ok"}]}`
	if r := do(t, srv, "POST", "agents/sessions/"+sess.Session.ID+"/events", post, nil); r.StatusCode != 202 {
		t.Fatalf("tool result: status %d: %s", r.StatusCode, readAll(t, r.Body))
	}
	evs = append(evs, frames(t, sc)...)

	var types []string
	ids := map[string]bool{}
	for _, e := range evs {
		typ, id := str(e["type"]), str(e["event_id"])
		types = append(types, typ)
		if id == "" || ids[id] {
			t.Errorf("%s: event_id %q missing or repeated", typ, id)
		}
		ids[id] = true
		if _, ok := e["error"]; ok {
			t.Errorf("%s has a top-level error key", typ)
		}
		switch typ {
		case "agent.session.turn.created", "agent.session.turn.completed":
			var turn struct {
				ID         string
				SubagentID *string `json:"subagent_id"`
			}
			json.Unmarshal(e["turn"], &turn)
			if turn.ID == "" || turn.ID != str(e["turn_id"]) || turn.SubagentID != nil {
				t.Errorf("%s: turn %s, want the root turn object matching turn_id", typ, e["turn"])
			}
		}
	}
	want := []string{
		"agent.session.created", "agent.session.in_progress", "agent.session.turn.created",
		"agent.session.turn.item.added", "agent.session.turn.item.done", "agent.session.requires_action",
		"agent.session.in_progress", "agent.session.turn.item.added",
		"agent.session.turn.item.added", "agent.session.turn.content_part.added", "agent.session.turn.output_text.delta",
		"agent.session.turn.output_text.done", "agent.session.turn.content_part.done", "agent.session.turn.item.done",
		"agent.session.turn.completed", "agent.session.idle",
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(evs[0]["session"]), sess.Session.ID) {
		t.Errorf("agent.session.created carries %s, want the session id", evs[0]["session"])
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// session creates a session whose first step waits for get_customer, and
// returns its id and the pending call's turn and call ids.
func session(t *testing.T, c oai.Client) (id, turn, call string) {
	t.Helper()
	agent, err := c.Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m", Tools: []oai.PersistedAgentToolParamUnion{customerTool()}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Agents.Sessions.New(t.Context(), oai.BetaAgentSessionNewParams{
		Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
		AgentID:     oai.String(agent.ID),
		Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "requires_action" || len(s.RequiredActions) != 1 {
		t.Fatalf("session = %s, want one required action", s.RawJSON())
	}
	a := s.RequiredActions[0]
	return s.ID, a.TurnID, a.CallID
}

func toolResult(turn, call string) oai.BetaAgentSessionEventNewParams {
	r := oai.AgentSessionInputParamOfParamAgentSessionInputToolResult(call, true, turn)
	r.OfParamAgentSessionInputToolResult.Output = oai.AgentFunctionCallOutputParamUnion{OfString: oai.String("ok")}
	return oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{r}}
}

// TestUnknownPendingToolCall: a result for a call that is not pending is
// refused with the service's exact 400.
func TestUnknownPendingToolCall(t *testing.T) {
	srv, c := newServer(t, customerScript(), nil)
	id, turn, call := session(t, c)
	if err := c.Beta.Agents.Sessions.Events.New(t.Context(), id, toolResult(turn, call)); err != nil {
		t.Fatal(err)
	}
	res := do(t, srv, "POST", "agents/sessions/"+id+"/events", string(mustMarshal(toolResult(turn, call))), nil)
	want := `{"error":{"message":"Unknown pending tool call: ` + call + `","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`
	if got := readAll(t, res.Body); res.StatusCode != 400 || got != want {
		t.Errorf("second result: %d %s, want 400 %s", res.StatusCode, got, want)
	}
	err := c.Beta.Agents.Sessions.Events.New(t.Context(), id, toolResult(turn, call))
	var api *oai.Error
	if !errors.As(err, &api) || api.Code != "invalid_request_error" || api.Message != "Unknown pending tool call: "+call {
		t.Errorf("SDK error = %v, want the unknown-pending refusal", err)
	}
}

// TestToolResultRefused: a request of tool results that does not answer
// exactly the pending calls, each once, with the fields the service
// requires, is refused whole with the service's 400, and nothing of it is
// applied: the call is still pending, and its right result is then taken.
func TestToolResultRefused(t *testing.T) {
	result := func(turn, call string, success any) string {
		m := map[string]any{"type": "agent.session.input.tool_result", "turn_id": turn, "call_id": call, "success": success, "output": "ok"}
		if success == nil {
			delete(m, "success")
		}
		if turn == "" {
			delete(m, "turn_id")
		}
		return string(mustMarshal(m))
	}
	unknown := func(call string) string {
		return `{"error":{"message":"Unknown pending tool call: ` + call + `","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`
	}
	const missing = `{"error":{"message":"Missing required parameters: 'turn_id', 'call_id' and 'success' are required for a tool result.","type":"invalid_request_error","param":null,"code":"missing_required_parameter"}}`
	for _, tc := range []struct {
		name   string
		events func(turn, call string) []string
		want   func(call string) string
	}{
		{"another turn's id", func(turn, call string) []string { return []string{result("turn_other", call, true)} }, unknown},
		{"the same call twice", func(turn, call string) []string { return []string{result(turn, call, true), result(turn, call, false)} }, unknown},
		{"an unknown call beside the pending one", func(turn, call string) []string {
			return []string{result(turn, call, true), result(turn, "call_made_up", true)}
		}, func(string) string { return unknown("call_made_up") }},
		{"no success", func(turn, call string) []string { return []string{result(turn, call, nil)} }, func(string) string { return missing }},
		{"no turn id", func(turn, call string) []string { return []string{result("", call, true)} }, func(string) string { return missing }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := newServer(t, customerScript(), nil)
			id, turn, call := session(t, c)
			body := `{"events":[` + strings.Join(tc.events(turn, call), ",") + `]}`
			res := do(t, srv, "POST", "agents/sessions/"+id+"/events", body, nil)
			if got, want := readAll(t, res.Body), tc.want(call); res.StatusCode != 400 || got != want {
				t.Errorf("%s: %d %s, want 400 %s", body, res.StatusCode, got, want)
			}
			s, err := c.Beta.Agents.Sessions.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != "requires_action" || len(s.RequiredActions) != 1 || s.RequiredActions[0].CallID != call {
				t.Errorf("after the refusal, session = %s; want the call still pending", s.RawJSON())
			}
			if err := c.Beta.Agents.Sessions.Events.New(t.Context(), id, toolResult(turn, call)); err != nil {
				t.Errorf("the right result after the refusal: %v", err)
			}
		})
	}
}

// TestIdempotency: a request sent again with the same Idempotency-Key and
// body is answered from the first response and applied once; the same key
// with another body is refused.
func TestIdempotency(t *testing.T) {
	srv, c := newServer(t, customerScript(), nil)
	id, turn, call := session(t, c)
	body := string(mustMarshal(toolResult(turn, call)))
	key := map[string]string{"Idempotency-Key": "k1"}
	for i := range 2 {
		if res := do(t, srv, "POST", "agents/sessions/"+id+"/events", body, key); res.StatusCode != 202 {
			t.Fatalf("attempt %d: status %d", i, res.StatusCode)
		}
	}
	var results int
	for _, r := range srv.Received() {
		if r.Kind == "results" {
			results++
		}
	}
	if results != 1 {
		t.Errorf("results applied %d times, want 1", results)
	}
	if res := do(t, srv, "POST", "agents/sessions/"+id+"/events", `{"events":[{"type":"agent.session.input.cancel"}]}`, key); res.StatusCode != 400 {
		t.Errorf("same key, other body: status %d, want 400", res.StatusCode)
	}
}

// TestRefuseAfterAccepted: with Fault.Refuse, a request of tool results is
// answered 202 but not applied: the call stays pending, the session says
// so (an agent.session.requires_action listing it again, or an error event
// naming it), the same request sent again is answered from the idempotency
// store and still not applied, and the result sent anew (another key,
// no fault) is taken.
func TestRefuseAfterAccepted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse openaitest.Refusal
		want   string // the event that says so
	}{
		{"relist", openaitest.Relist, "agent.session.requires_action"},
		{"error event", openaitest.ErrorEvent, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refuse atomic.Bool
			refuse.Store(true)
			srv, c := newServer(t, customerScript(), &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
				if refuse.Load() && r.Method == "POST" && strings.HasSuffix(r.Path, "/events") {
					return &openaitest.Fault{Refuse: tc.refuse}
				}
				return nil
			}})
			id, turn, call := session(t, c)
			before := len(srv.Events(id))
			body := string(mustMarshal(toolResult(turn, call)))
			for i := range 2 {
				if res := do(t, srv, "POST", "agents/sessions/"+id+"/events", body, map[string]string{"Idempotency-Key": "k1"}); res.StatusCode != 202 {
					t.Fatalf("attempt %d: status %d, want 202", i, res.StatusCode)
				}
			}
			if got := srv.Events(id)[before:]; len(got) != 1 || got[0] != tc.want {
				t.Errorf("events after the refused results: %v, want one %s (the resend answered from the store)", got, tc.want)
			}
			s, err := c.Beta.Agents.Sessions.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != "requires_action" || len(s.RequiredActions) != 1 || s.RequiredActions[0].CallID != call {
				t.Errorf("after the refusal, session = %s; want the call still pending", s.RawJSON())
			}
			for _, r := range srv.Received() {
				if r.Kind == "results" {
					t.Errorf("received %+v: want no result applied", r)
				}
			}
			refuse.Store(false)
			if err := c.Beta.Agents.Sessions.Events.New(t.Context(), id, toolResult(turn, call)); err != nil {
				t.Errorf("the result sent anew: %v", err)
			}
			if s, err := c.Beta.Agents.Sessions.Get(t.Context(), id); err != nil || s.Status != "idle" {
				t.Errorf("after the result sent anew, session = %v, %v; want idle", s, err)
			}
		})
	}
}

// TestDeferredTools: a deferred function needs a tool_search tool, and the
// model may call it only after a search loaded it.
func TestDeferredTools(t *testing.T) {
	deferred := `{"type":"function","name":"lookup_order","description":"Find an order.","parameters":{"type":"object"},"defer_loading":true}`
	t.Run("without tool_search", func(t *testing.T) {
		srv, _ := newServer(t, customerScript(), nil)
		res := do(t, srv, "POST", "agents", `{"model":"m","tools":[`+deferred+`]}`, nil)
		if res.StatusCode != 400 || !strings.Contains(readAll(t, res.Body), "tool_search") {
			t.Errorf("status %d, want 400 naming tool_search", res.StatusCode)
		}
	})
	for _, search := range []string{"", "order"} {
		t.Run("search="+search, func(t *testing.T) {
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Search: search, Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{}`)}}},
				{Text: "done"},
			}}}}
			srv, _ := newServer(t, script, nil)
			var agent struct{ ID string }
			json.Unmarshal([]byte(readAll(t, do(t, srv, "POST", "agents", `{"model":"m","tools":[{"type":"tool_search"},`+deferred+`]}`, nil).Body)), &agent)
			res := do(t, srv, "POST", "agents/sessions", `{"environment":{"type":"none"},"agent_id":"`+agent.ID+`","input":"hi"}`, nil)
			var sess struct{ Status string }
			json.Unmarshal([]byte(readAll(t, res.Body)), &sess)
			want := "requires_action"
			if search == "" {
				want = "idle" // the turn failed
			}
			if sess.Status != want {
				t.Errorf("session status %q, want %q", sess.Status, want)
			}
		})
	}
}

// TestFaults checks the injected faults: a status with Retry-After-Ms,
// a stream closed after N events, duplicated events, a delay.
func TestFaults(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		srv, _ := newServer(t, customerScript(), &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			if r.N == 1 {
				return &openaitest.Fault{Status: 429, RetryAfter: 5 * time.Millisecond}
			}
			return nil
		}})
		res := do(t, srv, "POST", "agents", agentBody, nil)
		if res.StatusCode != 429 || res.Header.Get("Retry-After-Ms") != "5" {
			t.Errorf("status %d Retry-After-Ms %q, want 429 and 5", res.StatusCode, res.Header.Get("Retry-After-Ms"))
		}
		if res := do(t, srv, "POST", "agents", agentBody, nil); res.StatusCode != 200 {
			t.Errorf("second request: status %d, want 200", res.StatusCode)
		}
		if got := srv.Requests(); len(got) != 2 || got[0].Status != 429 || got[1].Status != 200 {
			t.Errorf("recorded %d requests (%v), want 429 then 200", len(got), got)
		}
	})
	for _, tt := range []struct {
		name string
		opts openaitest.Options
		want int
	}{
		{"close after 3", openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			if r.Stream {
				return &openaitest.Fault{CloseAfter: 3}
			}
			return nil
		}}, 3},
		{"no fault", openaitest.Options{}, 11},
		{"duplicates", openaitest.Options{DuplicateEvents: true}, 22},
		{"cut text", openaitest.Options{DeltaSize: 2, Fault: func(r *openaitest.Request) *openaitest.Fault {
			return &openaitest.Fault{CutText: 2}
		}}, 7}, // created, in_progress, turn created, item added, part added, 2 deltas
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newServer(t, coretest.Answer("Hello."), &tt.opts)
			res := do(t, srv, "POST", "agents/sessions", `{"environment":{"type":"none"},"agent":{"model":"m"},"input":"hi","stream":true}`, nil)
			// A creation stream ends after its turn's final idle.
			if got := frames(t, res.Body); len(got) != tt.want {
				t.Errorf("%d frames, want %d", len(got), tt.want)
			}
		})
	}
	t.Run("delay", func(t *testing.T) {
		arrived := make(chan struct{})
		_, c := newServer(t, customerScript(), &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			close(arrived)
			return &openaitest.Fault{Delay: time.Hour}
		}})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-arrived
			cancel()
		}()
		_, err := c.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "m"}, option.WithMaxRetries(0))
		if err == nil {
			t.Error("a delayed request completed")
		}
	})
}

// TestBasePath: paths are served with and without the /v1 prefix.
func TestBasePath(t *testing.T) {
	srv, _ := newServer(t, customerScript(), nil)
	base := strings.TrimSuffix(srv.URL, "/v1")
	for _, u := range []string{srv.URL, base} {
		c := oai.NewClient(option.WithBaseURL(u), option.WithAPIKey("k"))
		if _, err := c.Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m"}); err != nil {
			t.Errorf("base %s: %v", u, err)
		}
	}
}
