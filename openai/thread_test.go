package openai

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// TestEventStream reads SSE streams: the events handle acts on arrive
// decoded, the others are skipped, and the stream ends as openai-go's
// ends: on an error frame (whatever the rest of the frame), on a frame it
// cannot decode, or on [DONE].
func TestEventStream(t *testing.T) {
	const (
		created  = `{"type":"agent.session.turn.created","event_id":"e1","turn_id":"turn_1"}`
		progress = `{"type":"agent.session.in_progress","event_id":"e2","session":{"id":"s"}}`
		delta    = `{"type":"agent.session.turn.output_text.delta","event_id":"e3","delta":"Hel"}`
		added    = `{"type":"agent.session.turn.item.added","event_id":"e4","item":{"type":"message"}}`
		fcDone   = `{"type":"agent.session.turn.item.done","event_id":"e5","item":{"type":"function_call","error":null}}`
		msgDone  = `{"type":"agent.session.turn.item.done","event_id":"e6","item":{"type":"message","role":"assistant"}}`
		requires = `{"type":"agent.session.requires_action","event_id":"e7","session":{"id":"s","error":null}}`
		unknown  = `{"type":"agent.session.new_kind","event_id":"e8"}`
		noType   = `{"event_id":"e9"}`
		errFrame = `{"type":"agent.session.turn.item.added","event_id":"e10","error":{"code":"internal_error","message":"boom"}}`
		nullErr  = `{"type":"agent.session.in_progress","event_id":"e11","error":null}`
		errEvent = `{"type":"error","event_id":"e14","session_id":"s","error":{"code":"server_error","message":"boom","param":null,"type":"server_error"}}`
		oddItem  = `{"type":"agent.session.turn.item.done","event_id":"e12","item":"not an object"}`
	)
	tests := []struct {
		name    string
		frames  []string
		want    []string // event ids decoded
		wantErr string   // the stream's error; "" for a clean end
	}{
		{"a step", []string{created, progress, delta, added, fcDone, msgDone, requires}, []string{"e1", "e6", "e7"}, ""},
		{"unknown types are skipped", []string{unknown, requires}, []string{"e7"}, ""},
		{"an event without a type is decoded", []string{noType, requires}, []string{"e9", "e7"}, ""},
		{"a frame that is not JSON is left to the stream", []string{created, `{"type":`, requires}, []string{"e1"}, "unexpected end of JSON input"},
		{"a frame of a skipped type that is not JSON ends the stream", []string{created, `{"type":"agent.session.turn.item.added","event_id":"e13",`, requires}, []string{"e1"}, "unexpected end of JSON input"},
		// Session streams are read in events mode (openai-go v3.102):
		// an error key ends nothing, an error event is handed over.
		{"an error key on a skipped type is skipped", []string{created, errFrame, requires}, []string{"e1", "e7"}, ""},
		{"a null error key is ignored", []string{created, nullErr, requires}, []string{"e1", "e7"}, ""},
		{"an error event is handed over", []string{created, errEvent, requires}, []string{"e1", "e14", "e7"}, ""},
		{"an item done that is not a message's is skipped", []string{oddItem, requires}, []string{"e7"}, ""},
		{"[DONE] ends the stream", []string{created, "[DONE]", requires}, []string{"e1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body strings.Builder
			for _, f := range tt.frames {
				body.WriteString("data: " + f + "\n\n")
			}
			res := &http.Response{
				Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body:   io.NopCloser(strings.NewReader(body.String())),
			}
			es := &eventStream{dec: ssestream.NewDecoder(res), cancel: func() {}}
			defer es.close()
			var got []string
			var err error
			for {
				var ev *oai.AgentSessionEventUnion
				if ev, err = es.next(t.Context(), false); err != nil {
					break
				}
				got = append(got, ev.EventID)
				release(ev)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events decoded (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == "" && !errors.Is(err, io.EOF):
				t.Errorf("stream error %v, want a clean end", err)
			case tt.wantErr != "" && (errors.Is(err, io.EOF) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("stream error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
