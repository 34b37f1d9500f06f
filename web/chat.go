package web

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// A chat is one chat of the handler's, while a request or a run holds it:
// its record, and the turn writing its answer. The work of a request or a
// run on the chat is its methods'.
type chat struct {
	h    *handler
	id   string
	refs int // requests and runs holding it; guarded by handler.mu

	mu   sync.Mutex
	rec  record
	turn *turn // the answer being written (or just written), if any
}

// A turn is a run writing an assistant message: the pages reading it
// follow its message's log.
type turn struct {
	msg *message
	// changed is closed, and replaced, when the log grows or the turn
	// ends, if a reader waits on it.
	changed chan struct{}
	waiting bool
	ended   bool
	// closing is what every reader writes after the log when the turn
	// ended: the finish chunk and [DONE].
	closing []byte
	readers int
	stop    context.CancelCauseFunc
	idle    *time.Timer // stops the run once no page read it for a while
	// full is set when the message passed MaxMessageBytes: the run is
	// being stopped, and shows nothing more.
	full bool
	// usage is the run's, for the finish chunk.
	usage core.Usage
	// took is closed once the run holds the chat's thread, or ended
	// without; busy is then set (guarded by the chat's mu) if it found
	// another run on the thread, in any process sharing the journal.
	took     chan struct{}
	tookOnce sync.Once
	busy     error
}

// taken marks t's run as holding its thread, or over. It is the runs'
// core.RunOptions.Held.
func (t *turn) taken() { t.tookOnce.Do(func() { close(t.took) }) }

var (
	// errDetached stops a run whose pages all went away.
	errDetached = errors.New("web: no page reads the answer")
	// errTooLong stops a run whose message passed MaxMessageBytes.
	errTooLong = &errcode.Error{Code: errcode.ResourceExhausted, Op: "web", Err: errors.New("the answer is too long to show")}
)

// acquire returns chat id, held until release.
func (h *handler) acquire(id string) *chat {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chats[id]
	if c == nil {
		c = &chat{h: h, id: id}
		h.chats[id] = c
	}
	c.refs++
	return c
}

// release lets go of c; the last one forgets it (the journal keeps it).
func (c *chat) release() {
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.refs--; c.refs == 0 {
		delete(h.chats, c.id)
	}
}

// load reads c's record from the journal for a request, unless a run of
// this process is writing c's answer (the record is then this run's to
// change, and the journal holds its thread). Otherwise another process
// may have served the chat since this one did, even while this one keeps
// its last answer for pages that reconnect: its next message, its pause
// or its interruption is in the journal. c.mu is held.
func (c *chat) load(ctx context.Context) error {
	h := c.h
	if t := c.turn; t != nil && !t.ended {
		return nil
	}
	rec, err := h.store.load(ctx, c.id)
	if err != nil {
		return err
	}
	if rec.Message != nil {
		rec.Message.limit = h.opts.MaxShownBytes
	}
	c.rec = rec
	return nil
}

