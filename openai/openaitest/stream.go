package openaitest

import (
	"bytes"
	"net/http"
	"sync"
	"time"
)

// A subscriber is one open event stream: a GET .../events subscription or
// a creation stream. Events are queued by emit (under s.mu) and written by
// the stream's handler.
type subscriber struct {
	closeAfter int  // from the request's Fault: close after this many events (<0: before any)
	cutText    int  // from the request's Fault: close after this many text deltas
	creation   bool // a creation stream: it ends after its turn's final idle

	mu     sync.Mutex
	frames [][]byte // SSE frames, shared between subscribers: read only
	ended  bool     // nothing more will be queued
	notify chan struct{}
}

func (s *Server) newSubscriber(f *Fault) *subscriber {
	s.nstream++
	sub := &subscriber{notify: make(chan struct{}, 1)}
	if f != nil {
		sub.closeAfter, sub.cutText = f.CloseAfter, f.CutText
	}
	return sub
}

func (sub *subscriber) push(frame []byte, last bool) {
	sub.mu.Lock()
	if !sub.ended {
		sub.frames = append(sub.frames, frame)
		sub.ended = last
	}
	sub.mu.Unlock()
	select {
	case sub.notify <- struct{}{}:
	default:
	}
}

func (sub *subscriber) end() {
	sub.mu.Lock()
	sub.ended = true
	sub.mu.Unlock()
	select {
	case sub.notify <- struct{}{}:
	default:
	}
}

// take returns the queued frames and whether the stream is over once they
// are written.
func (sub *subscriber) take() ([][]byte, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	f := sub.frames
	sub.frames = nil
	return f, sub.ended
}

// emit sends ev to every stream of the session, giving it a new event id.
// The caller holds s.mu.
func (s *Server) emit(sess *session, ev eventJSON) { s.send(sess, ev, false) }

// emitEnd is emit for the idle event that ends a turn: creation streams
// end after it.
func (s *Server) emitEnd(sess *session, ev eventJSON) { s.send(sess, ev, true) }

func (s *Server) send(sess *session, ev eventJSON, turnEnd bool) {
	ev.EventID = s.newID("evt")
	sess.events = append(sess.events, ev.Type)
	s.webhook(sess, ev.Type, ev.Session)
	if len(sess.subs) == 0 {
		return
	}
	b := ev.frame()
	for sub := range sess.subs {
		sub.push(b, turnEnd && sub.creation)
	}
}

// textDeltaFrame begins the frame of a text delta.
var textDeltaFrame = []byte(`data: {"type":"agent.session.turn.output_text.delta"`)

// frame returns the SSE frame of ev: "data: <JSON>\n\n".
func (ev *eventJSON) frame() []byte {
	b := make([]byte, 0, 1024)
	b = append(b, "data: "...)
	b = ev.appendJSON(b)
	return append(b, "\n\n"...)
}

// endStreams ends every stream of the session. The caller holds s.mu.
func (sess *session) endStreams() {
	for sub := range sess.subs {
		sub.end()
	}
}

// subscribe handles GET agents/sessions/{id}/events: the subscriber is
// registered before the headers are written, so that no event emitted after
// the client saw the response is lost. A subscription to an idle session
// starts with an agent.session.idle reflecting the current state.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request, id string, f *Fault) {
	sess := s.lockSession(w, id)
	if sess == nil {
		return
	}
	sub := s.newSubscriber(f)
	sess.subs[sub] = true
	if sess.status == "idle" {
		ev := eventJSON{Type: "agent.session.idle", EventID: s.newID("evt"), Session: sess.json()}
		sub.push(ev.frame(), false)
	}
	s.mu.Unlock()
	s.serveStream(w, r, sess, sub)
}

// serveStream writes the subscriber's events as SSE frames until the
// stream ends, the client goes away, or the fault closes it.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, sess *session, sub *subscriber) {
	defer func() {
		s.mu.Lock()
		delete(sess.subs, sub)
		s.mu.Unlock()
	}()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	if sub.closeAfter < 0 {
		return
	}
	n := 1
	if s.opts.DuplicateEvents {
		n = 2
	}
	written, deltas := 0, 0
	for {
		// The frames queued together (the events of one request) are
		// flushed together, in one chunk.
		frames, ended := sub.take()
		for _, f := range frames {
			for range n {
				if _, err := w.Write(f); err != nil {
					return
				}
			}
			written++
			if bytes.HasPrefix(f, textDeltaFrame) {
				deltas++
				if pause := s.script.DeltaPause(); pause > 0 {
					if flusher != nil {
						flusher.Flush()
					}
					time.Sleep(pause)
				}
			}
			if sub.closeAfter > 0 && written >= sub.closeAfter || sub.cutText > 0 && deltas >= sub.cutText {
				if flusher != nil {
					flusher.Flush()
				}
				return
			}
		}
		if flusher != nil && len(frames) > 0 {
			flusher.Flush()
		}
		if ended {
			return
		}
		select {
		case <-sub.notify:
		case <-r.Context().Done():
			return
		}
	}
}
