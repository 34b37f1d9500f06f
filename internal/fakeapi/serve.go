package fakeapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// NewUnstartedServer returns an httptest server of h, not started, that
// listens on l, or on a free loopback port when l is nil (a fake's
// Options.Listener). The caller starts it (Start or StartTLS).
func NewUnstartedServer(h http.Handler, l net.Listener) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	if l != nil {
		s.Listener.Close()
		s.Listener = l
	}
	return s
}

// Hold waits d (a fault's Delay) before a request is handled, or until
// ctx (the request's) is done. It reports whether d passed; a d of zero
// or less passes at once.
func Hold(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