// post serves a POST: the user's message, or answers to approvals.
func (h *handler) post(w http.ResponseWriter, r *http.Request, who string) {
	req, err := h.parseRequest(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c := h.acquire(req.chat)
	defer c.release()
	c.mu.Lock()
	t, from, err := c.begin(r, who, req)
	c.mu.Unlock()
	if err == nil {
		err = c.wait(t)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c.follow(w, r, t, from)
}

// wait waits for the run of turn t to hold its thread, and returns the
// request's error if another run, in any process, held it. The page is
// answered only then: 200, or 409 with nothing of the chat changed.
func (c *chat) wait(t *turn) error {
	<-t.took
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.busy != nil {
		t.readers--
		return errBusy
	}
	return nil
}

// begin starts the run a POST asks for, and returns its turn, attached to
// the request, and where in its log the request's answer starts. c.mu is
// held.
func (c *chat) begin(r *http.Request, who string, req *turnRequest) (*turn, int, error) {
	h := c.h
	ctx := r.Context()
	if err := c.load(ctx); err != nil {
		return nil, 0, err
	}
	if c.rec.Owner != "" && c.rec.Owner != who {
		return nil, 0, errNoChat
	}
	if c.turn != nil && !c.turn.ended {
		return nil, 0, errBusy
	}
	thread := c.rec.Thread
	if req.decisions != nil {
		if c.rec.Owner == "" {
			return nil, 0, errNoChat
		}
		if c.rec.State != statePaused || c.rec.Message == nil {
			return nil, 0, refuse(http.StatusConflict, "no approval awaits an answer on this chat")
		}
		m := c.rec.Message
		from := len(m.Log)
		// Every answer must be to one of the chat's approvals before any
		// is decided: a request naming another's (or none) decides
		// nothing.
		list, err := h.r.Approvals(ctx, thread)
		if err != nil {
			return nil, 0, err
		}
		ours := make(map[string]bool, len(list))
		for _, a := range list {
			ours[a.Key.Call] = true
		}
		for _, d := range req.decisions {
			if !ours[d.approval] {
				return nil, 0, refuse(http.StatusBadRequest, "no approval of this chat has the id %q", truncate(d.approval, 64))
			}
		}
		for _, d := range req.decisions {
			dec := core.Decision{Approved: d.approved, Reason: d.reason, Actor: who}
			err := h.r.Decide(ctx, thread, d.approval, dec)
			switch code := errcode.Of(err); {
			case err == nil:
				m.decided(d.approval, d.approved, d.reason)
			case code == errcode.FailedPrecondition:
				// Decided before (a page sending its answer again), or too
				// late: the run says which.
			case code == errcode.NotFound:
				return nil, 0, refuse(http.StatusBadRequest, "no approval of this chat has the id %q", truncate(d.approval, 64))
			default:
				return nil, 0, err
			}
		}
		m.resume()
		return c.start(r, m, thread, nil, func(ctx context.Context, ro *core.RunOptions) *core.Stream {
			return h.r.ResumeStream(ctx, thread, ro)
		}), from, nil
	}
	switch c.rec.State {
	case statePaused:
		return nil, 0, refuse(http.StatusConflict, "the last answer awaits approvals: answer them first")
	case stateInterrupted:
		return nil, 0, refuse(http.StatusConflict, "the last answer was interrupted: reconnect to it (GET %s/stream) first", req.chat)
	}
	if c.rec.Owner == "" {
		// A new chat: it is this identity's before anything runs.
		c.rec = record{Owner: who}
		if err := h.store.save(ctx, c.id, &c.rec); err != nil {
			return nil, 0, err
		}
	}
	m := newMessage(h.newID(), h.opts.MaxShownBytes)
	input := req.input
	return c.start(r, m, thread, req.parts, func(ctx context.Context, ro *core.RunOptions) *core.Stream {
		return h.r.Stream(ctx, input, ro)
	}), 0, nil
}

// errNoChat is the answer about a chat that does not exist, or is
// another identity's.
var errNoChat = refuse(http.StatusNotFound, "no such chat")

// errBusy is the answer about a chat whose answer is being written, in
// this process or another.
var errBusy = refuse(http.StatusConflict, "an answer is being written on this chat")

// reconnect serves a GET of {api}/{id}/stream: the answer being written,
// replayed from its start; an interrupted one is resumed.
func (h *handler) reconnect(w http.ResponseWriter, r *http.Request, who, id string) {
	if err := checkChatID(id); err != nil {
		h.fail(w, r, err)
		return
	}
	c := h.acquire(id)
	defer c.release()
	c.mu.Lock()
	t, err := c.rejoin(r, who)
	c.mu.Unlock()
	if err == nil && t != nil {
		err = c.wait(t)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if t == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	c.follow(w, r, t, 0)
}

// rejoin returns the turn of chat c a page reconnects to, attached to it,
// or nil if none is being written. c.mu is held.
func (c *chat) rejoin(r *http.Request, who string) (*turn, error) {
	h := c.h
	if err := c.load(r.Context()); err != nil {
		return nil, err
	}
	if c.rec.Owner == "" || c.rec.Owner != who {
		return nil, errNoChat
	}
	if t := c.turn; t != nil {
		t.attach()
		return t, nil
	}
	if c.rec.State != stateInterrupted || c.rec.Message == nil {
		return nil, nil
	}
	m, thread := c.rec.Message, c.rec.Thread
	m.resume()
	return c.start(r, m, thread, nil, func(ctx context.Context, ro *core.RunOptions) *core.Stream {
		return h.r.ResumeStream(ctx, thread, ro)
	}), nil
}

// start starts a run writing m on chat c (on thread, with parts), and
// returns its turn, attached to the request: wait for its run to hold the
// thread before answering. c.mu is held.
func (c *chat) start(r *http.Request, m *message, thread string, parts []core.Part, stream func(context.Context, *core.RunOptions) *core.Stream) *turn {
	h := c.h
	t := &turn{msg: m, readers: 1, took: make(chan struct{})}
	// A run of the chat's thread that another process is running fails
	// at once, and the page is answered once the run holds the thread.
	ro := h.runOptions(r, thread, parts)
	ro.NoWait, ro.Held = true, t.taken
	// The options of a run the turn resumes: the request's, as the run's.
	again := h.runOptions(r, "", nil)
	again.NoWait, again.Held = true, t.taken
	c.turn = t
	c.rec.State, c.rec.Message = "", nil
	h.mu.Lock()
	c.refs++ // the run's, until its turn is forgotten
	h.mu.Unlock()
	h.turns.Add(1)
	go c.run(detachedContext(r), t, ro, again, stream)
	return t
}

func (t *turn) attach() {
	t.readers++
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
}

// notify wakes the readers waiting for the log to grow.
func (t *turn) notify() {
	if t.waiting {
		close(t.changed)
		t.changed, t.waiting = nil, false
	}
}

// wait returns a channel closed when the log grows or the turn ends.
func (t *turn) wait() <-chan struct{} {
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	t.waiting = true
	return t.changed
}

// run runs the turn's run, writing its events into its message, until it
// ends; its first run has options ro, and a run stopped because its
// readers went away is resumed at once, with options again, if one came
// back meanwhile. A first run that finds another on the thread changes
// nothing.
func (c *chat) run(ctx context.Context, t *turn, ro, again *core.RunOptions, stream func(context.Context, *core.RunOptions) *core.Stream) {
	h := c.h
	defer h.turns.Done()
	for {
		rctx, stop := context.WithCancelCause(ctx)
		c.mu.Lock()
		t.stop = stop
		if t.readers == 0 {
			t.idleSoon(h.opts.ReconnectWindow)
		}
		c.mu.Unlock()
		st := stream(rctx, ro)
		// A runner that names the thread before the service does (the
		// Temporal runner's workflow id) is continued by that name.
		known := st.Thread()
		for ev := range st.Events() {
			if len(ev.Path) > 0 {
				// An event of the run of an agent tool's child
				// (core.Event.Path), not the run's own: the message
				// shows the run's call of the agent tool, its output
				// the child's answer, and the child's approvals as the
				// run's own (under the run's ids for them, which it
				// decides), with their results (see message.child);
				// the child's usage is part of the run's.
				c.showChild(t, &ev)
				continue
			}
			if ev.Kind == core.EventRunFinished {
				c.mu.Lock()
				t.usage.Add(ev.Usage)
				c.mu.Unlock()
				continue
			}
			c.show(ctx, t, &ev, known)
		}
		res, err := st.Result()
		stop(nil)
		if errors.Is(err, core.ErrThreadBusy) && c.refused(t, err) {
			return
		}
		t.taken()
		cause := context.Cause(rctx)
		c.mu.Lock()
		if res != nil && res.Thread != "" {
			c.rec.Thread = res.Thread
		}
		if errors.Is(cause, errDetached) && err != nil {
			if t.readers > 0 {
				// A page came back as the run stopped: go on.
				c.mu.Unlock()
				thread := c.rec.Thread
				t.msg.resume()
				again.Thread, ro = thread, again
				stream = func(ctx context.Context, ro *core.RunOptions) *core.Stream { return h.r.ResumeStream(ctx, thread, ro) }
				continue
			}
			// Saved before the turn is let go: a request of this
			// process then reads the chat's record from the journal.
			c.rec.State, c.rec.Message = stateInterrupted, t.msg
			c.saveRecord(ctx, encode(&c.rec))
			c.turn = nil
			c.mu.Unlock()
			c.release()
			return
		}
		c.mu.Unlock()
		if errors.Is(cause, errTooLong) {
			err = errTooLong
		}
		c.finish(ctx, t, err)
		return
	}
}

// refused ends turn t, whose run found another on the chat's thread
// (err) before holding it, as if it never started: nothing is saved, and
// the chat is read again from the journal by its next request. It reports
// false if the run held the thread before (a resume of the turn found it
// busy): the turn ends with err as any failed run.
func (c *chat) refused(t *turn, err error) bool {
	ok := false
	t.tookOnce.Do(func() {
		ok = true
		c.mu.Lock()
		t.busy, t.ended = err, true
		if c.turn == t {
			c.turn = nil
		}
		c.mu.Unlock()
		close(t.took)
	})
	if ok {
		c.release()
	}
	return ok
}

// show writes event ev into the turn's message; known is the run's thread
// if its runner named it before the service did. c.mu is not held.
func (c *chat) show(ctx context.Context, t *turn, ev *core.Event, known string) {
	h := c.h
	c.mu.Lock()
	if !t.full {
		t.msg.event(ev)
		if len(t.msg.Log) > h.opts.MaxMessageBytes {
			t.full = true
			t.stop(errTooLong)
		}
		t.notify()
	}
	rec := ""
	thread := ev.Thread
	if known != "" {
		thread = known
	}
	if thread != "" && c.rec.Thread == "" {
		// The service made the thread: the chat's next request, in any
		// process, goes on it.
		c.rec.Thread = thread
		rec = encode(&c.rec)
	}
	c.mu.Unlock()
	if rec != "" {
		c.saveRecord(ctx, rec)
	}
}

// showChild shows ev, an event of an agent tool's child run, as far as
// turn t's message shows the child's run (see message.child).
func (c *chat) showChild(t *turn, ev *core.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.full && t.msg.child(ev) {
		t.notify()
	}
}

// finish ends turn t of a run that ended with err: its message's last
// chunks, the chat's state, and the turn kept for pages that reconnect
// within the window.
func (c *chat) finish(ctx context.Context, t *turn, err error) {
	h := c.h
	c.mu.Lock()
	text := ""
	if err != nil && !errors.Is(err, core.ErrAwaitingApproval) {
		text = h.opts.ErrorText(err)
		h.opts.Logger.WarnContext(ctx, "web: the run failed", "chat", c.id, "thread", c.rec.Thread, "error", err)
	}
	reason := t.msg.end(err, text)
	fc := finishChunk{Type: "finish", FinishReason: reason}
	if u := t.usage; u != (core.Usage{}) {
		fc.Metadata = &metadata{Usage: usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}}
	}
	closing := append(appendFrame(nil, fc), doneFrame...)
	if errors.Is(err, core.ErrAwaitingApproval) {
		c.rec.State, c.rec.Message = statePaused, t.msg
	}
	rec := encode(&c.rec)
	c.mu.Unlock()
	// The chat's state is recorded before any page hears the end: the
	// next request, in any process, finds it.
	c.saveRecord(ctx, rec)
	c.mu.Lock()
	t.closing, t.ended = closing, true
	t.notify()
	c.mu.Unlock()
	// Kept a while for a page that reconnects as the answer ends.
	time.AfterFunc(max(h.opts.ReconnectWindow, 0), func() {
		c.mu.Lock()
		if c.turn == t {
			c.turn = nil
		}
		c.mu.Unlock()
		c.release()
	})
}

// saveRecord records c's encoded record, logging a failure.
func (c *chat) saveRecord(ctx context.Context, rec string) {
	h := c.h
	if err := h.store.put(ctx, c.id, rec); err != nil {
		h.opts.Logger.WarnContext(ctx, "web: the chat's record could not be saved", "chat", c.id, "error", err)
	}
}

// idleSoon stops the run after d, unless a page attaches before. c.mu is
// held.
func (t *turn) idleSoon(d time.Duration) {
	if t.ended || t.stop == nil {
		return
	}
	if d < 0 {
		t.stop(errDetached)
		return
	}
	stop := t.stop
	t.idle = time.AfterFunc(d, func() { stop(errDetached) })
}

// detach counts a reader of t out. c.mu is held.
func (h *handler) detach(t *turn) {
	t.readers--
	if t.readers == 0 && !t.ended {
		t.idleSoon(h.opts.ReconnectWindow)
	}
}

// newID returns a new message id.
func newID() string { return "msg-" + rand.Text()[:20] }
