// Package replaycheck checks a fake against traffic recorded from the
// real service: it sends a cassette's recorded requests (package replay)
// to the fake and names where its answers differ ([Check]). It is what
// cmd/toolrelay-fake -check runs.
//
// It is a package of its own, not part of package replay, because it
// reads streams with openai-go's event-stream decoder, and package replay
// must link no service SDK: package adapter imports it, and a program
// that uses only mcptools (which imports adapter) links none
// (internal/depcheck).
package replaycheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/replay"
)

// CheckOptions tune [Check]. nil is usable.
type CheckOptions struct {
	// Client sends the requests; nil means a client of
	// http.DefaultTransport. Give a fake's own client when it serves
	// HTTPS with a certificate of its own (foundrytest.Server.Client).
	Client *http.Client
	// Header is set on every request sent, over the recorded headers. The
	// recorded credentials are masked ([Mask]): a masked Authorization is
	// sent as "Bearer xxxxx", which a fake accepts and a service does not.
	Header http.Header
	// Wait bounds each wait of the check: for an answer, for a streamed
	// body to end, for an id a later request names (30 s when zero).
	Wait time.Duration
	// Quiet is how long a stream that has not yet carried all its recorded
	// events must stay quiet before the next request is sent (300 ms when
	// zero): a cassette does not hold when, within a stream, the client
	// sent its next request, and a stream that waits for that request is
	// quiet.
	Quiet time.Duration
	// MaxBodyBytes bounds each body read (DefaultMaxBodyBytes when zero).
	MaxBodyBytes int64
}

// A Difference is where a target's answer to a recorded request is not
// the recorded answer.
type Difference struct {
	// Interaction is the recorded interaction's index in the cassette
	// (its id), Method and Path its request's.
	Interaction  int
	Method, Path string
	// Paths are where the answers differ, as JSON paths into the answer
	// {"status": …, "headers": {…}, "body": …}: "body.item.status", or
	// "body[3].data.session.status" for the fourth event of a stream; an
	// element of an array that only one side has is followed by "(only
	// recorded)" or "(only the target's)".
	Paths []string
	// Diff is the difference as go-cmp shows it (-recorded +target).
	Diff string
}

// String returns the difference as a person reads it.
func (d Difference) String() string {
	return fmt.Sprintf("#%d %s %s: the answer differs at %s (-recorded +target):\n%s",
		d.Interaction, d.Method, d.Path, strings.Join(d.Paths, ", "), d.Diff)
}

// Check sends the recorded requests of the cassette in file, in their
// order, to target, the base URL of a fake (scheme, host and port: every
// request keeps its recorded path and query), and returns where the
// target's answers differ from the recorded ones; none when they are the
// same. It is how a fake is checked against traffic recorded from the
// real service (cmd/toolrelay-fake -check).
//
// An answer is compared as {"status", "headers", "body"}: its status
// code, the headers that matter (Content-Type's media type), and its
// body as JSON (a stream of server-sent events event by event, each
// event's data as JSON; another body as its text). Volatile fields are
// ignored by the rule requests are matched by (see the package doc:
// timestamps, fields ending in _at, idempotency keys). Ids are not
// ignored: an id the target mints (a field "id" or ending in "_id", such
// as a session's, a response's or a conversation's) is learned from its
// answer against the recorded one at the same place, a later request
// naming the recorded id (in its path, query or JSON body) is sent with
// the target's, and the target's answers are compared with its ids put
// back to the recorded ones: an id the target gives where the recording
// had another is a difference.
//
// Each recorded idempotency key is sent as a fresh one (the same fresh
// key for the requests recorded with the same key), so that a fake that
// keeps keys answers a second check as it answered the first.
//
// A streamed body is read while the next requests are sent (a sessions
// stream carries the events of input posted after it was opened); a
// request waits for the ids it names, and for every stream short of its
// recorded events to be quiet (CheckOptions.Quiet). A stream the
// recording's client closed early is compared up to the events it read;
// one that does not end within CheckOptions.Wait, when the recorded one
// ended, is cut and is a difference at "stream".
// An interaction that failed in transport when recorded is not sent.
//
// The error is not a difference: a cassette that does not load (codes as
// [OpenFile]), a target that is not a URL (InvalidArgument), a request
// that cannot be sent or a wait that passed its bound (Unavailable,
// DeadlineExceeded), or ctx's.
func Check(ctx context.Context, file, target string, opts *CheckOptions) ([]Difference, error) {
	var o CheckOptions
	if opts != nil {
		o = *opts
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 300 * time.Millisecond
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = replay.DefaultMaxBodyBytes
	}
	base, err := url.Parse(target)
	if err != nil || base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "replaycheck: check", Err: fmt.Errorf("target %q is not a base URL such as http://127.0.0.1:8080", target)}
	}
	ins, err := replay.ReadFile(file)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the streams still open
	k := &checker{opts: o, base: base, ids: newIDMap(ins)}
	for n, in := range ins {
		if in.Response.Code == 0 {
			continue // failed in transport when recorded
		}
		a, err := k.send(ctx, n, in)
		if err != nil {
			return nil, &errcode.Error{Code: errcode.Of(err), Op: fmt.Sprintf("replaycheck: check #%d %s %s", n, in.Request.Method, pathOf(in.Request.URL)), Err: err}
		}
		k.answers = append(k.answers, a)
	}
	var diffs []Difference
	for _, a := range k.answers {
		select {
		case <-a.done:
		case <-time.After(o.Wait):
			// A stream that does not end as the recorded one did: it is
			// cut, and compared with what it carried.
			a.mu.Lock()
			a.endless = true
			a.mu.Unlock()
			a.cancel()
			<-a.done
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d := k.compare(a); d != nil {
			diffs = append(diffs, *d)
		}
	}
	return diffs, nil
}

