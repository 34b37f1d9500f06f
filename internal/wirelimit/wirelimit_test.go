package wirelimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// serve starts a server that answers every request with h, and returns a
// function that sends a GET to it under l.
func serve(t *testing.T, h http.HandlerFunc, l wirelimit.Limits) func(ctx context.Context) (*http.Response, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return nil, err
		}
		return l.Do(req, srv.Client().Do)
	}
}

// sse writes frames as an event stream, flushing each, with pause between
// them, until the client leaves.
func sse(pause time.Duration, frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for _, f := range frames {
			if _, err := io.WriteString(w, f); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				return
			}
		}
	}
}

// events reads the stream of res with openai-go's decoder, as the
// backends do, and returns the data of its events and the error it ended
// with (nil for a clean end).
func events(res *http.Response) ([]string, error) {
	dec := ssestream.NewDecoder(res)
	defer dec.Close()
	var got []string
	for dec.Next() {
		got = append(got, strings.TrimSuffix(string(dec.Event().Data), "\n"))
	}
	return got, dec.Err()
}

func wantLimit(t *testing.T, err error, code errcode.Code, cause error) {
	t.Helper()
	if errcode.Of(err) != code || !errors.Is(err, cause) {
		t.Errorf("err = %v (%v), want %v (%v)", err, errcode.Of(err), code, cause)
	}
}

// TestEventStreams checks events under the size limit on every line ending,
// and a stream whose event, or comment, passes it.
func TestEventStreams(t *testing.T) {
	big := strings.Repeat("x", 2000)
	tests := []struct {
		name   string
		frames []string
		want   []string
		err    error
	}{
		{"LF", []string{"data: a\n\n", ": keep-alive\n\n", "data: b\n\n"}, []string{"a", "b"}, nil},
		{"CRLF", []string{"data: a\r\n\r\n", "data: b\r", "\n\r\n"}, []string{"a", "b"}, nil},
		{"CR", []string{"data: a\r\r", "data: b\r\r"}, nil, nil}, // the SDK splits on LF only: no event, but no limit either
		{"events under the limit", []string{"data: " + big[:1017] + "\n\n", "data: " + big[:1017] + "\n\n"}, []string{big[:1017], big[:1017]}, nil},
		{"an event at the limit", []string{"data: a\n\n", "data: " + big[:1018] + "\n\n"}, []string{"a"}, wirelimit.ErrTooLarge},
		{"an event past the limit", []string{"data: a\n\n", "data: " + big + "\n\n"}, []string{"a"}, wirelimit.ErrTooLarge},
		{"an event of many lines", []string{"data: a\n\n", strings.Repeat("data: "+big[:100]+"\n", 20) + "\n"}, []string{"a"}, wirelimit.ErrTooLarge},
		{"a comment past the limit", []string{": " + big + "\n\n"}, nil, wirelimit.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get := serve(t, sse(0, tt.frames...), wirelimit.Limits{MaxEventBytes: 1024})
			res, err := get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got, err := events(res)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.err == nil {
				if err != nil {
					t.Errorf("err = %v, want none", err)
				}
				return
			}
			wantLimit(t, err, errcode.ResourceExhausted, tt.err)
		})
	}
}

// TestResponseSize checks the bound on a response body, with and without
// a Content-Length, and that a body under it is read whole.
func TestResponseSize(t *testing.T) {
	body := strings.Repeat("y", 5000)
	for _, tt := range []struct {
		name    string
		limit   int64
		chunked bool
		err     error
	}{
		{"under the limit", 5000, false, nil},
		{"no limit", -1, false, nil},
		{"past the limit, length known", 4999, false, wirelimit.ErrTooLarge},
		{"past the limit, chunked", 4999, true, wirelimit.ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			get := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.chunked {
					io.WriteString(w, body[:10])
					w.(http.Flusher).Flush()
					io.WriteString(w, body[10:])
					return
				}
				w.Header().Set("Content-Length", "5000")
				io.WriteString(w, body)
			}, wirelimit.Limits{MaxResponseBytes: tt.limit})
			res, err := get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			res.Body.Close()
			if tt.err == nil {
				if err != nil || string(got) != body {
					t.Errorf("read %d bytes, %v; want the whole body", len(got), err)
				}
				return
			}
			wantLimit(t, err, errcode.ResourceExhausted, tt.err)
		})
	}
}

// TestWaits checks the idle timeout before the headers and within a body
// (stalled, or dripped a byte at a time: no complete response within the
// limit), and the silence of a stream that sends only keep-alives, or
// fields that make no event, or one event a byte at a time (no complete
// event within the limit); a stream whose events keep coming is not cut.
func TestWaits(t *testing.T) {
	const wait = 400 * time.Millisecond // with room for a loaded machine's pauses
	block := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	tests := []struct {
		name  string
		h     http.HandlerFunc
		limit wirelimit.Limits
		err   error // nil: the stream ends cleanly
	}{
		{"no headers", block, wirelimit.Limits{IdleTimeout: wait}, wirelimit.ErrIdle},
		{"stalled body", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "{")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, wirelimit.Limits{IdleTimeout: wait}, wirelimit.ErrIdle},
		{"keep-alives only", sse(wait/10, slicesRepeat(": ping\n\n", 100)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, wirelimit.ErrSilent},
		{"events keep coming", sse(wait/10, slicesRepeat("data: {}\n\n", 30)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, nil},
		// Lines that are no event (no data: the decoder dispatches
		// nothing) are silence, blank line or not.
		{"fields without data", sse(wait/10, slicesRepeat("event: ping\nid: 1\nretry: 20\n", 100)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, wirelimit.ErrSilent},
		{"events without data", sse(wait/10, slicesRepeat("event: ping\nid: 1\n\n", 100)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, wirelimit.ErrSilent},
		{"one event dripped", sse(wait/10, append([]string{"data: {"}, slicesRepeat("x", 100)...)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, wirelimit.ErrSilent},
		{"empty data is an event", sse(wait/10, slicesRepeat("data\n\n", 30)...), wirelimit.Limits{IdleTimeout: wait, MaxSilence: 2 * wait}, nil},
		// A body that is not a stream is complete within the idle
		// timeout, however its bytes drip.
		{"body dripped", func(w http.ResponseWriter, r *http.Request) {
			for range 100 {
				io.WriteString(w, " ")
				w.(http.Flusher).Flush()
				select {
				case <-time.After(wait / 3):
				case <-r.Context().Done():
					return
				}
			}
		}, wirelimit.Limits{IdleTimeout: wait}, wirelimit.ErrIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			get := serve(t, tt.h, tt.limit)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := get(ctx)
			if err == nil {
				_, err = io.ReadAll(res.Body)
				res.Body.Close()
			}
			if tt.err == nil {
				if err != nil {
					t.Errorf("err = %v, want none", err)
				}
				return
			}
			wantLimit(t, err, errcode.DeadlineExceeded, tt.err)
			if ctx.Err() != nil {
				t.Errorf("the wait ended with the test's own deadline, not the limit")
			}
		})
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestNew(t *testing.T) {
	got := wirelimit.New(1, -1, time.Second, -time.Minute)
	want := wirelimit.Limits{MaxResponseBytes: 1, MaxEventBytes: -1, IdleTimeout: time.Second, MaxSilence: -time.Minute}
	if got != want {
		t.Errorf("New = %+v, want %+v", got, want)
	}
}
