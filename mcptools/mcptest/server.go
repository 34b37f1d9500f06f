// Package mcptest holds an MCP server for tests of MCP tools: its tools
// answer, fail, stall, crash and change the server's tool list on
// request, and it records what happened to them in a directory, so that a
// test can read it whether the server runs in the test's process (in
// memory, over streamable HTTP) or as a child process over stdio
// ([Command]).
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of the test server, by MCP name:
//
//	echo     {"text": string} → the text
//	add      {"a": number, "b": number} → structured content {"sum": a+b}
//	fail     {} → an isError result: "the tool broke"
//	picture  {} → a text part and a PNG image part
//	slow     {} → waits until the call is canceled, and records "cancelled slow"
//	crash    {} → the server dies mid-call (see [NewServer])
//	count    {} → "counted" (the record counts the calls)
//	change   {} → removes fail, adds "added" (which answers "added"), and
//	         answers "changed" (the server notifies tools/list_changed)
//	stop     {"x": string} → "stopped x": its name is also a tool of the
//	         program in the tests of collisions
//
// Every call is recorded as "call NAME".
var Tools = []string{"echo", "add", "fail", "picture", "slow", "crash", "count", "change", "stop"}

// PNG is the image the picture tool returns.
var PNG = []byte("\x89PNG\r\n\x1a\nfake")

// NewServer returns the test server; dir is where it records what
// happens ([Events] reads it). crash, called by the crash tool, kills the
// server (a child process exits; an HTTP test server drops its
// connections); nil means ending the calling session. The file it
// records in is opened at the first event and stays open until the
// server is collected or its process ends ([Over] closes it at the end
// of the test).
func NewServer(dir string, crash func(*mcp.CallToolRequest)) *mcp.Server {
	srv, _ := newServer(dir, crash)
	return srv
}

// newServer is [NewServer], with its recorder, for the caller to close.
func newServer(dir string, crash func(*mcp.CallToolRequest)) (*mcp.Server, *recorder) {
	rec := &recorder{path: filepath.Join(dir, "events")}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1"}, nil)
	type textArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes the text."}, func(ctx context.Context, req *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
		rec.add("call echo")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	type addArgs struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	type sum struct {
		Sum float64 `json:"sum"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds two numbers."}, func(ctx context.Context, req *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, sum, error) {
		rec.add("call add")
		return &mcp.CallToolResult{StructuredContent: sum{in.A + in.B}}, sum{in.A + in.B}, nil
	})
	empty := func(name string, h func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "The test tool " + name + ".", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				rec.add("call " + name)
				return h(ctx, req)
			})
	}
	empty("fail", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the tool broke"}}}, nil
	})
	empty("picture", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a picture:"}, &mcp.ImageContent{MIMEType: "image/png", Data: PNG}}}, nil
	})
	empty("slow", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		rec.add("cancelled slow")
		return nil, ctx.Err()
	})
	empty("crash", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if crash != nil {
			crash(req)
		} else {
			go req.Session.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second): // a dead server answers nothing
		}
		return nil, errors.New("crashed")
	})
	empty("count", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil
	})
	empty("change", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv.RemoveTools("fail")
		empty("added", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "changed"}}}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "stop", Description: "Stops x."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		X string `json:"x"`
	}) (*mcp.CallToolResult, any, error) {
		rec.add("call stop")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stopped " + in.X}}}, nil, nil
	})
	return srv, rec
}

// Events returns what the servers recording in dir recorded, in order.
func Events(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "events"))
	if err != nil {
		return nil
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
}

// Count returns how many times dir's events hold ev (such as "call echo").
func Count(dir, ev string) int {
	n := 0
	for _, e := range Events(dir) {
		if e == strings.ReplaceAll(ev, " ", "_") {
			n++
		}
	}
	return n
}

// recorder appends events to a file, which processes share: a line per
// event, each written at once in one write to a file opened for
// appending, so that the lines of several processes do not mix and a
// reader sees every event recorded before. The file is opened at the
// first event and kept open: opening and closing it for each event was
// about 5% of the CPU time of an in-memory call in BenchmarkMCP (P8),
// a cost of the test server, not of MCP.
type recorder struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (r *recorder) add(ev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			panic(fmt.Sprintf("mcptest: record %q: %v", ev, err))
		}
		r.f = f
	}
	if _, err := r.f.WriteString(ev + "\n"); err != nil {
		panic(fmt.Sprintf("mcptest: record %q: %v", ev, err))
	}
}

// close closes the file; a later event opens it again.
func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}
