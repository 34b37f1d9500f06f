package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/mcptools"
	"github.com/toolrelay/toolrelay/mcptools/mcptest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var transports = mcptest.Transports

// testServer returns a Server reaching a fresh test server (named "test")
// over transport, and the directory it records in.
func testServer(t *testing.T, transport string) (mcptools.Server, string) {
	t.Helper()
	s, dir := mcptest.Over(t, transport)
	s.Name = "test"
	return s, dir
}

// connect connects to servers with tools already in a toolbox, and
// returns the toolbox, the set and a runner over it whose events go to
// events.
func connect(t *testing.T, servers []mcptools.Server, opts *mcptools.Options, own ...*core.Tool) (*core.Toolbox, *mcptools.Set, *core.Runner, *[]core.Event) {
	t.Helper()
	tb, err := core.NewToolbox(own...)
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &mcptools.Options{}
	}
	opts.Logger = quiet
	set, err := mcptools.Connect(t.Context(), tb, servers, opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { set.Close() })
	var events []core.Event
	r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, &coretest.BackendOptions{Tools: tb}), tb, &core.Options{
		Logger:      quiet,
		ToolTimeout: 20 * time.Second,
		OnEvent:     func(e core.Event) { events = append(events, e) },
	})
	t.Cleanup(func() { r.Close() })
	return tb, set, r, &events
}

var callN int

func call(t *testing.T, r *core.Runner, name, args string) core.CallResult {
	t.Helper()
	callN++
	res, err := r.Call(t.Context(), &core.CallRequest{Journaled: true, Call: core.Call{ID: fmt.Sprintf("call_%d", callN), Thread: "t", Name: name, Arguments: json.RawMessage(args)}})
	if err != nil {
		t.Fatalf("Call(%s): %v", name, err)
	}
	return core.CallResult{Output: res.Output, Failed: res.Failed, Error: res.Error, Outcome: res.Outcome}
}

func TestListedAndCalled(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s, dir := testServer(t, tr)
			tb, set, r, _ := connect(t, []mcptools.Server{s}, nil)
			want := slices.Sorted(slices.Values(mcptest.Tools))
			if diff := cmp.Diff(want, set.Tools("test")); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if tool := tb.Lookup("echo"); tool == nil || tool.Server() != "test" || !strings.Contains(string(tool.Parameters()), `"text"`) {
				t.Errorf("echo in the toolbox: %+v", tool)
			}
			tests := []struct {
				name, args string
				want       core.CallResult
			}{
				{"echo", `{"text":"héllo"}`, core.CallResult{Output: core.Output{Text: "héllo"}, Outcome: core.OK}},
				{"add", `{"a":1,"b":2}`, core.CallResult{Output: core.Output{Text: `{"sum":3}`}, Outcome: core.OK}},
				{"fail", `{}`, core.CallResult{Failed: true, Error: "the tool broke", Outcome: core.ToolError}},
				{"picture", `{}`, core.CallResult{Output: core.Output{Parts: []core.Part{core.TextPart("a picture:"), core.ImageData("image/png", mcptest.PNG)}}, Outcome: core.OK}},
				{"echo", `{"text":1}`, core.CallResult{Failed: true, Error: `invalid arguments for tool "echo": text: type: 1 has type "integer", want "string"`, Outcome: core.InvalidArguments}},
			}
			for _, tt := range tests {
				if diff := cmp.Diff(tt.want, call(t, r, tt.name, tt.args)); diff != "" {
					t.Errorf("%s(%s) (-want +got):\n%s", tt.name, tt.args, diff)
				}
			}
			if n := mcptest.Count(dir, "call echo"); n != 1 {
				t.Errorf("the server ran echo %d times, want 1 (invalid arguments never reach it)", n)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ prefix, name, want string }{
		{"", "get_weather", "get_weather"},
		{"fs_", "read.file", "fs_read_file"},
		{"", "ns/tool name", "ns_tool_name"},
		{"", "émoji", "_moji"},
		{"", strings.Repeat("a", 70), strings.Repeat("a", 55) + "_"},
	}
	for _, tt := range tests {
		got := mcptools.ToolName(tt.prefix, tt.name)
		if !strings.HasPrefix(got, tt.want) || len(got) > 64 {
			t.Errorf("ToolName(%q, %q) = %q, want %q (at most 64)", tt.prefix, tt.name, got, tt.want)
		}
	}
	for _, names := range [][2]string{
		{strings.Repeat("a", 70) + "1", strings.Repeat("a", 70) + "2"},
		// The same once their characters are replaced: the hash is of
		// the names as the server gives them.
		{strings.Repeat("a", 70) + ".x", strings.Repeat("a", 70) + "/x"},
	} {
		if a, b := mcptools.ToolName("", names[0]), mcptools.ToolName("", names[1]); a == b || len(a) != 64 || len(b) != 64 {
			t.Errorf("long names %q and %q: want two names of 64", a, b)
		}
	}
}

