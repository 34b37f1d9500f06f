package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolrelay/toolrelay/core"
)

// seenLimit bounds how many event ids a thread remembers for
// de-duplication.
const seenLimit = 4096

// callKey identifies a call within a session.
type callKey struct{ turn, call string }

// thread is what the backend knows of one session: the open event stream,
// the event ids seen, the root turn being followed, and the calls whose
// results were (or may have been) delivered. The runner uses a thread from
// one goroutine at a time; Close reads it under the backend's lock.
type thread struct {
	id     string
	stream *eventStream

	seen  map[string]bool
	order []string // seen ids, oldest first, for eviction

	turn      string // the root turn being followed; "" when unknown
	lastTurn  string // the previous root turn of the session
	lastKnown bool   // lastTurn is known (a session with no turn has "")
	terminal  bool   // the root turn completed; its answer follows the next idle
	usage     core.Usage
	msgs      map[int64]string // final messages of the turn, by output_index
	gap       bool             // events of the turn may have been missed
	sent      map[callKey]bool // results delivered, or maybe delivered

	// active is set while a turn this backend started or follows may run;
	// Close reads it to cancel such turns before deleting their session.
	active atomic.Bool
}

func newThread(id string) *thread {
	return &thread{id: id, msgs: map[int64]string{}, sent: map[callKey]bool{}}
}

// accept reports whether an event is new, remembering its id. Events
// without an id are always accepted.
func (st *thread) accept(id string) bool {
	switch {
	case id == "":
		return true
	case st.seen[id]:
		return false
	}
	if st.seen == nil {
		st.seen = map[string]bool{}
	}
	if len(st.order) >= seenLimit {
		delete(st.seen, st.order[0])
		st.order = st.order[1:]
	}
	st.seen[id] = true
	st.order = append(st.order, id)
	return true
}

// beginTurn follows the root turn id.
func (st *thread) beginTurn(id string) {
	st.active.Store(true)
	st.turn = id
	st.terminal = false
	st.usage = core.Usage{}
	clear(st.msgs)
}

// resetFollow prepares the thread to follow a turn afresh (a new input, or
// a resume): the stream is closed, and a turn being followed becomes the
// previous turn. Delivered results are kept.
func (st *thread) resetFollow() {
	st.closeStream()
	if st.turn != "" {
		st.lastTurn, st.lastKnown = st.turn, true
	}
	st.turn = ""
	st.terminal = false
	st.gap = false
	st.usage = core.Usage{}
	clear(st.msgs)
}

// endTurn forgets the turn once it is over.
func (st *thread) endTurn() {
	st.active.Store(false)
	if st.turn != "" {
		st.lastTurn, st.lastKnown = st.turn, true
	} else {
		st.lastKnown = false
	}
	st.turn = ""
	st.terminal = false
	st.gap = false
	st.usage = core.Usage{}
	clear(st.msgs)
	clear(st.sent)
	// The ids of the turn's events are not needed once it is over (the
	// events of a past turn are told apart by its turn id): let a thread
	// that waits for its next input hold no more than its ids.
	st.seen, st.order = nil, nil
	st.closeStream()
}

// text joins the turn's final messages in output order.
func (st *thread) text() string {
	keys := slices.Sorted(maps.Keys(st.msgs))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = st.msgs[k]
	}
	return strings.Join(parts, "\n")
}

func (st *thread) closeStream() {
	if st.stream != nil {
		st.stream.close()
		st.stream = nil
	}
}

// eventStream is an SSE stream of session events, read by the goroutine
// that waits for the next event. Its request's context is the backend's,
// not the call's that opened it: a call whose context ends while it waits
// ends the stream (the caller then closes it, and the next call subscribes
// again).
type eventStream struct {
	s      *ssestream.Stream[oai.AgentSessionEventUnion]
	cancel func() // cancels the stream's request
	err    error  // why the stream ended, once it has
	once   sync.Once
}

