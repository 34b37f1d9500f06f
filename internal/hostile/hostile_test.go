package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// A mode is what the proxy does with the requests it is told to spoil.
type mode int32

const (
	pass   mode = iota // forward them
	silent             // forward the stream until the marker event, then only keep-alives
	giant              // forward the stream until the marker event, then one 40 MB event
	stall              // never answer
	huge               // answer 200 with a 2 MiB JSON body
	fields             // forward the stream until the marker event, then only events without data (event:, id:, retry:)
	drip               // answer 200 with a JSON body, one byte every 250 ms
)

// giantEvent is the event a giant stream sends: 40 MB, made once.
var giantEvent = []byte(`data: {"type":"response.output_text.delta","delta":"` + strings.Repeat("x", 40<<20) + "\"}\n\n")

// proxy stands between a backend and a fake. Requests that spoil selects
// are treated as its mode says; the others are forwarded.
type proxy struct {
	*httptest.Server
	mode   atomic.Int32
	spoilt atomic.Int32 // requests spoilt
	up     *url.URL
	rt     http.RoundTripper
	fwd    *httputil.ReverseProxy
	spoil  func(*http.Request) bool
	marker string // the event after which a stream is spoilt
}

func newProxy(t *testing.T, upstream string, rt http.RoundTripper, tls bool, spoil func(*http.Request) bool, marker string) *proxy {
	t.Helper()
	up, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{up: up, rt: rt, spoil: spoil, marker: marker}
	p.fwd = httputil.NewSingleHostReverseProxy(up)
	p.fwd.Transport, p.fwd.FlushInterval = rt, -1
	if tls {
		p.Server = httptest.NewTLSServer(p)
	} else {
		p.Server = httptest.NewServer(p)
	}
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := mode(p.mode.Load())
	if m == pass || !p.spoil(r) {
		p.fwd.ServeHTTP(w, r)
		return
	}
	p.spoilt.Add(1)
	switch m {
	case stall:
		// Read the body first: the server notices the client leaving
		// only once it has.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second): // never hold the test's cleanup longer
		}
		return
	case huge:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"pad":"`+strings.Repeat("y", 2<<20)+`"}`)
		return
	case drip:
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		for _, b := range []byte(`{"pad":"` + strings.Repeat("y", 200) + `"}`) {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(250 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		return
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.up.Scheme, p.up.Host, p.up.Host, ""
	res, err := p.rt.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	f := w.(http.Flusher)
	// Forward whole events until the one that holds the marker.
	br := bufio.NewReader(res.Body)
	var frame bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		frame.Write(line)
		if err != nil {
			w.Write(frame.Bytes())
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			continue
		}
		w.Write(frame.Bytes())
		f.Flush()
		done := bytes.Contains(frame.Bytes(), []byte(p.marker))
		frame.Reset()
		if done {
			break
		}
	}
	if m == giant {
		w.Write(giantEvent)
		f.Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		return
	}
	noise := ": keep-alive\n\n"
	if m == fields {
		noise = "event: ping\nid: 7\nretry: 20\n\n"
	}
	for {
		if _, err := io.WriteString(w, noise); err != nil {
			return
		}
		f.Flush()
		select {
		case <-time.After(10 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// echo is the toolbox of the scripts: one tool that returns its text.
func echo(t *testing.T) *core.Toolbox {
	t.Helper()
	tool, err := core.NewTool("echo", "Repeats the text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func script() *coretest.Script {
	return coretest.Simple("echo", `{"text":"pong"}`, `heard {{output "echo"}}`)
}

// limits are the limits every case runs under: short waits, default sizes
// (but a 1 MiB response, so that the huge body passes it).
type limits struct {
	idle, silence time.Duration
	maxResponse   int
}

var short = limits{idle: 2 * time.Second, silence: 300 * time.Millisecond, maxResponse: 1 << 20}

// A side is one backend behind a proxy.
type side struct {
	name string
	// open starts a fake and a proxy spoiling the requests of kind
	// ("stream" or "request"), and opens the backend through the proxy.
	open func(t *testing.T, tb *core.Toolbox, kind string, l limits) (driver.Backend, *proxy)
}

var sides = []side{{
	name: "openai",
	open: func(t *testing.T, tb *core.Toolbox, kind string, l limits) (driver.Backend, *proxy) {
		srv := openaitest.NewServer(script(), nil)
		t.Cleanup(srv.Close)
		spoil := func(r *http.Request) bool {
			return strings.Contains(r.Header.Get("Accept"), "text/event-stream") == (kind == "stream")
		}
		p := newProxy(t, strings.TrimSuffix(srv.URL, "/v1"), srv.Client().Transport, false, spoil, "agent.session.created")
		b, err := openai.Open(t.Context(), tb, &openai.Options{
			BaseURL: p.URL + "/v1", APIKey: "k", MaxReconnects: -1, Logger: quiet,
			RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
			IdleTimeout:    l.idle, MaxSilence: l.silence, MaxResponseBytes: l.maxResponse,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b, p
	},
}, {
	name: "foundry",
	open: func(t *testing.T, tb *core.Toolbox, kind string, l limits) (driver.Backend, *proxy) {
		srv := foundrytest.NewServer(script(), nil)
		t.Cleanup(srv.Close)
		spoil := func(r *http.Request) bool {
			// The responses made, and the streams that resume them.
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/openai/v1/responses") ||
				r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/openai/v1/responses/") && r.URL.Query().Get("stream") == "true"
		}
		p := newProxy(t, srv.URL, srv.Client().Transport, true, spoil, `"type":"response.`) // after the first event
		transport := foundry.Blocking
		if kind == "stream" {
			transport = foundry.Streaming
		}
		b, err := foundry.Open(t.Context(), tb, &foundry.Options{
			Endpoint:       p.URL + strings.TrimPrefix(srv.ProjectEndpoint(), srv.URL),
			Token:          "t",
			Definition:     &foundry.AgentDefinition{Model: "gpt-4.1-mini"},
			Delivery:       transport,
			HTTPClient:     p.Client(),
			Logger:         quiet,
			RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
			IdleTimeout:    l.idle, MaxSilence: l.silence, MaxResponseBytes: l.maxResponse,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b, p
	},
}}

