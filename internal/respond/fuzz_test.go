package respond

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
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

// FuzzResponseStream reads any bytes as a response's event stream, as the
// streaming transport does. It checks that nothing panics, that the
// sequence numbers it keeps only grow, and that every piece of text handed
// over is a delta event's.
func FuzzResponseStream(f *testing.F) {
	for _, seed := range []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\"}}\n\n" +
			"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"delta\":\"h\\u00e9\"}\n\n" +
			"data: {\"type\":\"response.output_item.done\",\"sequence_number\":2,\"item\":{\"type\":\"message\",\"id\":\"m\",\"content\":[{\"type\":\"output_text\",\"text\":\"h\\u00e9\"}]}}\n\n" +
			"data: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[]}}\n\n",
		"data: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":5,\"item_id\":\"r\",\"delta\":\"hm\"}\n\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":4,\"delta\":\"old\"}\n\n",
		"data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n",
		"data: {\"type\":\"response.in_progress\",\"error\":null}\n\n", "data: [DONE]\n\n", "data: {\n\n", "data: {\"type\":1}\n\n",
		": keep-alive\n\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
		var pieces int
		rs := &responseStream{b: New(Config{Name: "fuzz"}), seq: -1, obs: func(d driver.Delta) error {
			if d.Kind == driver.TextDelta || d.Kind == driver.ReasoningDelta {
				pieces++
				if !bytes.Contains(body, []byte("delta")) {
					t.Fatalf("a piece %q from a stream with no delta event", d.Text)
				}
			}
			return nil
		}}
		last := rs.seq
		dec := ssestream.NewDecoder(res)
		_ = rs.readStream(dec)
		if rs.seq < last {
			t.Fatalf("the sequence number went back: %d after %d", rs.seq, last)
		}
		if pieces > len(body) {
			t.Fatalf("%d pieces from %d bytes", pieces, len(body))
		}
	})
}
