package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// inputs counts the inputs the service received: the runs started.
func (s *testServer) inputs() int {
	n := 0
	for _, r := range s.b.Received() {
		if r.Kind == "input" {
			n++
		}
	}
	return n
}

// TestRefused checks that each request the handler must refuse gets its
// status and a safe message, and runs nothing.
func TestRefused(t *testing.T) {
	s := newTestServer(t, &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{{Text: "Hello."}}},
		{Steps: []coretest.Step{{Text: "Again."}}},
	}}, &Options{MaxBodyBytes: 4 << 10, MaxInputBytes: 100, MaxParts: 2}, nil)
	readAll(t, s.post(t, "ann", userMessage("anns", "hi"))) // ann's chat
	ran := s.inputs()
	many := `{"id":"c2","trigger":"submit-message","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}`
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		who     string
		body    string
		headers map[string]string
		want    int
	}{
		{"another identity's chat", "POST", "/api/chat", "bob", userMessage("anns", "mine now"), nil, http.StatusNotFound},
		{"another identity's answer to approvals", "POST", "/api/chat", "bob", answersMessage("anns", "msg-1", []approvalAnswer{{ID: "call_1", Approved: true}}), nil, http.StatusNotFound},
		{"another identity's stream", "GET", "/api/chat/anns/stream", "bob", "", nil, http.StatusNotFound},
		{"an unknown chat's stream", "GET", "/api/chat/nobodys/stream", "bob", "", nil, http.StatusNotFound},
		{"no identity", "POST", "/api/chat", "", userMessage("c1", "hi"), nil, http.StatusUnauthorized},
		{"a body past the limit", "POST", "/api/chat", "ann", userMessage("c1", strings.Repeat("x", 8<<10)), nil, http.StatusRequestEntityTooLarge},
		{"a message past the limit", "POST", "/api/chat", "ann", userMessage("c1", strings.Repeat("x", 101)), nil, http.StatusRequestEntityTooLarge},
		{"too many parts", "POST", "/api/chat", "ann", many, nil, http.StatusBadRequest},
		{"an empty message", "POST", "/api/chat", "ann", userMessage("c1", " "), nil, http.StatusBadRequest},
		{"a bad chat id", "POST", "/api/chat", "ann", userMessage("../x", "hi"), nil, http.StatusBadRequest},
		{"the chat id ..", "POST", "/api/chat", "ann", userMessage("..", "hi"), nil, http.StatusBadRequest},
		{"the chat id .", "POST", "/api/chat", "ann", userMessage(".", "hi"), nil, http.StatusBadRequest},
		{"a chat id past 128 bytes", "POST", "/api/chat", "ann", userMessage(strings.Repeat("c", 129), "hi"), nil, http.StatusBadRequest},
		{"not JSON", "POST", "/api/chat", "ann", "hello", nil, http.StatusBadRequest},
		{"not said to be JSON", "POST", "/api/chat", "ann", userMessage("c1", "hi"), map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"regenerate", "POST", "/api/chat", "ann", strings.Replace(userMessage("c1", "hi"), "submit-message", "regenerate-message", 1), nil, http.StatusBadRequest},
		{"a cross-origin POST", "POST", "/api/chat", "ann", userMessage("c1", "hi"), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a cross-origin POST without Sec-Fetch-Site", "POST", "/api/chat", "ann", userMessage("c1", "hi"), map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"a cross-site GET", "GET", "/api/chat/anns/stream", "ann", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a reason past the limit", "POST", "/api/chat", "ann", answersMessage("anns", "msg-1", []approvalAnswer{{ID: "call_1", Reason: strings.Repeat("x", 101)}}), nil, http.StatusRequestEntityTooLarge},
		{"answers when nothing awaits", "POST", "/api/chat", "ann", answersMessage("anns", "msg-1", []approvalAnswer{{ID: "call_1", Approved: true}}), nil, http.StatusConflict},
		{"another method", "PUT", "/api/chat", "ann", "", nil, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-User", tc.who)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, b[:n], tc.want)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q, want a plain message", ct)
			}
			if got := s.inputs(); got != ran {
				t.Errorf("the service received %d inputs, want %d: a refused request ran", got, ran)
			}
		})
	}
	// The same POST from a trusted origin is served.
	t.Run("a trusted origin", func(t *testing.T) {
		s := newTestServer(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "Hello."}}}}}, &Options{TrustedOrigins: []string{"https://app.example"}}, nil)
		req, _ := http.NewRequest("POST", s.URL+"/api/chat", strings.NewReader(userMessage("c1", "hi")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-User", "ann")
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(readAll(t, resp)); got != "Hello." {
			t.Errorf("answer %q", got)
		}
	})
}

