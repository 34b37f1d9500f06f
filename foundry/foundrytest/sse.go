package foundrytest

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"time"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// sseAnswer is a streamed answer: server-sent events, written after the
// server's lock is released.
type sseAnswer struct {
	events []sseEvent
	first  int  // the sequence number of the first event
	cut    int  // from a Fault: drop the connection after that many text deltas
	dup    bool // from a Fault: write every event twice
}

type sseEvent struct {
	typ  string
	data map[string]any
}

// events returns the events that stream r, in the order the service sends
// them: response.created, response.in_progress, each output item (added,
// its deltas, done), then response.completed or response.failed.
func (s *Server) events(r *response) *sseAnswer {
	full := r.json()
	start := maps.Clone(full)
	start["status"], start["output"], start["error"], start["usage"] = "in_progress", []any{}, nil, nil
	delete(start, "completed_at")
	a := &sseAnswer{}
	add := func(typ string, data map[string]any) { a.events = append(a.events, sseEvent{typ, data}) }
	add("response.created", map[string]any{"response": start})
	add("response.in_progress", map[string]any{"response": start})
	for i, it := range r.output {
		switch it.Type {
		case "function_call":
			begin := *it
			begin.Status, begin.Arguments = "in_progress", ""
			add("response.output_item.added", map[string]any{"output_index": i, "item": &begin})
			for _, d := range fakeapi.Chunks(it.Arguments, s.opts.DeltaSize) {
				add("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": d})
			}
			add("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": it.Arguments, "name": it.Name})
		case "message":
			begin := map[string]any{"type": "message", "id": it.ID, "status": "in_progress", "role": "assistant", "content": []any{}}
			if it.Phase != "" {
				begin["phase"] = it.Phase // on the item only: its deltas do not say
			}
			add("response.output_item.added", map[string]any{"output_index": i, "item": begin})
			part := func(text string) map[string]any {
				return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
			}
			at := map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0}
			with := func(k string, v any) map[string]any { m := maps.Clone(at); m[k] = v; return m }
			add("response.content_part.added", with("part", part("")))
			for _, text := range fakeapi.Chunks(it.Text, s.opts.DeltaSize) {
				d := with("delta", text)
				d["logprobs"] = []any{}
				add("response.output_text.delta", d)
			}
			done := with("text", it.Text)
			done["logprobs"] = []any{}
			add("response.output_text.done", done)
			add("response.content_part.done", with("part", part(it.Text)))
		case "reasoning":
			begin := *it
			begin.Summary = ""
			add("response.output_item.added", map[string]any{"output_index": i, "item": &begin})
			if it.Summary != "" {
				at := map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0}
				with := func(k string, v any) map[string]any { m := maps.Clone(at); m[k] = v; return m }
				add("response.reasoning_summary_part.added", with("part", map[string]any{"type": "summary_text", "text": ""}))
				for _, d := range fakeapi.Chunks(it.Summary, s.opts.DeltaSize) {
					add("response.reasoning_summary_text.delta", with("delta", d))
				}
				add("response.reasoning_summary_text.done", with("text", it.Summary))
				add("response.reasoning_summary_part.done", with("part", map[string]any{"type": "summary_text", "text": it.Summary}))
			}
		default:
			add("response.output_item.added", map[string]any{"output_index": i, "item": it})
		}
		add("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	if r.status == "failed" {
		add("response.failed", map[string]any{"response": full})
	} else {
		add("response.completed", map[string]any{"response": full})
	}
	return a
}

// writeSSE writes a streamed answer. No event carries a top-level "error"
// key (the error event carries code and message), as the service does.
// The frames are encoded before the first is written, so that what the
// fake holds does not change while a slow client reads them.
func (s *Server) writeSSE(ex *exchange, a *sseAnswer) {
	frames := make([][]byte, len(a.events))
	for i, ev := range a.events {
		data := maps.Clone(ev.data)
		data["type"] = ev.typ
		data["sequence_number"] = a.first + i
		var buf bytes.Buffer
		buf.WriteString("event: " + ev.typ + "\ndata: ")
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(data)
		buf.Truncate(buf.Len() - 1) // Encode's newline
		buf.WriteString("\n\n")
		frames[i] = buf.Bytes()
	}
	s.setStatus(ex, http.StatusOK, "")
	h := ex.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	ex.w.WriteHeader(http.StatusOK)
	fl, _ := ex.w.(http.Flusher)
	deltas := 0
	for i, f := range frames {
		if a.events[i].typ == "response.output_text.delta" {
			if deltas++; a.cut > 0 && deltas > a.cut {
				s.setStatus(ex, 0, "")
				panic(http.ErrAbortHandler) // the stream drops mid-text
			}
			time.Sleep(s.script.DeltaPause())
		}
		ex.w.Write(f)
		if a.dup {
			ex.w.Write(f)
		}
		if fl != nil {
			fl.Flush()
		}
	}
}
