package respond

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/apierr"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// maxResumes bounds how many times one response's stream is resumed.
const maxResumes = 3

// responseStream reads the events of one response, resuming its stream
// after a drop from the last sequence number read, so that no event is
// read twice or missed.
type responseStream struct {
	b      *Backend
	thread string
	obs    driver.Observer
	id     string // the response's id, once response.created was read
	seq    int64  // the last sequence number read; -1 before the first
	final  *responses.Response
	done   []responses.ResponseOutputItemUnion
	open   string // the message whose text is being read, if any
	// commentary holds the messages of the response that are the
	// model's commentary (phase "commentary", read from
	// response.output_item.added: the deltas do not say).
	commentary map[string]bool
	// moved, in Chain mode, is told the response's id once
	// response.created names it (see driver.SubmitRequest.Moved).
	moved func(string)
}

// read creates the response p describes and reads its stream, and the
// streams that resume it, to the response's end.
func (rs *responseStream) read(ctx context.Context, p *responses.ResponseNewParams) (*reply, error) {
	dec, err := rs.b.openStream(ctx, http.MethodPost, "responses", p, option.WithJSONSet("stream", true))
	for resumes := 0; ; resumes++ {
		if err == nil {
			err = rs.readStream(dec)
		}
		switch {
		case err == nil && rs.final != nil:
			if len(rs.final.Output) == 0 && len(rs.done) > 0 {
				rs.final.Output = rs.done
			}
			rep := replyOf(rs.final)
			if rs.b.mode == Stateless {
				for _, o := range rs.final.Output {
					rep.items = append(rep.items, json.RawMessage(o.RawJSON()))
				}
			}
			return rep, nil
		case err == nil:
			err = fmt.Errorf("the response stream ended before the response finished: %w", io.ErrUnexpectedEOF)
		case isTurnError(err), errors.Is(err, wirelimit.ErrTooLarge), ctx.Err() != nil || rs.id == "":
			return nil, err
		}
		if rs.seq < 0 || ctx.Err() != nil {
			return nil, err
		}
		if rs.b.mode == Stateless {
			// Nothing is stored to resume from: the request goes again.
			return rs.redo(ctx, p, err)
		}
		if resumes == maxResumes {
			return nil, fmt.Errorf("%s: the stream of response %s dropped %d times: %w", rs.b.name, rs.id, resumes+1, err)
		}
		rs.b.logger.InfoContext(ctx, rs.b.name+": response stream dropped; resuming", "response", rs.id, "after", rs.seq, "error", err)
		dec, err = rs.b.openStream(ctx, http.MethodGet, "responses/"+url.PathEscape(rs.id), nil,
			option.WithQuery("stream", "true"), option.WithQuery("starting_after", strconv.FormatInt(rs.seq, 10)))
	}
}