// checker is one run of [Check].
type checker struct {
	opts    CheckOptions
	base    *url.URL
	ids     *idMap
	answers []*answer
	keys    map[string]string // recorded idempotency key → the one sent
}

// answer is the target's answer to one recorded request.
type answer struct {
	n        int
	rec      *replay.Interaction
	status   int
	header   http.Header
	recorded []sseEvent // the recorded events of a streamed body, nil for another
	live     bool       // the target's body is a stream
	done     chan struct{}
	cancel   func() // ends the request

	mu      sync.Mutex
	body    []byte     // a body not streamed
	events  []sseEvent // a streamed body's events so far
	last    time.Time  // when the last event came (or the answer)
	ended   bool
	endless bool // a stream that did not end within CheckOptions.Wait
}

// send sends recorded request n, with the ids the target minted for the
// recorded ones, once the answers it depends on have come.
func (k *checker) send(ctx context.Context, n int, in *replay.Interaction) (*answer, error) {
	if err := k.settle(ctx, n, in); err != nil {
		return nil, err
	}
	u, err := url.Parse(in.Request.URL)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Err: fmt.Errorf("the recorded URL: %v", err)}
	}
	u.Scheme, u.Host, u.User = k.base.Scheme, k.base.Host, nil
	u = k.ids.liveURL(u)
	body := k.ids.liveBody(in.Request.Body)
	req, err := http.NewRequestWithContext(ctx, in.Request.Method, u.String(), strings.NewReader(body))
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Err: err}
	}
	if body == "" {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	for h, vs := range in.Request.Headers {
		switch http.CanonicalHeaderKey(h) {
		case "Content-Length", "Host", "Accept-Encoding", "Connection", "Transfer-Encoding":
			continue
		}
		if replay.IsVolatile(h) && len(vs) == 1 {
			// An idempotency key: a fresh one, the same for the requests
			// that were sent with the same (a retry), so that a target
			// that keeps keys answers a second check as it did the first.
			vs = []string{k.freshKey(vs[0])}
		}
		req.Header[http.CanonicalHeaderKey(h)] = vs
	}
	if a := req.Header.Get("Authorization"); a == replay.Mask {
		// A masked credential, sent as a bearer token, which a fake takes.
		req.Header.Set("Authorization", "Bearer "+replay.Mask)
	}
	for h, vs := range k.opts.Header {
		req.Header[http.CanonicalHeaderKey(h)] = vs
	}
	// The wait bounds the answer's coming, not the reading of a stream.
	rctx, rcancel := context.WithCancel(ctx)
	timer := time.AfterFunc(k.opts.Wait, rcancel)
	resp, err := k.opts.Client.Do(req.WithContext(rctx))
	if !timer.Stop() && err != nil {
		rcancel()
		return nil, &errcode.Error{Code: errcode.DeadlineExceeded, Err: fmt.Errorf("no answer within %v", k.opts.Wait)}
	}
	if err != nil {
		rcancel()
		return nil, &errcode.Error{Code: errcode.Unavailable, Err: err}
	}
	a := &answer{n: n, rec: in, status: resp.StatusCode, header: resp.Header, done: make(chan struct{}), last: time.Now(), cancel: rcancel}
	if isSSE(in.Response.Headers) {
		a.recorded = splitEvents(in.Response.Body)
	}
	if isSSE(resp.Header) {
		a.live = true
		go func() {
			defer rcancel()
			k.stream(resp.Body, a, in.Response.Cut())
		}()
		return a, nil
	}
	defer rcancel()
	defer resp.Body.Close()
	b, err := readAll(resp.Body, k.opts.MaxBodyBytes)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.Unavailable, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	a.body, a.ended = b, true
	k.ids.learn(decodeJSON(in.Response.Body), decodeJSON(string(b)))
	k.ids.streamEnded(n)
	close(a.done)
	return a, nil
}

