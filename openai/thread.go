package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	"github.com/tidwall/gjson"

	"github.com/toolrelay/toolrelay/core/driver"
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
	// b is the backend the session is on.
	b      *Backend
	id     string
	stream *eventStream

	seen  map[string]bool
	order []string // seen ids, oldest first, for eviction

	turn      string // the root turn being followed; "" when unknown
	lastTurn  string // the previous root turn of the session
	lastKnown bool   // lastTurn is known (a session with no turn has "")
	terminal  bool   // the root turn completed; its answer follows the next idle
	usage     driver.Usage
	msgs      map[int64]string // final messages of the turn, by output_index
	gap       bool             // events of the turn may have been missed
	sent      map[callKey]bool // results delivered, or maybe delivered
	created   func(string)     // StartRequest.Created of the run that made the session
	// offered is the toolbox's version last offered to the session, once
	// offeredKnown (see reoffer).
	offered      uint64
	offeredKnown bool

	// lastErr is the error of the latest "error" event of the turn.
	lastErr oai.SessionError

	// obs, when the run is streamed, receives the text of the turn's
	// messages; live holds the messages whose every delta this stream
	// carried (those added since it was opened), whose deltas go to obs.
	obs  driver.Observer
	live map[string]bool
	// subturns maps the turns of subagents seen on the stream while the
	// root turn runs to their subagent (at most seenLimit of them), so
	// that their messages go to obs as the subagent's activity.
	subturns map[string]string

	// agentChecked is set once the session's agent is known to declare
	// no async function (see Backend.checkSession).
	agentChecked bool

	// active is set while a turn this backend started or follows may run;
	// Close reads it to cancel such turns before deleting their session.
	active atomic.Bool
}

// String names the thread's session for messages: "session <id>", or, on
// the creation stream before the id arrived, "the session being created".
func (st *thread) String() string {
	if st.id == "" {
		return "the session being created"
	}
	return "session " + st.id
}

func newThread(b *Backend, id string) *thread {
	return &thread{b: b, id: id, msgs: map[int64]string{}, sent: map[callKey]bool{}, live: map[string]bool{}}
}

// observe sets the observer of a Start, Submit or Resume.
func (st *thread) observe(ctx context.Context) { st.obs = driver.ObserverFrom(ctx) }

// emit hands a delta to the observer, if any.
func (st *thread) emit(kind driver.DeltaKind, item, text string) error {
	if st.obs == nil {
		return nil
	}
	return st.obs(driver.Delta{Kind: kind, Item: item, Text: text})
}

// act hands the observer, if any, what another agent of the session did
// (see driver.AgentActivity).
func (st *thread) act(agent, activity, item, text string) error {
	if st.obs == nil {
		return nil
	}
	return st.obs(driver.Delta{Kind: driver.AgentActivity, Agent: agent, Activity: activity, Item: item, Text: text})
}

// inTurn reports whether an item of turn belongs to the root turn being
// followed, or to a turn of one of its subagents.
func (st *thread) inTurn(turn string) bool {
	return st.turn != "" && (turn == st.turn || st.subturns[turn] != "")
}

// subturn records turn as one of subagent's.
func (st *thread) subturn(turn, subagent string) {
	if st.subturns == nil {
		st.subturns = map[string]string{}
	}
	if len(st.subturns) < seenLimit {
		st.subturns[turn] = subagent
	}
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
	st.usage = driver.Usage{}
	clear(st.msgs)
	clear(st.live)
	st.subturns = nil
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
	st.usage = driver.Usage{}
	clear(st.msgs)
	clear(st.live)
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
	st.usage = driver.Usage{}
	st.lastErr = oai.SessionError{}
	clear(st.msgs)
	clear(st.live)
	clear(st.sent)
	st.subturns = nil
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
	dec    ssestream.Decoder
	cancel func() // cancels the stream's request
	err    error  // why the stream ended, once it has
	once   sync.Once
}

// openStream starts a request whose answer is a stream of session events:
// the creation of a session (POST agents/sessions with "stream": true) or a
// subscription (GET agents/sessions/{id}/events), as openai-go's
// NewStreaming and StreamStreaming make them, with the same headers, and
// read by the same SSE decoder (see [eventStream.read] for the rest). The
// request is canceled if ctx ends before the response headers arrive; after
// that the stream lasts until it is closed, the backend is closed, the
// connection ends, or a wait for its next event is canceled.
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
	return &eventStream{dec: ssestream.NewDecoder(res), cancel: func() { cancel(); stopLife() }}, nil
}

