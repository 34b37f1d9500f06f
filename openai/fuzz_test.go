package openai

import (
	"github.com/toolrelay/toolrelay/core/driver"

	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// FuzzEventStream reads any bytes as a session's event stream, as the
// backend reads one, and hands every event to the backend's handler. It
// checks that nothing panics, that the stream ends (cleanly or with an
// error) and that a step the handler gives has calls or an answer.
func FuzzEventStream(f *testing.F) {
	for _, seed := range []string{
		"data: {\"type\":\"agent.session.created\",\"session\":{\"id\":\"sess_1\"}}\n\n",
		"data: {\"type\":\"agent.session.turn.created\",\"turn_id\":\"turn_1\",\"turn\":{\"id\":\"turn_1\"}}\n\n" +
			"data: {\"type\":\"agent.session.requires_action\",\"session\":{\"id\":\"sess_1\",\"required_actions\":[{\"type\":\"function_call\",\"turn_id\":\"turn_1\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"}]}}\n\n",
		"data: {\"type\":\"agent.session.turn.completed\",\"turn_id\":\"turn_1\",\"turn\":{\"id\":\"turn_1\"}}\n\n",
		"data: {\"type\":\"agent.session.turn.failed\",\"turn_id\":\"t\",\"turn\":{\"id\":\"t\",\"error\":{\"code\":\"server_error\"}}}\n\n",
		"data: {\"type\":1}\n\n", "data: {\"type\":null,\"error\":null}\n\n", "data: [DONE]\n\n", "data: {\n\n",
		": keep-alive\n\nevent: x\ndata: {\"type\":\"agent.session.idle\"}\r\n\r\n",
		"data: {\"type\":\"agent.session.turn.item.done\",\"item\":{\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi\"}]}}\n\n",
		"data: {\"type\":\"agent.session.turn.created\",\"turn_id\":\"t\",\"turn\":{\"id\":\"t\"}}\n\n" +
			"data: {\"type\":\"agent.session.turn.item.added\",\"turn_id\":\"t\",\"item\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"turn_id\":\"t\"}}\n\n" +
			"data: {\"type\":\"agent.session.turn.output_text.delta\",\"turn_id\":\"t\",\"item_id\":\"m\",\"delta\":\"h\\u00e9\"}\n\n" +
			"data: {\"type\":\"agent.session.turn.reasoning_summary_text.delta\",\"turn_id\":\"t\",\"item_id\":\"r\",\"delta\":\"hm\"}\n\n",
	} {
		f.Add([]byte(seed))
	}
	b, err := Open(context.Background(), nil, &Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	f.Fuzz(func(t *testing.T, body []byte) {
		res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(string(body)))}
		es := &eventStream{dec: ssestream.NewDecoder(res), cancel: func() {}}
		st := newThread(b, "sess_fuzz")
		st.obs = func(d driver.Delta) error {
			if d.Kind == driver.TextDelta && !st.live[d.Item] {
				t.Fatalf("a delta of message %q, which this stream did not see added", d.Item)
			}
			return nil
		}
		for i := 0; ; i++ {
			if i > len(body) {
				t.Fatalf("more events (%d) than bytes (%d)", i, len(body))
			}
			ev, err := es.read(true)
			if err != nil {
				return // a clean end, an error frame, or a frame that is not JSON
			}
			step, _ := st.handle(context.Background(), ev)
			release(ev)
			if step != nil && len(step.Calls) == 0 && step.Thread == "" {
				t.Fatalf("a step with no thread: %+v", step)
			}
		}
	})
}