// freshKey returns the key this check sends for the recorded idempotency
// key rec.
func (k *checker) freshKey(rec string) string {
	if k.keys == nil {
		k.keys = map[string]string{}
	}
	if f, ok := k.keys[rec]; ok {
		return f
	}
	f := rand.Text()
	k.keys[rec] = f
	return f
}

// stream reads a streamed body event by event, learning the ids of each
// against the recorded event at the same place. A stream the recording's
// client closed (open) is read up to its recorded events.
func (k *checker) stream(body io.ReadCloser, a *answer, open bool) {
	defer close(a.done)
	defer body.Close()
	defer k.ids.streamEnded(a.n)
	r := newEventReader(body, k.opts.MaxBodyBytes)
	for {
		if open && len(a.snapshot()) >= len(a.recorded) {
			a.finish()
			return
		}
		e, err := r.next()
		if err != nil {
			// The end, or a cut: the events compared say what was missed.
			a.finish()
			return
		}
		a.mu.Lock()
		i := len(a.events)
		a.events = append(a.events, e)
		a.last = time.Now()
		a.mu.Unlock()
		if i < len(a.recorded) {
			k.ids.learnEvents(a.n, a.recorded[i:i+1], []sseEvent{e})
		}
	}
}

func (a *answer) snapshot() []sseEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.events
}

func (a *answer) finish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = true
}

// settle waits until request n may be sent: every id it names that an
// earlier answer mints is known, and every stream short of its recorded
// events is quiet.
func (k *checker) settle(ctx context.Context, n int, in *replay.Interaction) error {
	need := k.ids.named(n, in.Request)
	deadline := time.Now().Add(k.opts.Wait)
	for {
		ch, missing := k.ids.waitFor(need)
		quiet := true
		for _, a := range k.answers {
			a.mu.Lock()
			if a.recorded != nil && !a.ended && len(a.events) < len(a.recorded) && time.Since(a.last) < k.opts.Quiet {
				quiet = false
			}
			a.mu.Unlock()
		}
		if missing == "" && quiet {
			return nil
		}
		if time.Now().After(deadline) {
			if missing != "" {
				return &errcode.Error{Code: errcode.DeadlineExceeded, Err: fmt.Errorf("the target's id for the recorded %q, which this request names, did not come within %v", missing, k.opts.Wait)}
			}
			return nil // a stream still busy: send all the same
		}
		select {
		case <-ch:
		case <-time.After(k.opts.Quiet / 4):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// compare returns the difference of the target's answer and the recorded
// one, nil when there is none.
func (k *checker) compare(a *answer) *Difference {
	recorded := map[string]any{"status": a.rec.Response.Code, "headers": mattering(a.rec.Response.Headers)}
	target := map[string]any{"status": a.status, "headers": mattering(a.header)}
	recorded["body"] = bodyValue(a.rec.Response.Body, nil)
	if a.recorded != nil {
		recorded["body"] = eventsValue(a.recorded, nil)
	}
	target["body"] = bodyValue(string(a.body), k.ids)
	if a.live {
		target["body"] = eventsValue(a.events, k.ids)
	}
	if a.endless {
		target["stream"] = fmt.Sprintf("did not end within %v", k.opts.Wait)
	}
	var r pathReporter
	if cmp.Equal(recorded, target, cmp.Reporter(&r)) {
		return nil
	}
	d := cmp.Diff(recorded, target)
	if len(d) > maxDiff {
		d = d[:maxDiff] + "\n… (the rest of the difference is not shown)"
	}
	return &Difference{Interaction: a.n, Method: a.rec.Request.Method, Path: pathOf(a.rec.Request.URL), Paths: r.paths, Diff: d}
}

// mattering returns the headers of an answer that are compared: its
// Content-Type's media type.
func mattering(h http.Header) map[string]any {
	out := map[string]any{}
	if ct := h.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			mt = ct
		}
		out["Content-Type"] = mt
	}
	return out
}

// bodyValue returns a body as it is compared: JSON decoded, its ids put
// back to the recorded ones (ids non-nil) and its volatile fields masked;
// or its text.
func bodyValue(b string, ids *idMap) any {
	v := decodeJSON(b)
	if v == nil {
		return b
	}
	if ids != nil {
		v = ids.recordedValue(v)
	}
	return replay.MaskVolatile(v)
}

// eventsValue returns a stream's events as they are compared.
func eventsValue(es []sseEvent, ids *idMap) []any {
	out := make([]any, 0, len(es))
	for _, e := range es {
		m := map[string]any{"data": bodyValue(e.data, ids)}
		if e.event != "" {
			m["event"] = e.event
		}
		out = append(out, m)
	}
	return out
}

// decodeJSON returns b decoded as one JSON value (numbers as
// json.Number), nil when it is not.
func decodeJSON(b string) any {
	if strings.TrimSpace(b) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil
	}
	return v
}