func TestCollision(t *testing.T) {
	stop, err := core.NewTool("stop", "The program's stop.", func(context.Context, struct{}) (string, error) { return "own", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := testServer(t, "memory")
	tb, _ := core.NewToolbox(stop)
	_, err = mcptools.Connect(t.Context(), tb, []mcptools.Server{s}, &mcptools.Options{Logger: quiet})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), `tool "stop" of MCP server "test" is named "stop" in the toolbox, as is the program's own tool`) {
		t.Errorf("collision with the program's tool: error %v", err)
	}
	if diff := cmp.Diff([]string{"stop"}, tb.Names()); diff != "" {
		t.Errorf("a refused Connect changed the toolbox (-want +got):\n%s", diff)
	}
	s2, _ := testServer(t, "memory")
	s2.Name = "other"
	_, err = mcptools.Connect(t.Context(), tb, []mcptools.Server{{Name: "test", Transport: s.Transport, Deny: []string{"stop"}}, s2}, &mcptools.Options{Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), `tool "add" of MCP server "other" is named "add" in the toolbox, as is tool "add" of MCP server "test"`) {
		t.Errorf("collision between servers: error %v", err)
	}
	s.Prefix, s2.Prefix = "t_", "o_"
	tb, _, r, _ := connect(t, []mcptools.Server{s, s2}, nil, stop)
	if got := call(t, r, "t_stop", `{"x":"now"}`); got.Output.Text != "stopped now" {
		t.Errorf("t_stop = %+v", got)
	}
	if got := call(t, r, "stop", `{}`); got.Output.Text != "own" {
		t.Errorf("the program's stop = %+v", got)
	}
	if tb.Lookup("o_echo") == nil {
		t.Errorf("o_echo missing: %v", tb.Names())
	}
}

func TestAllowDeny(t *testing.T) {
	s, _ := testServer(t, "memory")
	s.Allow = []string{"echo", "c*"}
	s.Deny = []string{"crash"}
	_, set, _, _ := connect(t, []mcptools.Server{s}, nil)
	if diff := cmp.Diff([]string{"change", "count", "echo"}, set.Tools("test")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// TestListChanged: a server's notification of a changed list swaps its
// tools in the toolbox; a call of a tool gone gets a failed result.
func TestListChanged(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s, _ := testServer(t, tr)
			changed := make(chan []string, 4)
			tb, _, r, _ := connect(t, []mcptools.Server{s}, &mcptools.Options{OnChange: func(_ string, names []string) { changed <- names }})
			v := tb.Version()
			if got := call(t, r, "change", `{}`); got.Output.Text != "changed" {
				t.Fatalf("change = %+v", got)
			}
			select {
			case names := <-changed:
				if !slices.Contains(names, "added") || slices.Contains(names, "fail") {
					t.Errorf("tools after the change: %v", names)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no change seen")
			}
			if tb.Version() == v || tb.Lookup("fail") != nil || tb.Lookup("added") == nil {
				t.Errorf("toolbox after the change: %v", tb.Names())
			}
			if got := call(t, r, "added", `{}`); got.Output.Text != "added" {
				t.Errorf("added = %+v", got)
			}
			if got := call(t, r, "fail", `{}`); got.Outcome != core.UnknownTool {
				t.Errorf("a call of a tool gone = %+v, want unknown tool", got)
			}
		})
	}
}

