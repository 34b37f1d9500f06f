package web

import (
	"net/http"
	"time"
)

// follow writes turn t of chat c to a page, as a UI message stream: the
// start of its message, its log from byte from on, as it grows, then its
// closing. A page that goes away (or reads too slowly) is counted out of
// the turn's readers; t was attached to the request.
func (c *chat) follow(w http.ResponseWriter, r *http.Request, t *turn, from int) {
	h := c.h
	c.mu.Lock()
	id := t.msg.ID
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		h.detach(t)
		c.mu.Unlock()
	}()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Connection", "keep-alive")
	hd.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(appendFrame(nil, startChunk{Type: "start", MessageID: id})) {
		return
	}
	keepAlive := time.NewTimer(h.opts.KeepAlive)
	defer keepAlive.Stop()
	off := from
	for {
		c.mu.Lock()
		log := t.msg.Log
		ended, closing := t.ended, t.closing
		var changed <-chan struct{}
		if !ended {
			changed = t.wait()
		}
		c.mu.Unlock()
		if off < len(log) {
			// The log only grows: the bytes read are never written again.
			if !write(log[off:]) {
				return
			}
			off = len(log)
			keepAlive.Reset(h.opts.KeepAlive)
		}
		if ended {
			write(closing)
			return
		}
		select {
		case <-changed:
		case <-keepAlive.C:
			if !write(keepAliveFrame) {
				return
			}
			keepAlive.Reset(h.opts.KeepAlive)
		case <-r.Context().Done():
			return
		}
	}
}