// openStream starts a request whose answer is a stream of session events:
// the creation of a session (POST agents/sessions with "stream": true) or a
// subscription (GET agents/sessions/{id}/events), as openai-go's
// NewStreaming and StreamStreaming make them, with the same headers and
// read by the same SSE decoder and stream, except that the events handle
// ignores are dropped before they are decoded (see [keep]). The request is
// canceled if ctx ends before the response headers arrive; after that the
// stream lasts until it is closed, the backend is closed, the connection
// ends, or a wait for its next event is canceled.
func (b *Backend) openStream(ctx context.Context, method, path string, params any, opts ...option.RequestOption) (*eventStream, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopLife := context.AfterFunc(b.life, cancel)
	stopCall := context.AfterFunc(ctx, cancel)
	var res *http.Response
	opts = append([]option.RequestOption{option.WithHeader("OpenAI-Beta", "agents=v1"), option.WithHeader("Accept", "text/event-stream")}, opts...)
	err := b.client.Execute(sctx, method, path, params, &res, opts...)
	callEnded := !stopCall()
	if err != nil || callEnded {
		cancel()
		stopLife()
		if err == nil {
			_ = res.Body.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if b.life.Err() != nil {
			return nil, errClosed
		}
		return nil, err
	}
	s := ssestream.NewStream[oai.AgentSessionEventUnion](&eventFilter{ssestream.NewDecoder(res)}, nil)
	return &eventStream{s: s, cancel: func() { cancel(); stopLife() }}, nil
}

// eventFilter passes on the events of a stream that handle may act on.
type eventFilter struct{ ssestream.Decoder }

// Next moves to the next event kept.
func (f *eventFilter) Next() bool {
	for f.Decoder.Next() {
		if keep(f.Event().Data) {
			return true
		}
	}
	return false
}

// keep reports whether the stream must decode an event: one whose type is
// in handled (a turn.item.done only for a message), an error frame, a frame
// that is not JSON (the stream reports both), or the end of the stream.
// Decoding an event into its union type costs far more than this look at
// three fields, and most events of a step (progress, added items, function
// call items) are of no use to the backend.
func keep(data []byte) bool {
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		return true
	}
	var ev struct {
		Type  string  `json:"type"`
		Error present `json:"error"`
		Item  struct {
			Type string `json:"type"`
		} `json:"item"`
	}
	if err := json.Unmarshal(data, &ev); err != nil || bool(ev.Error) {
		return true
	}
	if ev.Type == "agent.session.turn.item.done" {
		return ev.Item.Type == "message"
	}
	return handled[ev.Type]
}

// present is set when a JSON object has the field, whatever its value
// (null included).
type present bool

func (p *present) UnmarshalJSON([]byte) error {
	*p = true
	return nil
}

// handled lists the event types Backend.handle acts on; the stream drops
// the others (deltas, added items, progress) before they are decoded.
var handled = map[string]bool{
	"agent.session.created":          true,
	"agent.session.turn.created":     true,
	"agent.session.turn.in_progress": true,
	"agent.session.turn.item.done":   true,
	"agent.session.requires_action":  true,
	"agent.session.turn.completed":   true,
	"agent.session.turn.failed":      true,
	"agent.session.turn.cancelled":   true,
	"agent.session.idle":             true,
	"agent.session.failed":           true,
}

// eventPool recycles events. An event is a large value (about 8 KB): next
// hands each over by pointer, and the caller gives it back with release
// once it has read what it needs (handle keeps no pointer into the struct
// itself; the slices and strings it keeps are the decoder's fresh ones).
var eventPool = sync.Pool{New: func() any { return new(oai.AgentSessionEventUnion) }}

// release gives an event that next returned back to the pool.
func release(ev *oai.AgentSessionEventUnion) { eventPool.Put(ev) }

// next returns the next event (of a type in handled). When the stream has
// ended it returns an error wrapping the reason (io.EOF for a clean end);
// when ctx ends, ctx's error, and the stream is over.
func (es *eventStream) next(ctx context.Context) (*oai.AgentSessionEventUnion, error) {
	if es.err != nil {
		return nil, &streamEnd{err: es.err}
	}
	stop := context.AfterFunc(ctx, es.cancel)
	defer stop()
	if es.s.Next() {
		ev := eventPool.Get().(*oai.AgentSessionEventUnion)
		*ev = es.s.Current()
		return ev, nil
	}
	es.err = es.s.Err()
	if es.err == nil {
		es.err = io.EOF
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &streamEnd{err: es.err}
}

// close ends the stream; it may be called while another goroutine waits
// in next, which then returns.
func (es *eventStream) close() {
	es.once.Do(func() {
		es.cancel()
		_ = es.s.Close()
	})
}

// streamEnd reports the end of an event stream.
type streamEnd struct{ err error }

func (e *streamEnd) Error() string { return "the event stream ended: " + e.err.Error() }
func (e *streamEnd) Unwrap() error { return e.err }

// protocolError reports whether a stream ended on an error frame of the
// service (rather than a dropped connection).
func protocolError(err error) bool {
	var se *ssestream.StreamError
	return errors.As(err, &se)
}

// newKey returns a random idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