// TestCrash: a server that dies mid-call fails the call cleanly, with an
// Unavailable error in the events, and is started again.
func TestCrash(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s, dir := testServer(t, tr)
			changed := make(chan []string, 4)
			_, _, r, events := connect(t, []mcptools.Server{s}, &mcptools.Options{OnChange: func(_ string, names []string) { changed <- names }})
			got := call(t, r, "crash", `{}`)
			if !got.Failed || !strings.Contains(got.Error, `the MCP server "test"`) {
				t.Errorf("crash = %+v, want a failed result naming the server", got)
			}
			var last core.Event
			for _, e := range *events {
				if e.Kind == core.EventCallFinished {
					last = e
				}
			}
			if code := errcode.Of(last.Err); code != errcode.Unavailable {
				t.Errorf("call finished with error %v (code %v; %#v), want Unavailable", last.Err, code, errors.Unwrap(errors.Unwrap(last.Err)))
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server was not started again")
			}
			if got := call(t, r, "echo", `{"text":"back"}`); got.Output.Text != "back" {
				t.Errorf("echo after the restart = %+v", got)
			}
			if n := mcptest.Count(dir, "call crash"); n != 1 {
				t.Errorf("crash ran %d times, want 1", n)
			}
		})
	}
}

// TestNoRestart: a server that may not be restarted fails its calls,
// saying it is unavailable, without calling anything.
func TestNoRestart(t *testing.T) {
	s, _ := testServer(t, "stdio")
	s.MaxRestarts = -1
	_, set, r, _ := connect(t, []mcptools.Server{s}, nil)
	call(t, r, "crash", `{}`)
	for deadline := time.Now().Add(10 * time.Second); set.Session("test") != nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	got := call(t, r, "echo", `{"text":"x"}`)
	if !got.Failed || !strings.Contains(got.Error, "is unavailable") {
		t.Errorf("echo of a server down = %+v", got)
	}
}

// TestRestartBound: a server is started again at most MaxRestarts times
// in all: with 1, it comes back after its first crash, not after its
// second, and its calls then fail as unavailable.
func TestRestartBound(t *testing.T) {
	s, dir := testServer(t, "stdio")
	s.MaxRestarts = 1
	tb, err := core.NewToolbox()
	if err != nil {
		t.Fatal(err)
	}
	logged := make(chan string, 64)
	changed := make(chan []string, 4)
	set, err := mcptools.Connect(t.Context(), tb, []mcptools.Server{s}, &mcptools.Options{
		Logger: slog.New(recordHandler(func(r slog.Record) {
			select {
			case logged <- r.Message:
			default:
			}
		})),
		OnChange: func(_ string, names []string) { changed <- names },
	})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { set.Close() })
	r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, &coretest.BackendOptions{Tools: tb}), tb, &core.Options{Logger: quiet, ToolTimeout: 20 * time.Second})
	t.Cleanup(func() { r.Close() })
	call(t, r, "crash", `{}`)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server was not started again after its first crash")
	}
	if got := call(t, r, "echo", `{"text":"back"}`); got.Output.Text != "back" {
		t.Fatalf("echo after the restart = %+v", got)
	}
	call(t, r, "crash", `{}`)
	for deadline := time.After(10 * time.Second); ; {
		select {
		case msg := <-logged:
			if !strings.Contains(msg, "was not started again") {
				continue
			}
		case <-changed:
			t.Fatal("the server was started a second time, past MaxRestarts 1")
		case <-deadline:
			t.Fatal("no record that the server was not started again")
		}
		break
	}
	if got := call(t, r, "echo", `{"text":"x"}`); !got.Failed || !strings.Contains(got.Error, "is unavailable") {
		t.Errorf("echo of a server down for good = %+v", got)
	}
	if n := mcptest.Count(dir, "call crash"); n != 2 {
		t.Errorf("crash ran %d times, want 2", n)
	}
}