// redo answers a stateless request whose stream dropped (the service kept
// nothing to resume it from) by sending it again, without streaming. The
// text of the message the stream was writing ends with the new response's
// message, as that message's end, for the runner to deliver what the
// stream had not; the new response's other messages are delivered whole.
func (rs *responseStream) redo(ctx context.Context, p *responses.ResponseNewParams, cause error) (*reply, error) {
	rs.b.logger.InfoContext(ctx, rs.b.name+": the stream of a stateless response dropped; sending the request again", "response", rs.id, "error", cause)
	r, err := rs.b.newReplyItems(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		id := it.ID
		if rs.open != "" {
			id, rs.open = rs.open, ""
		}
		var text strings.Builder
		for _, c := range it.Content {
			if c.Type == "output_text" {
				text.WriteString(c.Text)
			}
		}
		if err := rs.emit(driver.TextDone, id, text.String(), it.commentary()); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// openStream sends a request whose answer is a response's event stream,
// as openai-go's NewStreaming and GetStreaming do, and returns the stream's
// decoder (openai-go's).
func (b *Backend) openStream(ctx context.Context, method, path string, params any, opts ...option.RequestOption) (ssestream.Decoder, error) {
	var res *http.Response
	opts = append([]option.RequestOption{option.WithHeader("Accept", "text/event-stream")}, opts...)
	if err := b.client.Execute(ctx, method, path, params, &res, opts...); err != nil {
		return nil, apierr.WithRefusal(err)
	}
	return ssestream.NewDecoder(res), nil
}

// readStream reads one stream to its end, as openai-go's ssestream.Stream
// does (a clean end on [DONE]; an *ssestream.StreamError on an event with a
// top-level "error" key; the decoding error on a frame that is not JSON),
// skipping the events it replays. Each event is looked at with gjson: a
// text or reasoning delta is handled from the two fields it needs, the
// events the loop has no use for are skipped, and only the others
// (response.created, output items done, the response's end, errors) are
// decoded whole, into openai-go's event type. That decoding costs far more
// than the look, and deltas are most of a stream.
func (rs *responseStream) readStream(dec ssestream.Decoder) error {
	defer dec.Close()
	for dec.Next() {
		e := dec.Event()
		if bytes.HasPrefix(e.Data, []byte("[DONE]")) {
			return nil
		}
		head := gjson.GetManyBytes(e.Data, "type", "sequence_number", "error")
		if head[2].Exists() {
			return &ssestream.StreamError{Message: fmt.Sprintf("received error while streaming: %s", head[2].String()), Event: e}
		}
		if !gjson.ValidBytes(e.Data) {
			var v struct{}
			return json.Unmarshal(e.Data, &v) // the syntax error
		}
		if seq := head[1].Int(); head[1].Exists() {
			if rs.seq >= 0 && seq <= rs.seq {
				continue // replayed
			}
			rs.seq = seq
		}
		typ := head[0].Str
		switch {
		case typ == "response.output_text.delta", typ == "response.reasoning_summary_text.delta":
			kind := driver.TextDelta
			if typ != "response.output_text.delta" {
				kind = driver.ReasoningDelta
			}
			f := gjson.GetManyBytes(e.Data, "item_id", "delta")
			if kind == driver.TextDelta {
				rs.open = f[0].String()
			}
			if err := rs.emit(kind, f[0].String(), f[1].String(), kind == driver.TextDelta && rs.commentary[f[0].String()]); err != nil {
				return err
			}
			continue
		case typ == "response.output_item.added":
			// A message's phase is on its item, not on its deltas.
			f := gjson.GetManyBytes(e.Data, "item.type", "item.id", "item.phase")
			if f[0].Str == "message" && f[2].Str == "commentary" {
				if rs.commentary == nil {
					rs.commentary = map[string]bool{}
				}
				rs.commentary[f[1].Str] = true
			}
			continue
		case head[0].Type == gjson.String && !decoded[typ]:
			continue
		}
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return err
		}
		if err := rs.handle(&ev); err != nil {
			return err
		}
	}
	return dec.Err()
}

// decoded lists the event types readStream decodes whole for handle.
var decoded = map[string]bool{
	"response.created":          true,
	"response.output_item.done": true,
	"response.completed":        true,
	"response.failed":           true,
	"response.incomplete":       true,
	"response.cancelled":        true,
	"error":                     true,
}

// handle applies one event of a response's stream.
func (rs *responseStream) handle(ev *responses.ResponseStreamEventUnion) error {
	switch ev.Type {
	case "response.created":
		rs.id = ev.Response.ID
		if rs.moved != nil && rs.id != "" {
			rs.moved(rs.id)
			rs.moved = nil
		}
	case "response.output_text.delta":
		return rs.emit(driver.TextDelta, ev.ItemID, ev.Delta, rs.commentary[ev.ItemID])
	case "response.reasoning_summary_text.delta":
		return rs.emit(driver.ReasoningDelta, ev.ItemID, ev.Delta, false)
	case "response.output_item.done":
		rs.done = append(rs.done, ev.Item)
		if ev.Item.Type == "message" {
			rs.open = ""
			return rs.emit(driver.TextDone, ev.Item.ID, outputText(ev.Item.Content), ev.Item.Phase == "commentary" || rs.commentary[ev.Item.ID])
		}
	case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
		r := ev.Response
		rs.final = &r
	case "error":
		return &driver.TurnError{Backend: rs.b.name, Thread: rs.thread, Turn: rs.id, Status: "error", Code: ev.Code, Message: ev.Message}
	}
	return nil
}

func (rs *responseStream) emit(kind driver.DeltaKind, item, text string, commentary bool) error {
	if rs.obs == nil {
		return nil
	}
	return rs.obs(driver.Delta{Kind: kind, Item: item, Text: text, Commentary: commentary})
}

// outputText returns the output text of a message's content.
func outputText(content []responses.ResponseOutputMessageContentUnion) string {
	var b strings.Builder
	for _, c := range content {
		if c.Type == "output_text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}
