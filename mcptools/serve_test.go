package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/mcptools"
)

type cityArgs struct {
	City string `json:"city" jsonschema:"a city"`
}

func text(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "|")
}

// TestServe: a toolbox served over MCP (in memory and over streamable
// HTTP) is listed and called by the SDK's client, with the runner's
// validation, journal and events, and follows the toolbox's changes.
func TestServe(t *testing.T) {
	for _, tr := range []string{"memory", "http"} {
		t.Run(tr, func(t *testing.T) {
			tb := served()
			j := journaldriver.NewMemory()
			var events []core.Event
			opts := &mcptools.ServeOptions{Runner: core.Options{Logger: quiet, Journal: j, OnEvent: func(e core.Event) { events = append(events, e) }}}
			changed := make(chan struct{}, 8)
			client := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				changed <- struct{}{}
			}})
			var transport mcp.Transport
			if tr == "memory" {
				ct, st := mcp.NewInMemoryTransports()
				if _, err := mcptools.ToolboxServer(tb, opts).Connect(t.Context(), st, nil); err != nil {
					t.Fatal(err)
				}
				transport = ct
			} else {
				hs := httptest.NewServer(mcptools.Handler(tb, opts))
				t.Cleanup(hs.Close)
				transport = &mcp.StreamableClientTransport{Endpoint: hs.URL}
			}
			cs, err := client.Connect(t.Context(), transport, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			list, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
				// A read-only tool is idempotent too: a client may call it
				// again.
				if tool.Name == "get_weather" && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || !tool.Annotations.IdempotentHint) {
					t.Errorf("get_weather annotations = %+v, want read-only and idempotent", tool.Annotations)
				}
			}
			if diff := cmp.Diff([]string{"get_weather", "leak", "picture", "refund"}, names); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			tests := []struct {
				name, args string
				wantErr    bool
				want       string
			}{
				{"get_weather", `{"city":"Seattle"}`, false, "70f and rainy"},
				{"get_weather", `{"city":"Paris"}`, true, "no weather for Paris"},
				{"get_weather", `{"city":7}`, true, `invalid arguments for tool "get_weather": city: type: 7 has type "integer", want "string"`},
				{"leak", `{}`, true, `tool "leak" failed`},
				{"refund", `{}`, true, `tool "refund" needs a person's approval, which cannot be asked for here (money goes out)`},
				{"picture", `{}`, false, "here:"},
			}
			for _, tt := range tests {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.name, Arguments: json.RawMessage(tt.args)})
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if res.IsError != tt.wantErr || text(res) != tt.want {
					t.Errorf("%s(%s) = isError %v %q, want %v %q", tt.name, tt.args, res.IsError, text(res), tt.wantErr, tt.want)
				}
				if tt.name == "picture" {
					img, ok := res.Content[1].(*mcp.ImageContent)
					if !ok || string(img.Data) != "png!" || img.MIMEType != "image/png" {
						t.Errorf("picture's second content = %#v", res.Content[1])
					}
				}
			}
			finished := 0
			for _, e := range events {
				if e.Kind == core.EventCallFinished {
					finished++
				}
			}
			if finished != 6 {
				t.Errorf("%d call_finished events, want 6", finished)
			}
			// A tool the program adds is offered, and the client told.
			extra, _ := core.NewTool("extra", "", func(context.Context, struct{}) (string, error) { return "more", nil }, nil)
			if err := tb.Add(extra); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "extra", Arguments: map[string]any{}})
			if err != nil || text(res) != "more" {
				t.Errorf("extra = %v, %v", res, err)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Error("no tools/list_changed after the toolbox changed")
			}
		})
	}
}

// TestBothWays: a toolbox served over MCP is a toolbox's MCP server.
func TestBothWays(t *testing.T) {
	srv := mcptools.ToolboxServer(served(), &mcptools.ServeOptions{Runner: core.Options{Logger: quiet}})
	_, _, r, _ := connect(t, []mcptools.Server{{Name: "mirror", Transport: mcptools.InMemory(srv), Prefix: "m_"}}, nil)
	if got := call(t, r, "m_get_weather", `{"city":"Seattle"}`); got.Output.Text != "70f and rainy" {
		t.Errorf("m_get_weather = %+v", got)
	}
	if got := call(t, r, "m_get_weather", `{"city":"Paris"}`); !got.Failed || got.Error != "no weather for Paris" {
		t.Errorf("m_get_weather(Paris) = %+v", got)
	}
}

