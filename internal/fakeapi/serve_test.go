package fakeapi_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

func TestNewUnstartedServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := fakeapi.NewUnstartedServer(http.NotFoundHandler(), l)
	if s.Listener != l {
		t.Errorf("the server listens on %v, want the listener given (%v)", s.Listener.Addr(), l.Addr())
	}
	s.Start()
	s.Close()

	s = fakeapi.NewUnstartedServer(http.NotFoundHandler(), nil)
	defer s.Close()
	if s.Listener == nil {
		t.Fatal("no listener without one given")
	}
	if host, _, _ := net.SplitHostPort(s.Listener.Addr().String()); !net.ParseIP(host).IsLoopback() {
		t.Errorf("the server listens on %v, want a loopback address", s.Listener.Addr())
	}
}

func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !fakeapi.Hold(t.Context(), 0) || time.Since(start) != 0 {
			t.Errorf("Hold of 0 waited %v or did not pass", time.Since(start))
		}
		if !fakeapi.Hold(t.Context(), time.Second) || time.Since(start) != time.Second {
			t.Errorf("Hold of 1s returned after %v or did not pass", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start = time.Now()
		if fakeapi.Hold(ctx, time.Hour) || time.Since(start) != time.Minute {
			t.Errorf("Hold of 1h under a context done after 1m returned after %v, or passed", time.Since(start))
		}
	})
}