// TestHostileService runs one turn on each backend against each kind of
// misbehaviour, and checks the error's code and cause, that the wait was
// bounded by the limits (not by the test's deadline), and, where the
// service left a thread, that a resume finishes the turn once the service
// behaves.
func TestHostileService(t *testing.T) {
	tests := []struct {
		name   string
		kind   string // which requests are spoilt
		mode   mode
		limits limits
		code   errcode.Code
		cause  error
		resume bool
	}{
		{"keep-alives only", "stream", silent, short, errcode.DeadlineExceeded, wirelimit.ErrSilent, true},
		// Fields that make no event (no data) are silence too.
		{"events without data", "stream", fields, short, errcode.DeadlineExceeded, wirelimit.ErrSilent, true},
		// Long waits: under the race detector the 16 MiB take longer to
		// arrive than short's silence.
		{"a 40 MB event", "stream", giant, limits{idle: 30 * time.Second, silence: 30 * time.Second}, errcode.ResourceExhausted, wirelimit.ErrTooLarge, true},
		{"a stream never answered", "stream", stall, limits{idle: 300 * time.Millisecond}, errcode.DeadlineExceeded, wirelimit.ErrIdle, false},
		{"a request never answered", "request", stall, limits{idle: 300 * time.Millisecond}, errcode.DeadlineExceeded, wirelimit.ErrIdle, false},
		// A body dripped a byte at a time makes no progress toward a
		// complete response.
		{"a body dripped", "request", drip, limits{idle: 400 * time.Millisecond}, errcode.DeadlineExceeded, wirelimit.ErrIdle, false},
		{"a 2 MiB body", "request", huge, short, errcode.ResourceExhausted, wirelimit.ErrTooLarge, false},
	}
	for _, s := range sides {
		for _, tt := range tests {
			t.Run(s.name+"/"+tt.name, func(t *testing.T) {
				tb := echo(t)
				b, p := s.open(t, tb, tt.kind, tt.limits)
				p.mode.Store(int32(tt.mode))
				r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				res, err := r.Run(ctx, "ping", nil)
				if errcode.Of(err) != tt.code || !errors.Is(err, tt.cause) {
					t.Fatalf("Run = %v (%v), want %v (%v)", err, errcode.Of(err), tt.code, tt.cause)
				}
				if ctx.Err() != nil {
					t.Fatal("the run ended with the test's deadline, not a limit")
				}
				if p.spoilt.Load() == 0 {
					t.Fatal("the proxy spoilt no request")
				}
				if !tt.resume {
					return
				}
				if res == nil || res.Thread == "" {
					t.Fatalf("Run left no thread to resume (result %+v)", res)
				}
				p.mode.Store(int32(pass))
				res, err = r.Resume(ctx, res.Thread, nil)
				if err != nil {
					t.Fatalf("Resume: %v", err)
				}
				if res.Text != "heard pong" {
					t.Errorf("answer = %q, want %q", res.Text, "heard pong")
				}
			})
		}
	}
}

// TestGiantEventMemory reads a 40 MB event on each backend's stream under
// the default event limit (16 MiB) and checks that what the process
// allocated meanwhile, which bounds how far the client's heap grew at its
// peak, stays under 4 × the limit. The event itself is made before, and
// the proxy sends it without copying.
func TestGiantEventMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 40 MB")
	}
	const bound = 4 * wirelimit.DefaultMaxEventBytes
	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			tb := echo(t)
			b, p := s.open(t, tb, "stream", limits{})
			p.mode.Store(int32(giant))
			r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
			var err error
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = r.Run(t.Context(), "ping", nil)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, wirelimit.ErrTooLarge) {
				t.Fatalf("Run = %v, want the event refused as too large", err)
			}
			n := after.TotalAlloc - before.TotalAlloc
			t.Logf("the run allocated %.1f MiB", float64(n)/(1<<20))
			if n > bound {
				t.Errorf("the run allocated %d bytes, want at most %d (4 × the event limit)", n, bound)
			}
		})
	}
}
