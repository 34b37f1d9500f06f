package foundrytest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// do sends a raw request to the fake and returns the status and the
// decoded error, if any.
func do(t *testing.T, srv *foundrytest.Server, method, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.ProjectEndpoint()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test-token")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return res.StatusCode, m
}

// pendingCall starts a conversation whose model waits for one call and
// returns the conversation id and the call id.
func pendingCall(t *testing.T, srv *foundrytest.Server) (string, string) {
	t.Helper()
	status, conv := do(t, srv, "POST", "/openai/v1/conversations", `{"items":[{"type":"message","role":"user","content":"hi"}]}`, nil)
	if status != 200 {
		t.Fatalf("create conversation: %d %v", status, conv)
	}
	id := conv["id"].(string)
	status, resp := do(t, srv, "POST", "/openai/v1/responses", `{"agent_reference":{"type":"agent_reference","name":"my-agent"},"conversation":"`+id+`","input":[]}`, nil)
	if status != 200 {
		t.Fatalf("create response: %d %v", status, resp)
	}
	out := resp["output"].([]any)
	return id, out[0].(map[string]any)["call_id"].(string)
}

// TestRefusals checks that the fake refuses what the service refuses,
// with the service's status, code and words.
func TestRefusals(t *testing.T) {
	const ref = `"agent_reference":{"type":"agent_reference","name":"my-agent"}`
	for _, tc := range []struct {
		name   string
		plain  bool
		method string
		path   string
		body   string // %CONV% and %CALL% are replaced by a conversation waiting for call %CALL%
		header map[string]string
		status int
		code   string
		msg    string
		param  string
	}{
		{name: "no token", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"input":"hi"}`,
			header: map[string]string{"Authorization": ""}, status: 401, code: "PermissionDenied", msg: "Access token is missing"},
		{name: "empty bearer", method: "GET", path: "/agents/my-agent?api-version=v1",
			header: map[string]string{"Authorization": "Bearer "}, status: 401, code: "PermissionDenied"},
		{name: "agent key", method: "POST", path: "/openai/v1/responses", body: `{"agent":{"type":"agent_reference","name":"my-agent"},"input":"hi"}`,
			status: 400, code: "invalid_payload", msg: "The 'agent' property is deprecated. Use 'agent_reference' instead.", param: "agent"},
		{name: "tools with agent", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"input":"hi","tools":[]}`,
			status: 400, code: "invalid_payload", msg: "Not allowed when agent is specified.", param: "tools"},
		{name: "tool_choice with agent", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"input":"hi","tool_choice":"auto"}`,
			status: 400, code: "invalid_payload", msg: "Not allowed when agent is specified.", param: "tool_choice"},
		{name: "parallel_tool_calls with agent", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"input":"hi","parallel_tool_calls":true}`,
			status: 400, code: "invalid_payload", msg: "Not allowed when agent is specified.", param: "parallel_tool_calls"},
		{name: "text with agent", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"input":"hi","text":{"format":{"type":"text"}}}`,
			status: 400, code: "invalid_payload", msg: "Not allowed when agent is specified.", param: "text"},
		{name: "output for unknown call", method: "POST", path: "/openai/v1/responses",
			body:   `{` + ref + `,"conversation":"%CONV%","input":[{"type":"function_call_output","call_id":"call_nope","output":"x"}]}`,
			status: 400, msg: "No tool call found for function call output with call_id call_nope.", param: "input"},
		{name: "pending call unanswered", method: "POST", path: "/openai/v1/responses",
			body:   `{` + ref + `,"conversation":"%CONV%","input":[{"type":"message","role":"user","content":"hello again"}]}`,
			status: 400, msg: "No tool output found for function call %CALL%.", param: "input"},
		{name: "pending call unanswered, empty input", method: "POST", path: "/openai/v1/responses",
			body:   `{` + ref + `,"conversation":"%CONV%","input":[]}`,
			status: 400, msg: "No tool output found for function call %CALL%."},
		{name: "unknown agent", method: "POST", path: "/openai/v1/responses", body: `{"agent_reference":{"type":"agent_reference","name":"nobody"},"input":"hi"}`,
			status: 404, code: "not_found"},
		{name: "unknown agent version", method: "POST", path: "/openai/v1/responses", body: `{"agent_reference":{"type":"agent_reference","name":"my-agent","version":"9"},"input":"hi"}`,
			status: 404, code: "not_found"},
		{name: "get unknown agent", method: "GET", path: "/agents/nobody?api-version=v1", status: 404, code: "not_found"},
		{name: "conversation and previous_response_id", method: "POST", path: "/openai/v1/responses",
			body:   `{` + ref + `,"conversation":"%CONV%","previous_response_id":"resp_1","input":"hi"}`,
			status: 400, msg: "Mutually exclusive parameters", param: "conversation"},
		{name: "server-side item as input", method: "POST", path: "/openai/v1/responses",
			body:   `{` + ref + `,"input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`,
			status: 400, code: "invalid_payload", msg: "The provided data does not match the expected schema"},
		{name: "no agent outside plain mode", method: "POST", path: "/openai/v1/responses", body: `{"model":"gpt-4.1-mini","input":"hi"}`,
			status: 400, code: "invalid_payload", param: "agent_reference"},
		{name: "plain mode needs a model", plain: true, method: "POST", path: "/openai/v1/responses", body: `{"input":"hi"}`,
			status: 400, msg: "Missing required parameter: 'model'.", param: "model"},
		{name: "agents route without api-version", method: "GET", path: "/agents/my-agent", status: 400, param: "api-version"},
		{name: "agents route with another api-version", method: "GET", path: "/agents/my-agent?api-version=2025-11-15-preview", status: 400, param: "api-version"},
		{name: "openai route with api-version", method: "POST", path: "/openai/v1/responses?api-version=v1", body: `{` + ref + `,"input":"hi"}`, status: 400, param: "api-version"},
		{name: "agent name too long", method: "POST", path: "/agents/" + strings.Repeat("a", 64) + "/versions?api-version=v1",
			body: `{"definition":{"kind":"prompt","model":"m"}}`, status: 400, param: "agent_name"},
		{name: "unknown conversation", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"conversation":"conv_nope","input":"hi"}`, status: 404, code: "not_found"},
		{name: "unknown previous response", method: "POST", path: "/openai/v1/responses", body: `{` + ref + `,"previous_response_id":"resp_nope","input":"hi"}`, status: 404, param: "previous_response_id"},
		{name: "unknown route", method: "GET", path: "/openai/v1/nothing", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newServer(t, horoscope(), &foundrytest.Options{Plain: tc.plain})
			conv, call := pendingCall(t, srv)
			r := strings.NewReplacer("%CONV%", conv, "%CALL%", call)
			status, body := do(t, srv, tc.method, tc.path, r.Replace(tc.body), tc.header)
			if status != tc.status {
				t.Fatalf("status = %d (%v), want %d", status, body, tc.status)
			}
			e, _ := body["error"].(map[string]any)
			if e == nil {
				t.Fatalf("body = %v, want an error envelope", body)
			}
			if tc.code != "" && e["code"] != tc.code {
				t.Errorf("code = %v, want %q", e["code"], tc.code)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, r.Replace(tc.msg)) {
				t.Errorf("message = %q, want it to contain %q", msg, r.Replace(tc.msg))
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Errorf("param = %v, want %q", e["param"], tc.param)
			}
			reqs := srv.Requests()
			if last := reqs[len(reqs)-1]; last.Status != tc.status {
				t.Errorf("Requests() recorded status %d, want %d", last.Status, tc.status)
			}
			// A refused request is not received: only the first turn's input is.
			if got := len(srv.Received()); got != 1 {
				t.Errorf("Received() has %d entries, want 1 (refused requests are not received)", got)
			}
		})
	}
}

// TestFaults checks the injected faults as an unmodified openai-go client
// sees them: retried 429 and 5xx answers, a failed response, an error
// event, and a dropped answer that the client retries.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("429 and 503 are retried", func(t *testing.T) {
		srv, client := newServer(t, horoscope(), nil)
		srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Status: 429}, foundrytest.Fault{Status: 503})
		r, err := client.Responses.New(ctx, hi, agentRef(), option.WithMaxRetries(2), option.WithMaxRetryDelay(time.Millisecond))
		if err != nil {
			t.Fatalf("Responses.New: %v", err)
		}
		if len(functionCalls(r)) != 1 {
			t.Errorf("output = %s", r.RawJSON())
		}
		var statuses []int
		for _, q := range srv.Requests() {
			statuses = append(statuses, q.Status)
			if q.Status == 429 && q.Header.Get("X-Stainless-Retry-Count") != "0" {
				t.Errorf("first attempt retry count = %q", q.Header.Get("X-Stainless-Retry-Count"))
			}
		}
		if diff := cmp.Diff([]int{429, 503, 200}, statuses); diff != "" {
			t.Errorf("statuses mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("429 headers", func(t *testing.T) {
		srv, client := newServer(t, horoscope(), nil)
		srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Status: 429, RetryAfter: 2500e6})
		_, err := client.Responses.New(ctx, hi, agentRef())
		e := apiError(t, err)
		if e.StatusCode != 429 || e.Code != "rate_limit_exceeded" {
			t.Errorf("error = %d %q", e.StatusCode, e.Code)
		}
		if got := e.Response.Header.Get("retry-after-ms"); got != "2500" {
			t.Errorf("retry-after-ms = %q, want 2500", got)
		}
		if got := e.Response.Header.Get("retry-after"); got != "3" {
			t.Errorf("retry-after = %q, want 3", got)
		}
	})
	t.Run("failed response", func(t *testing.T) {
		srv, client := newServer(t, horoscope(), nil)
		srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Failed: true, Code: "server_error", Message: "boom"})
		r, err := client.Responses.New(ctx, hi, agentRef())
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "failed" || r.Error.Code != "server_error" || r.Error.Message != "boom" {
			t.Errorf("response = %s", r.RawJSON())
		}
		if len(srv.Received()) != 0 {
			t.Errorf("a failed fault took the input: %v", srv.Received())
		}
	})
	t.Run("response.failed and error events", func(t *testing.T) {
		srv, client := newServer(t, horoscope(), nil)
		srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Failed: true, Code: "server_error", Message: "boom"}, foundrytest.Fault{ErrorEvent: true, Code: "server_error", Message: "(PermissionDenied) no"})
		var types []string
		for range 2 {
			stream := client.Responses.NewStreaming(ctx, hi, agentRef())
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if ev.Type == "error" && (ev.Code != "server_error" || ev.Message != "(PermissionDenied) no") {
					t.Errorf("error event = %s", ev.RawJSON())
				}
				if ev.Type == "response.failed" && ev.Response.Error.Message != "boom" {
					t.Errorf("response.failed = %s", ev.RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
		}
		want := []string{"response.created", "response.in_progress", "response.failed", "response.created", "error"}
		if diff := cmp.Diff(want, types); diff != "" {
			t.Errorf("events mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("dropped answer", func(t *testing.T) {
		srv, client := newServer(t, horoscope(), nil)
		srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Drop: true})
		_, err := client.Responses.New(ctx, hi, agentRef())
		if err == nil {
			t.Fatal("Responses.New succeeded; want a connection error")
		}
		reqs := srv.Requests()
		if len(reqs) != 1 || reqs[0].Status != 0 {
			t.Fatalf("requests = %+v, want one dropped", reqs)
		}
		// The service acted on it: the chain's first response exists and
		// the input was received.
		if got := len(srv.Received()); got != 1 {
			t.Errorf("Received() = %v, want the input", srv.Received())
		}
	})
}

// hi is a chain's first request.
var hi = responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

// TestOutputForApprovalRequest: an MCP approval request is answered by an
// mcp_approval_response only. A function_call_output bearing its id is
// refused as the service refuses an output for a call it does not know
// (400, param input), in a conversation (added as an item, or as a
// response's input), in a chain of responses and in a resent history;
// the request still waits, and its denial is then taken.
func TestOutputForApprovalRequest(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "ask_question", Arguments: json.RawMessage(`{"repo":"toolrelay"}`), Approval: true}}},
		{Text: "Asked: {{result 0}}"},
	}}}}
	for _, mode := range []string{"conversation items", "conversation", "chain", "resend"} {
		t.Run(mode, func(t *testing.T) {
			_, client := newServer(t, script, &foundrytest.Options{Plain: true})
			history := []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("Ask the wiki.", responses.EasyInputMessageRoleUser)}
			p := responses.ResponseNewParams{Model: "gpt-4.1-mini", Tools: []responses.ToolUnionParam{mcpTool("deepwiki")}, Input: inputItems(history...)}
			var conv string
			switch mode {
			case "conversation", "conversation items":
				c, err := client.Conversations.New(t.Context(), conversations.ConversationNewParams{})
				if err != nil {
					t.Fatal(err)
				}
				conv = c.ID
				p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv)}
			case "resend":
				p.Store = openai.Bool(false)
			}
			first, err := client.Responses.New(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.Output) != 1 || first.Output[0].Type != "mcp_approval_request" {
				t.Fatalf("first output %s, want one mcp_approval_request", first.JSON.Output.Raw())
			}
			id := first.Output[0].ID
			wrong := responses.ResponseInputItemParamOfFunctionCallOutput("stopped")
			wrong.OfFunctionCallOutput.CallID = openai.String(id)
			deny := responses.ResponseInputItemParamOfMcpApprovalResponse(id, false)
			send := func(answer responses.ResponseInputItemUnionParam) error {
				if mode == "conversation items" {
					_, err := client.Conversations.Items.New(t.Context(), conv, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{answer}})
					return err
				}
				q := p
				switch mode {
				case "chain":
					q.PreviousResponseID = openai.String(first.ID)
					q.Input = inputItems(answer)
				case "conversation":
					q.Input = inputItems(answer)
				case "resend":
					q.Input = inputItems(append(append(slices.Clone(history), resend(t, first)...), answer)...)
				}
				_, err := client.Responses.New(t.Context(), q)
				return err
			}
			err = send(wrong)
			var oe *openai.Error
			if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "input" || !strings.Contains(oe.Message, "No tool call found for function call output with call_id "+id+".") {
				t.Fatalf("a function_call_output for approval request %s = %v, want the service's 400 for an unknown call (param input)", id, err)
			}
			if err := send(deny); err != nil {
				t.Fatalf("the denial after the refused output: %v", err)
			}
		})
	}
}