// wanted reports whether handle acts on an event of type typ, whose item
// (for a turn.item.added or .done) is of type item; deltas says whether the
// run is streamed.
func wanted(typ, item string, deltas bool) bool {
	switch typ {
	case "agent.session.turn.item.done":
		return item == "message" || deltas && subagentCalls[item]
	case "agent.session.turn.item.added":
		return deltas && (item == "message" || item == "agent_message")
	}
	return handled[typ] || deltas && subagentEvents[typ]
}

// subagentCalls are the types of the items by which an agent works with
// its subagents (openai-go v3.105 betaagent.go: AgentCreateSubagentCallItem
// and its siblings); a streamed run hands each over, once done, as an
// agent activity.
var subagentCalls = map[string]bool{
	"create_subagent_call":     true,
	"send_subagent_input_call": true,
	"resume_subagent_call":     true,
	"wait_for_subagents_call":  true,
	"interrupt_subagent_call":  true,
	"close_subagent_call":      true,
}

// subagentEvents are the events of a subagent's state (openai-go
// betaagent.go: AgentSessionSubagentCreatedEvent, ...Active..., ...Closed...),
// which a streamed run hands over as agent activities.
var subagentEvents = map[string]bool{
	"agent.session.subagent.created": true,
	"agent.session.subagent.active":  true,
	"agent.session.subagent.closed":  true,
}

// deltaTypes are the events of a streamed run that read decodes itself:
// there is one for every few words of text, and they have few fields.
var deltaTypes = map[string]bool{
	"agent.session.turn.output_text.delta":            true,
	"agent.session.turn.reasoning_summary_text.delta": true,
}

// handled lists the event types thread.handle acts on; the stream skips
// the others (deltas, added items, progress) without decoding them.
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
	"agent.session.budget_reached":   true,
	"error":                          true,
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
func (es *eventStream) next(ctx context.Context, deltas bool) (*oai.AgentSessionEventUnion, error) {
	if es.err != nil {
		return nil, &streamEnd{err: es.err}
	}
	stop := context.AfterFunc(ctx, es.cancel)
	defer stop()
	ev, err := es.read(deltas)
	if err == nil {
		return ev, nil
	}
	es.err = err
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &streamEnd{err: es.err}
}

// read returns the next event handle acts on (with deltas, the text deltas
// too, of which it decodes only the fields handle reads), ending the stream as
// openai-go's session streams do (ssestream.Stream in events mode):
// cleanly (io.EOF) on [DONE]; with the decoding error on a frame that is
// not JSON. An "error" event is an event like the others (the service
// sends one when a turn or the session fails, before the lifecycle event
// that says so). Every event is looked
// at for its type, with gjson, and decoded whole, into an event from
// the pool, only when handle needs it or its type is not a string; an
// event skipped is only checked to be JSON (decoding checks the others).
// Decoding the event union costs far more than the look, and most events
// of a step (progress, added items, function call items) are of no use to
// the backend; decoding into the pool, rather than through
// ssestream.Stream, also keeps the event's 8 KB off the goroutine's stack,
// which the collector would otherwise shrink and the next event grow
// again.
func (es *eventStream) read(deltas bool) (*oai.AgentSessionEventUnion, error) {
	for es.dec.Next() {
		e := es.dec.Event()
		if bytes.HasPrefix(e.Data, []byte("[DONE]")) {
			return nil, io.EOF
		}
		head := gjson.GetManyBytes(e.Data, "type", "item.type")
		light := deltas && deltaTypes[head[0].Str]
		if head[0].Type == gjson.String && (light || !wanted(head[0].Str, head[1].String(), deltas)) {
			if !gjson.ValidBytes(e.Data) {
				var v struct{}
				return nil, json.Unmarshal(e.Data, &v) // the syntax error
			}
			if !light {
				continue
			}
			f := gjson.GetManyBytes(e.Data, "event_id", "turn_id", "item_id", "delta")
			ev := eventPool.Get().(*oai.AgentSessionEventUnion)
			*ev = oai.AgentSessionEventUnion{Type: head[0].Str, EventID: f[0].String(), TurnID: f[1].String(), ItemID: f[2].String(), Delta: f[3].String()}
			return ev, nil
		}
		ev := eventPool.Get().(*oai.AgentSessionEventUnion)
		*ev = oai.AgentSessionEventUnion{}
		if err := json.Unmarshal(e.Data, ev); err != nil {
			release(ev)
			return nil, err
		}
		return ev, nil
	}
	if err := es.dec.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// close ends the stream; it may be called while another goroutine waits
// in next, which then returns.
func (es *eventStream) close() {
	es.once.Do(func() {
		es.cancel()
		_ = es.dec.Close()
	})
}

// streamEnd reports the end of an event stream.
type streamEnd struct{ err error }

func (e *streamEnd) Error() string { return "the event stream ended: " + e.err.Error() }
func (e *streamEnd) Unwrap() error { return e.err }

// newKey returns a random idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