// TestCancel: a call past its timeout is canceled on the server.
func TestCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s, dir := testServer(t, tr)
			s.Timeout = 300 * time.Millisecond
			_, _, r, _ := connect(t, []mcptools.Server{s}, nil)
			got := call(t, r, "slow", `{}`)
			if got.Outcome != core.TimedOut {
				t.Errorf("slow = %+v, want timed out", got)
			}
			for deadline := time.Now().Add(10 * time.Second); mcptest.Count(dir, "cancelled slow") == 0; {
				if time.Now().After(deadline) {
					t.Fatalf("the server never saw the cancellation: %v", mcptest.Events(dir))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestHints(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hinted"}, nil)
	yes := true
	for _, tool := range []*mcp.Tool{
		{Name: "look", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "put", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		{Name: "drop", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
	} {
		tool.InputSchema = map[string]any{"type": "object"}
		srv.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	}
	for _, trust := range []bool{false, true} {
		tb, _, r, _ := connect(t, []mcptools.Server{{Name: "hinted", Transport: mcptools.InMemory(srv), TrustHints: trust}}, nil)
		if got := tb.Lookup("look").ReadOnly(); got != trust {
			t.Errorf("trust %v: look read-only = %v", trust, got)
		}
		if got := tb.Lookup("put").Idempotent(); got != trust {
			t.Errorf("trust %v: put idempotent = %v", trust, got)
		}
		got := call(t, r, "drop", `{}`)
		if want := trust; got.Failed != want {
			t.Errorf("trust %v: drop = %+v (needs approval: %v)", trust, got, want)
		}
	}
	_, _, r, _ := connect(t, []mcptools.Server{{Name: "hinted", Transport: mcptools.InMemory(srv), Approval: mcptools.ApproveNames("l*")}}, nil)
	if got := call(t, r, "look", `{}`); got.Outcome != core.Denied {
		t.Errorf("look under ApproveNames = %+v, want it to need approval", got)
	}
}

// TestHeaders: headers go to the server's origin, and never over plain
// http to a host that is not loopback (TestRedirect: nor where the server
// redirects to another origin).
func TestHeaders(t *testing.T) {
	dir := t.TempDir()
	srv := mcptest.NewServer(dir, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	_, _, r, _ := connect(t, []mcptools.Server{{Name: "test", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}}, nil)
	if got := call(t, r, "echo", `{"text":"ok"}`); got.Output.Text != "ok" {
		t.Errorf("echo = %+v", got)
	}
	tb, _ := core.NewToolbox()
	_, err := mcptools.Connect(t.Context(), tb, []mcptools.Server{{Name: "test", URL: hs.URL}}, &mcptools.Options{Logger: quiet})
	if errcode.Of(err) != errcode.Unavailable {
		t.Errorf("Connect without the header: %v, want Unavailable", err)
	}
	_, err = mcptools.Connect(t.Context(), tb, []mcptools.Server{{Name: "test", URL: "http://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}}}, nil)
	if errcode.Of(err) != errcode.InvalidArgument || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("headers over plain http: %v, want InvalidArgument without the secret", err)
	}
}

// TestRedirect: a server that redirects the client to another origin, at
// connect or during a call, gets nothing there, not its headers: the
// redirect is refused, with code PermissionDenied and an error saying so
// (as the backends' clients refuse one), and never naming the secret. A
// redirect within the server's origin is followed.
func TestRedirect(t *testing.T) {
	const secret = "Bearer s3cret"
	for _, tt := range []struct {
		name  string
		when  string // "connect" or "call"
		other bool   // redirected to another origin, else within the server's
	}{
		{"connect/other origin", "connect", true},
		{"call/other origin", "call", true},
		{"connect/same origin", "connect", false},
		{"call/same origin", "call", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := mcptest.NewServer(t.TempDir(), nil)
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			var elsewhere []string // what the other origin received
			var mu sync.Mutex
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				elsewhere = append(elsewhere, fmt.Sprintf("%s %s (Authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization")))
				mu.Unlock()
				http.Error(w, "not here", http.StatusNotFound)
			}))
			t.Cleanup(other.Close)
			var redirecting atomic.Bool
			var redirected atomic.Int32
			hs := httptest.NewServer(nil)
			hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != secret {
					http.Error(w, "no", http.StatusUnauthorized)
					return
				}
				if rest, ok := strings.CutPrefix(r.URL.Path, "/moved"); ok {
					r.URL.Path = "/" + strings.TrimPrefix(rest, "/")
				} else if redirecting.Load() && r.Method == http.MethodPost {
					redirected.Add(1)
					to := hs.URL + "/moved" + r.URL.Path
					if tt.other {
						to = other.URL + r.URL.Path
					}
					w.Header().Set("Location", to)
					w.WriteHeader(http.StatusTemporaryRedirect)
					return
				}
				h.ServeHTTP(w, r)
			})
			t.Cleanup(hs.Close)
			s := mcptools.Server{Name: "test", URL: hs.URL, Headers: map[string]string{"Authorization": secret}, MaxRestarts: -1}
			var err error
			if tt.when == "connect" {
				redirecting.Store(true)
				tb, _ := core.NewToolbox()
				var set *mcptools.Set
				set, err = mcptools.Connect(t.Context(), tb, []mcptools.Server{s}, &mcptools.Options{Logger: quiet})
				if set != nil {
					set.Close()
				}
			} else {
				_, _, r, events := connect(t, []mcptools.Server{s}, nil)
				redirecting.Store(true)
				got := call(t, r, "echo", `{"text":"ok"}`)
				if tt.other != got.Failed {
					t.Errorf("echo = %+v, failed %v; want %v", got, got.Failed, tt.other)
				}
				if got.Failed && !strings.Contains(got.Error, "origin") {
					t.Errorf("the model reads %q; want it told the server redirected to another origin", got.Error)
				}
				for _, e := range *events {
					if e.Kind == core.EventCallFinished && e.Err != nil {
						err = e.Err
					}
				}
				// The refusal broke nothing: the session is not dropped as a
				// broken connection's would be, and the next call, not
				// redirected, is answered on it.
				if err != nil && mcptools.Broken(err) {
					t.Errorf("the refused redirect counts as a broken connection, whose session is dropped: %v", err)
				}
				redirecting.Store(false)
				if got := call(t, r, "echo", `{"text":"again"}`); got.Failed || got.Output.Text != "again" {
					t.Errorf("echo after the redirect = %+v, want it answered", got)
				}
			}
			if redirected.Load() == 0 {
				t.Fatalf("%s = %v, and the server redirected no request", tt.when, err)
			}
			if !tt.other {
				if err != nil {
					t.Errorf("%s redirected within the server's origin = %v, want success", tt.when, err)
				}
				return
			}
			t.Logf("error: %v", err)
			if code := errcode.Of(err); code != errcode.PermissionDenied || !strings.Contains(err.Error(), "origin") {
				t.Errorf("%s = %v, of code %v; want PermissionDenied, saying the redirect leaves the origin", tt.when, err, code)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the secret: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range elsewhere {
				t.Errorf("the other origin received %s", r)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		s    mcptools.Server
		want string
	}{
		{"no name", mcptools.Server{Command: "x"}, "without a name"},
		{"two ways", mcptools.Server{Name: "a", Command: "x", URL: "https://h"}, "exactly one"},
		{"no way", mcptools.Server{Name: "a"}, "exactly one"},
		{"bad url", mcptools.Server{Name: "a", URL: "ftp://h"}, "not an http or https URL"},
	}
	for _, tt := range tests {
		tb, _ := core.NewToolbox()
		_, err := mcptools.Connect(t.Context(), tb, []mcptools.Server{tt.s}, nil)
		if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want InvalidArgument %q", tt.name, err, tt.want)
		}
	}
	var e *errcode.Error
	_ = errors.As(nil, &e)
}
