package respond

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
)

// TestReply checks that a reply decoded from a response's JSON holds what
// openai-go's Response decoded from the same JSON says: the same fields,
// the same output text, and so the same step and error.
func TestReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		want  reply
		calls []core.Call // the step's
		// text is the step's answer when it is not Response.OutputText
		// (which joins the text of every message, commentary too).
		text *string
	}{
		{
			name: "two function calls after reasoning",
			body: `{"id":"resp_1","object":"response","status":"completed","error":null,"incomplete_details":null,
				"output":[{"type":"reasoning","id":"rs_1","summary":[]},
					{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Roma\"}","status":"completed"},
					{"type":"function_call","id":"fc_2","call_id":"call_2","name":"get_time","arguments":"{}","status":"completed"}],
				"usage":{"input_tokens":12,"output_tokens":7,"total_tokens":19,"input_tokens_details":{"cached_tokens":0}},
				"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":true}]}`,
			want: reply{ID: "resp_1", Status: "completed", Usage: replyUsage{InputTokens: 12, OutputTokens: 7, TotalTokens: 19}, Output: []replyItem{
				{ID: "rs_1", Type: "reasoning"},
				{ID: "fc_1", Type: "function_call", CallID: "call_1", Name: "get_weather", Arguments: raw(`"{\"city\":\"Roma\"}"`)},
				{ID: "fc_2", Type: "function_call", CallID: "call_2", Name: "get_time", Arguments: raw(`"{}"`)},
			}},
			calls: []core.Call{
				{ID: "call_1", Name: "get_weather", Arguments: raw(`{"city":"Roma"}`)},
				{ID: "call_2", Name: "get_time", Arguments: raw(`{}`)},
			},
		},
		{
			name: "a tool search, whose arguments are an object, and a call whose arguments are not a string",
			body: `{"id":"resp_5","status":"completed","output":[
				{"type":"tool_search_call","id":"ts_1","call_id":"ts_1","arguments":{"query":"weather"},"status":"completed"},
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":{"city":"Roma"}}]}`,
			want: reply{ID: "resp_5", Status: "completed", Output: []replyItem{
				{ID: "ts_1", Type: "tool_search_call", CallID: "ts_1", Arguments: raw(`{"query":"weather"}`)},
				{ID: "fc_1", Type: "function_call", CallID: "call_1", Name: "get_weather", Arguments: raw(`{"city":"Roma"}`)},
			}},
			calls: []core.Call{{ID: "call_1", Name: "get_weather", Arguments: raw(`{"city":"Roma"}`)}},
		},
		{
			name: "an answer in two parts and a refusal",
			body: `{"id":"resp_2","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",
				"content":[{"type":"output_text","text":"Sole ","annotations":[]},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"a Roma","annotations":[]}]}]}`,
			want: reply{ID: "resp_2", Status: "completed", Output: []replyItem{{ID: "msg_1", Type: "message", Role: "assistant", Content: []replyContent{
				{Type: "output_text", Text: "Sole "}, {Type: "refusal"}, {Type: "output_text", Text: "a Roma"},
			}}}},
		},
		{
			name: "commentary, then the answer",
			body: `{"id":"resp_6","status":"completed","output":[
				{"type":"message","id":"msg_1","role":"assistant","phase":"commentary","status":"completed","content":[{"type":"output_text","text":"Let me see. ","annotations":[]}]},
				{"type":"message","id":"msg_2","role":"assistant","phase":"final_answer","status":"completed","content":[{"type":"output_text","text":"Sole a Roma","annotations":[]}]}]}`,
			want: reply{ID: "resp_6", Status: "completed", Output: []replyItem{
				{ID: "msg_1", Type: "message", Role: "assistant", Phase: "commentary", Content: []replyContent{{Type: "output_text", Text: "Let me see. "}}},
				{ID: "msg_2", Type: "message", Role: "assistant", Phase: "final_answer", Content: []replyContent{{Type: "output_text", Text: "Sole a Roma"}}},
			}},
			text: ptr("Sole a Roma"),
		},
		{
			name: "failed",
			body: `{"id":"resp_3","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`,
			want: reply{ID: "resp_3", Status: "failed", Error: replyError{Code: "server_error", Message: "boom"}, Output: []replyItem{}},
		},
		{
			name: "incomplete",
			body: `{"id":"resp_4","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`,
			want: reply{ID: "resp_4", Status: "incomplete", IncompleteDetails: replyIncomplete{Reason: "max_output_tokens"}, Output: []replyItem{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got reply
			if err := json.Unmarshal([]byte(tc.body), &got); err != nil {
				t.Fatal(err)
			}
			var r responses.Response
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.want, &got, cmpopts.IgnoreUnexported(reply{})); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&got, replyOf(&r), cmpopts.IgnoreUnexported(reply{})); diff != "" {
				t.Errorf("replyOf(Response) differs from the reply (-reply +replyOf):\n%s", diff)
			}
			if got, want := got.text(), r.OutputText(); tc.text == nil && got != want {
				t.Errorf("text() = %q, Response.OutputText() = %q", got, want)
			}
			if tc.text != nil && got.text() != *tc.text {
				t.Errorf("text() = %q, want %q (no commentary)", got.text(), *tc.text)
			}
			b := &Backend{mode: Chain}
			gs, gerr := b.step("", &got)
			ws, werr := b.step("", replyOf(&r))
			if gerr == nil {
				if diff := cmp.Diff(tc.calls, gs.Calls, cmpopts.IgnoreFields(core.Call{}, "Thread")); diff != "" {
					t.Errorf("the step's calls (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(ws, gs); diff != "" {
				t.Errorf("step (-from Response +from reply):\n%s", diff)
			}
			if diff := cmp.Diff(errText(werr), errText(gerr)); diff != "" {
				t.Errorf("step error (-from Response +from reply):\n%s", diff)
			}
		})
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func ptr[T any](v T) *T { return &v }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