// TestHandlerOrigin: the served toolbox refuses (403) the requests of
// browser pages of an origin it does not trust, whatever their method,
// before the SDK sees them, and serves requests without an Origin header,
// of a trusted origin, and of its own origin on loopback.
func TestHandlerOrigin(t *testing.T) {
	hs := httptest.NewServer(mcptools.Handler(served(), &mcptools.ServeOptions{
		Runner:         core.Options{Logger: quiet},
		TrustedOrigins: []string{"https://app.example.com", "http://localhost:6274"},
	}))
	t.Cleanup(hs.Close)
	port := hs.URL[strings.LastIndex(hs.URL, ":")+1:]
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		name    string
		method  string
		origins []string // the request's Origin headers
		host    string   // the request's Host, when not the server's
		served  bool
	}{
		{"no Origin", "POST", nil, "", true},
		{"same origin on loopback", "POST", []string{hs.URL}, "", true},
		{"same origin, written otherwise", "POST", []string{"HTTP://127.0.0.1:" + port}, "", true},
		{"trusted", "POST", []string{"https://app.example.com"}, "", true},
		{"trusted, default port written", "POST", []string{"https://APP.example.com:443"}, "", true},
		{"trusted loopback origin", "POST", []string{"http://localhost:6274"}, "", true},
		{"foreign", "POST", []string{"https://evil.example"}, "", false},
		{"foreign GET", "GET", []string{"https://evil.example"}, "", false},
		{"foreign DELETE", "DELETE", []string{"https://evil.example"}, "", false},
		{"foreign OPTIONS", "OPTIONS", []string{"https://evil.example"}, "", false},
		{"trusted host, other scheme", "POST", []string{"http://app.example.com"}, "", false},
		{"another loopback page", "POST", []string{"http://127.0.0.1:1"}, "", false},
		{"rebound name: Origin and Host alike", "POST", []string{"http://evil.example:" + port}, "evil.example:" + port, false},
		{"null", "POST", []string{"null"}, "", false},
		{"malformed", "POST", []string{"http://[::1"}, "", false},
		{"empty", "POST", []string{""}, "", false},
		{"no scheme", "POST", []string{"app.example.com"}, "", false},
		{"with a path", "POST", []string{"https://app.example.com/app"}, "", false},
		{"not http", "POST", []string{"ftp://app.example.com"}, "", false},
		{"two Origin headers", "POST", []string{"https://app.example.com", "https://evil.example"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, hs.URL, strings.NewReader(initialize))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for _, o := range tt.origins {
				req.Header.Add("Origin", o)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			refused := resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), "TrustedOrigins")
			switch {
			case tt.served && resp.StatusCode != http.StatusOK:
				t.Errorf("%s with Origin %q = %d %s, want it served (200)", tt.method, tt.origins, resp.StatusCode, body)
			case !tt.served && !refused:
				t.Errorf("%s with Origin %q = %d %s, want it refused for its origin (403)", tt.method, tt.origins, resp.StatusCode, body)
			}
		})
	}
}

// TestHandlerTrustedOrigins: Handler refuses, by a panic naming the
// setting, a trusted origin that is not one.
func TestHandlerTrustedOrigins(t *testing.T) {
	for _, bad := range []string{"app.example.com", "https://app.example.com/", "https://app.example.com/app", "null", "*", "ftp://app.example.com", "https://user@app.example.com"} {
		t.Run(bad, func(t *testing.T) {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "TrustedOrigins") {
					t.Errorf("Handler with trusted origin %q: panic %v, want one naming TrustedOrigins", bad, p)
				}
			}()
			mcptools.Handler(served(), &mcptools.ServeOptions{TrustedOrigins: []string{bad}})
		})
	}
}

// TestServeQuiet: a toolbox served with no logger of its own (nil
// options) writes nothing to the default logger for its calls, answered
// or failed (their clients are told), even with the default logger
// enabled at Debug: only what goes wrong in it (a tool's panic, at
// Error); a logger given receives every event, at the runner's levels.
func TestServeQuiet(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts func(l *slog.Logger) *mcptools.ServeOptions
		want []string // the records logged, "LEVEL msg outcome"
	}{
		{"default", func(*slog.Logger) *mcptools.ServeOptions { return nil }, []string{
			"ERROR toolrelay: call_finished panicked",
		}},
		{"a logger given", func(l *slog.Logger) *mcptools.ServeOptions {
			return &mcptools.ServeOptions{Runner: core.Options{Logger: l}}
		}, []string{
			"DEBUG toolrelay: call_started ",
			"DEBUG toolrelay: call_finished ok",
			"DEBUG toolrelay: call_started ",
			"INFO toolrelay: call_finished tool_error",
			"DEBUG toolrelay: call_started ",
			"ERROR toolrelay: call_finished panicked",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var records []string
			var mu sync.Mutex
			l := slog.New(recordHandler(func(r slog.Record) {
				if !strings.HasPrefix(r.Message, "toolrelay:") {
					return // the SDK's, when the logger is given
				}
				outcome := ""
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "outcome" {
						outcome = a.Value.String()
					}
					return true
				})
				mu.Lock()
				records = append(records, fmt.Sprintf("%s %s %s", r.Level, r.Message, outcome))
				mu.Unlock()
			}))
			prev := slog.Default()
			slog.SetDefault(l)
			t.Cleanup(func() { slog.SetDefault(prev) })
			tb := served()
			boom, _ := core.NewTool("boom", "", func(context.Context, struct{}) (string, error) { panic("boom") }, nil)
			if err := tb.Add(boom); err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(mcptools.Handler(tb, tt.opts(l)))
			t.Cleanup(hs.Close)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			for _, c := range []struct{ name, args string }{{"get_weather", `{"city":"Seattle"}`}, {"get_weather", `{"city":"Paris"}`}, {"boom", `{}`}} {
				if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(c.args)}); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, records); diff != "" {
				t.Errorf("records logged (-want +got):\n%s", diff)
			}
		})
	}
}

// recordHandler is a slog.Handler enabled at every level, giving each
// record to f.
type recordHandler func(slog.Record)

func (recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// NewServer stays, deprecated, for one release: ToolboxServer's old name.
var _ func(*core.Toolbox, *mcptools.ServeOptions) *mcp.Server = mcptools.NewServer