// pathOf returns the path and query of a recorded URL.
func pathOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.RequestURI()
}

func isSSE(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// pathReporter collects the JSON paths where two answers differ.
type pathReporter struct {
	steps cmp.Path
	paths []string
}

func (r *pathReporter) PushStep(s cmp.PathStep) { r.steps = append(r.steps, s) }
func (r *pathReporter) PopStep()                { r.steps = r.steps[:len(r.steps)-1] }

func (r *pathReporter) Report(res cmp.Result) {
	if res.Equal() || len(r.paths) >= 20 {
		return
	}
	var b strings.Builder
	for _, s := range r.steps {
		switch s := s.(type) {
		case cmp.MapIndex:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprintf(&b, "%v", s.Key())
		case cmp.SliceIndex:
			i, j := s.SplitKeys()
			switch {
			case i == j:
				fmt.Fprintf(&b, "[%d]", i)
			case j < 0:
				fmt.Fprintf(&b, "[%d] (only recorded)", i)
			case i < 0:
				fmt.Fprintf(&b, "[%d] (only the target's)", j)
			default:
				fmt.Fprintf(&b, "[%d→%d]", i, j)
			}
		}
	}
	p := b.String()
	if p == "" {
		p = "the whole answer"
	}
	r.paths = append(r.paths, p)
}

// sseEvent is one server-sent event: its type (the event field, "" for
// a message) and its data, the data lines joined.
type sseEvent struct{ event, data string }

// splitEvents returns the events of a recorded stream.
func splitEvents(body string) []sseEvent {
	r := newEventReader(io.NopCloser(strings.NewReader(body)), int64(len(body))+1)
	var out []sseEvent
	for {
		e, err := r.next()
		if err != nil {
			return out
		}
		out = append(out, e)
	}
}

// eventReader reads the events of a stream, for comparing them: their
// type and data (id and retry are the stream's bookkeeping), with
// openai-go's event-stream decoder, the one the backends' clients read
// the services' streams with (an event without data is none, for it as
// for them), over at most max bytes.
type eventReader struct {
	d ssestream.Decoder
}

func newEventReader(r io.ReadCloser, max int64) *eventReader {
	body := struct {
		io.Reader
		io.Closer
	}{io.LimitReader(r, max), r}
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: body}
	return &eventReader{d: ssestream.NewDecoder(res)}
}

// next returns the next event, io.EOF at the end of the stream.
func (r *eventReader) next() (sseEvent, error) {
	if !r.d.Next() {
		if err := r.d.Err(); err != nil {
			return sseEvent{}, err
		}
		return sseEvent{}, io.EOF
	}
	e := r.d.Event()
	return sseEvent{event: e.Type, data: strings.TrimSuffix(string(e.Data), "\n")}, nil
}

// idMap maps the ids a recording's answers hold to those the target gave
// at the same places.
type idMap struct {
	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, when an id is learned or a stream ends
	toLive  map[string]string
	toRec   map[string]string
	from    map[string]int // a recorded id → the interaction whose answer first holds it
	ended   map[int]bool   // the interactions whose answer is read
}

func newIDMap(ins []*replay.Interaction) *idMap {
	m := &idMap{changed: make(chan struct{}), toLive: map[string]string{}, toRec: map[string]string{}, from: map[string]int{}, ended: map[int]bool{}}
	for n, in := range ins {
		var vs []any
		if isSSE(in.Response.Headers) {
			for _, e := range splitEvents(in.Response.Body) {
				vs = append(vs, decodeJSON(e.data))
			}
		} else {
			vs = append(vs, decodeJSON(in.Response.Body))
		}
		for _, v := range vs {
			walkIDs(v, v, func(rec, _ string) {
				if _, ok := m.from[rec]; !ok {
					m.from[rec] = n
				}
			})
		}
	}
	return m
}

// isIDField reports whether a JSON field named name holds an id a
// service mints: "id", or a name ending in "_id".
func isIDField(name string) bool { return name == "id" || strings.HasSuffix(name, "_id") }