// TestFlood checks that an identity's requests past MaxInFlight are
// refused (429) and run nothing, while another identity is served.
func TestFlood(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup_order", Arguments: []byte(`{"order":"7"}`)}}},
		{Text: "Found."},
	}}}}
	s := newTestServer(t, script, &Options{MaxInFlight: 2}, nil)
	s.fx.block = make(chan struct{})
	var open []*http.Response
	for i := range 2 {
		resp := s.post(t, "ann", userMessage("c"+string(rune('a'+i)), "look"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		open = append(open, resp)
	}
	waitFor(t, "both runs to start", func() bool { return s.inputs() == 2 })
	for range 20 {
		resp := s.post(t, "ann", userMessage("flood", "look"))
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if got := s.inputs(); got != 2 {
		t.Errorf("the service received %d inputs, want 2", got)
	}
	// bob is not ann.
	bob := s.post(t, "bob", userMessage("bobs", "look"))
	if bob.StatusCode != http.StatusOK {
		t.Errorf("another identity: status %d", bob.StatusCode)
	}
	close(s.fx.block)
	for _, resp := range append(open, bob) {
		if got := texts(readAll(t, resp)); got != "Found." {
			t.Errorf("answer %q", got)
		}
	}
	// Served requests count out: ann may ask again.
	waitFor(t, "ann's requests to end", func() bool {
		return s.h.inFlight.Count("ann") == 0
	})
}

// brokenNotes is a journal whose notes fail, with an error that names a
// secret, as a database driver's error may.
type brokenNotes struct{ *journaldriver.Memory }

const noteSecret = "hunter2"

func (brokenNotes) Note(context.Context, string, string, string) (string, bool, error) {
	return "", false, errors.New("connect to postgres://app:" + noteSecret + "@db/chat: connection refused")
}

// journaled is a Runner whose journal keeps the chats' records.
type journaled struct {
	*echoRunner
	j journaldriver.Journal
}

func (r journaled) Journal() journaldriver.Journal { return r.j }

// lockedBuffer is a log's buffer, written by the handler and read by the
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// TestInternalErrorHidden checks that a request failing on something
// other than the request (here the journal keeping the chats' records)
// gets 500 with a safe message, never the error's text, which goes to the
// log; and that it runs nothing.
func TestInternalErrorHidden(t *testing.T) {
	var log lockedBuffer
	r := journaled{echoRunner: &echoRunner{}, j: brokenNotes{journaldriver.NewMemory()}}
	h := Handler(r, &Options{
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:   slog.New(slog.NewTextHandler(&log, nil)),
	}).(*handler)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &testServer{Server: srv, h: h}
	for _, req := range []struct{ name, method, body string }{
		{"a message", "POST", userMessage("c1", "hi")},
		{"a reconnect", "GET", ""},
	} {
		t.Run(req.name, func(t *testing.T) {
			log.Reset()
			var resp *http.Response
			if req.method == "POST" {
				resp = s.post(t, "ann", req.body)
			} else {
				resp = s.reconnect(t, "ann", "c1")
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			body := string(b)
			if resp.StatusCode != http.StatusInternalServerError || body != "the chat could not be served" {
				t.Errorf("status %d, body %q; want 500, %q", resp.StatusCode, body, "the chat could not be served")
			}
			if strings.Contains(body, noteSecret) || strings.Contains(body, "postgres") {
				t.Errorf("the answer shows the journal's error: %q", body)
			}
			if !strings.Contains(log.String(), "connection refused") {
				t.Errorf("the log does not have the error: %q", log.String())
			}
		})
	}
	if len(r.threads) != 0 {
		t.Errorf("%d runs started, want none", len(r.threads))
	}
}
