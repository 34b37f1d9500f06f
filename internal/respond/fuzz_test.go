package respond

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
)

// FuzzReply decodes any bytes as a response, both ways the backend does
// (encoding/json into a reply, for a response read whole; openai-go's
// Response then replyOf, for a streamed one), and turns each into a step.
// It checks that nothing panics, that a response that did not complete
// gives an error rather than a step, and that each call carries the
// arguments its item's string held.
func FuzzReply(f *testing.F) {
	for _, seed := range []string{
		`{"id":"resp_1","status":"completed","output":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}]}`,
		`{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}`,
		`{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"}}`,
		`{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`,
		`{"output":[{"type":"function_call","arguments":null}]}`, `{"output":[{"type":"function_call","arguments":{"a":1}}]}`,
		`{"output":null}`, `{"status":1}`, `null`, `[]`, `{"output":[null]}`,
	} {
		f.Add([]byte(seed))
	}
	b := &Backend{name: "foundry", mode: Conversation}
	f.Fuzz(func(t *testing.T, body []byte) {
		var reps []*reply
		if rep := new(reply); json.Unmarshal(body, rep) == nil {
			reps = append(reps, rep)
		}
		var r responses.Response
		if r.UnmarshalJSON(body) == nil {
			reps = append(reps, replyOf(&r))
		}
		for _, rep := range reps {
			step, err := b.step("conv_1", rep)
			if done := rep.Status == "completed" || rep.Status == ""; done != (err == nil) {
				t.Fatalf("status %q gave error %v", rep.Status, err)
			}
			if err != nil {
				continue
			}
			var calls []replyItem
			for _, it := range rep.Output {
				if it.Type == "function_call" {
					calls = append(calls, it)
				}
			}
			if len(step.Calls) != len(calls) {
				t.Fatalf("%d calls from %d function_call items", len(step.Calls), len(calls))
			}
			for i, c := range step.Calls {
				var s string
				if json.Unmarshal(calls[i].Arguments, &s) == nil && string(c.Arguments) != s {
					t.Fatalf("call %d: arguments %q, want the string's %q", i, c.Arguments, s)
				}
			}
		}
	})
}