// walkIDs calls f with each id of rec and the value at the same place in
// live.
func walkIDs(rec, live any, f func(rec, live string)) {
	switch r := rec.(type) {
	case map[string]any:
		l, _ := live.(map[string]any)
		for k, rv := range r {
			lv := l[k]
			if rs, ok := rv.(string); ok && isIDField(k) && rs != "" {
				ls, _ := lv.(string)
				f(rs, ls)
				continue
			}
			walkIDs(rv, lv, f)
		}
	case []any:
		l, _ := live.([]any)
		for i, rv := range r {
			var lv any
			if i < len(l) {
				lv = l[i]
			}
			walkIDs(rv, lv, f)
		}
	}
}

// learn pairs the ids of a recorded answer with the target's.
func (m *idMap) learn(rec, live any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	learned := false
	walkIDs(rec, live, func(r, l string) {
		if l == "" {
			return
		}
		if _, ok := m.toLive[r]; ok {
			return
		}
		if _, ok := m.toRec[l]; ok {
			return // the target gave this id for another: a difference compare shows
		}
		m.toLive[r], m.toRec[l], learned = l, r, true
	})
	if learned {
		m.broadcast()
	}
}

// learnEvents pairs the ids of recorded events with the target's.
func (m *idMap) learnEvents(_ int, rec, live []sseEvent) {
	for i := range min(len(rec), len(live)) {
		m.learn(decodeJSON(rec[i].data), decodeJSON(live[i].data))
	}
}

// streamEnded says interaction n's answer is read: its ids not learned
// will not be.
func (m *idMap) streamEnded(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended[n] = true
	m.broadcast()
}

func (m *idMap) broadcast() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// named returns the recorded ids that request n names (in its URL's path
// segments and query values, or as a string of its JSON body) and that
// an earlier answer holds.
func (m *idMap) named(n int, r replay.Request) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if from, ok := m.from[s]; ok && from < n && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if u, err := url.Parse(r.URL); err == nil {
		for _, seg := range strings.Split(u.Path, "/") {
			add(seg)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	walkStrings(decodeJSON(r.Body), func(s string) string { add(s); return s })
	return out
}

// waitFor returns a channel closed when the map next changes, and the
// first of need that is neither learned nor lost (its answer read
// without it), "" when there is none.
func (m *idMap) waitFor(need []string) (<-chan struct{}, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range need {
		if _, ok := m.toLive[id]; !ok && !m.ended[m.from[id]] {
			return m.changed, id
		}
	}
	return m.changed, ""
}

// liveURL returns u with the recorded ids of its path segments and query
// values replaced with the target's.
func (m *idMap) liveURL(u *url.URL) *url.URL {
	m.mu.Lock()
	defer m.mu.Unlock()
	segs := strings.Split(u.Path, "/")
	for i, s := range segs {
		if l, ok := m.toLive[s]; ok {
			segs[i] = l
		}
	}
	out := *u
	out.Path, out.RawPath = strings.Join(segs, "/"), ""
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k, vs := range q {
			for i, v := range vs {
				if l, ok := m.toLive[v]; ok {
					vs[i], changed = l, true
				}
			}
			q[k] = vs
		}
		if changed {
			out.RawQuery = q.Encode()
		}
	}
	return &out
}

// liveBody returns a JSON body with its recorded ids replaced with the
// target's; another body as it is.
func (m *idMap) liveBody(b string) string {
	v := decodeJSON(b)
	if v == nil {
		return b
	}
	m.mu.Lock()
	changed := false
	v = walkStrings(v, func(s string) string {
		if l, ok := m.toLive[s]; ok && l != s {
			changed = true
			return l
		}
		return s
	})
	m.mu.Unlock()
	if !changed {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return b
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// recordedValue returns a decoded answer of the target with the ids it
// minted put back to the recorded ones.
func (m *idMap) recordedValue(v any) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return walkStrings(v, func(s string) string {
		if r, ok := m.toRec[s]; ok {
			return r
		}
		return s
	})
}

// walkStrings replaces each string of a decoded JSON value (not its
// field names) with f's.
func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		for k, e := range x {
			x[k] = walkStrings(e, f)
		}
	case []any:
		for i, e := range x {
			x[i] = walkStrings(e, f)
		}
	}
	return v
}

// maxDiff bounds the text of a difference.
const maxDiff = 8 << 10

// readAll reads all of r, failing past max bytes.
func readAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("an answer larger than the limit of %d bytes (CheckOptions.MaxBodyBytes)", max)
	}
	return b, nil
}
