package mcptools

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// ServeOptions configure a toolbox served over MCP. The zero value (or
// nil) is usable.
type ServeOptions struct {
	// Runner holds what a runner of the toolbox would hold: the journal
	// (a memory journal of the server's own when nil), limits, timeouts,
	// middleware, hooks (package telemetry's), logger and OnEvent. Every
	// call is answered as a step's call of a run is (core.Runner.Call,
	// journaled), under the backend name "mcp", the session as its
	// thread.
	//
	// Unlike a runner's, a nil Runner.Logger keeps the served toolbox
	// quiet: slog.Default() (as it is when the server is made) receives
	// only records at Warn and above (a tool's panic, the journal's
	// failures, a call in doubt), not the calls, answered or failed,
	// whose outcome the client is told. A logger given receives the
	// runner's records at their levels (see core.Options.Logger: failed
	// calls at Info) and the SDK's.
	Runner core.Options
	// Implementation names the server to its clients; nil means
	// "toolrelay".
	Implementation *mcp.Implementation
	// TrustedOrigins are the origins ("https://app.example.com", scheme
	// and host) whose pages may call a toolbox served by [Handler] from a
	// browser. A request of any other page (its Origin header naming
	// another origin, "null", or none that parses) is refused with 403,
	// except a page of the very origin the request was made to on a
	// loopback host. Requests without an Origin header (clients that are
	// not browsers) are not affected.
	TrustedOrigins []string
}

// ToolboxServer returns an MCP server (the SDK's, to run over any of its
// transports) serving a toolbox: it offers the tools of tools, each
// tool's name, description and schema as they are, ReadOnly and
// Idempotent as readOnlyHint and idempotentHint. A tool added to or
// removed from the toolbox is offered or withdrawn at the next request,
// and the clients are told (notifications/tools/list_changed).
//
// A call gets what a model's call would: its arguments bounded and
// validated, the middleware, the tool's timeout and output limit, the
// journal, the hooks and events. A failed call (invalid arguments, a
// handler's error, a timeout…) is a result with isError set whose text is
// what the model would read; a call whose tool needs a person's approval
// is refused so (no one can be asked over MCP). Text goes as text
// content, images as image content (a data URL's bytes) or as a resource
// link (a URL), files as embedded resources (their bytes) or resource
// links; a file the service holds (a file id) as a text naming it.
// opts may be nil.
func ToolboxServer(tools *core.Toolbox, opts *ServeOptions) *mcp.Server {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	impl := o.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "toolrelay", Version: "v1"}
	}
	sdkLogger := o.Runner.Logger // nil: the SDK logs nothing
	if o.Runner.Logger == nil {
		o.Runner.Logger = slog.New(warnings{slog.Default().Handler()})
	}
	e := &exported{tools: tools, runner: core.NewRunner(servedBackend{}, tools, &o.Runner), offered: map[string]bool{}}
	e.srv = mcp.NewServer(impl, &mcp.ServerOptions{Logger: sdkLogger})
	e.sync()
	e.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "tools/") {
				e.sync()
			}
			return next(ctx, method, req)
		}
	})
	return e.srv
}

// NewServer is [ToolboxServer]: it serves a toolbox, and does not make a
// [Server] (an MCP server to connect to).
//
// Deprecated: use ToolboxServer.
func NewServer(tools *core.Toolbox, opts *ServeOptions) *mcp.Server {
	return ToolboxServer(tools, opts)
}

// ServeStdio serves tools over MCP on the process's standard input and
// output until ctx ends or the client closes the connection.
func ServeStdio(ctx context.Context, tools *core.Toolbox, opts *ServeOptions) error {
	return ToolboxServer(tools, opts).Run(ctx, &mcp.StdioTransport{})
}

// Handler returns an http.Handler serving tools over MCP's streamable
// HTTP transport (the SDK's, with its limits). As MCP asks of servers,
// against DNS rebinding, every request is checked before it is served:
//
//   - its Origin header, when it has one (a browser's page): the origin
//     must be one of opts.TrustedOrigins, or the origin the request was
//     made to on a loopback host; another, "null" or a malformed one is
//     refused with 403. A request without one (a client that is not a
//     browser) passes.
//   - its Host, by the SDK: a request that reached a loopback address
//     naming a host that is not loopback is refused with 403.
//
// The Host is not otherwise checked, nor is the caller authenticated:
// serve on a loopback address, or put authentication in front. Handler
// panics if an entry of opts.TrustedOrigins is not an http or https
// origin. opts may be nil.
func Handler(tools *core.Toolbox, opts *ServeOptions) http.Handler {
	var trusted []string
	if opts != nil {
		trusted = opts.TrustedOrigins
	}
	check := newOriginCheck(trusted)
	srv := ToolboxServer(tools, opts)
	check.next = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return check
}

// warnings passes on the records of its handler's at Warn and above: the
// logger of a served toolbox given none.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	return w.Handler.Handle(ctx, r)
}
func (w warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(attrs)}
}
func (w warnings) WithGroup(name string) slog.Handler { return warnings{w.Handler.WithGroup(name)} }

// exported is a toolbox served over MCP.
type exported struct {
	tools  *core.Toolbox
	runner *core.Runner
	srv    *mcp.Server

	mu      sync.Mutex
	version uint64
	synced  bool
	offered map[string]bool
	threads sync.Map // *mcp.ServerSession → its thread, for sessions without an id
}

// sync offers the toolbox's tools as they are now.
func (e *exported) sync() {
	e.mu.Lock()
	defer e.mu.Unlock()
	tools, v := e.tools.Snapshot()
	if e.synced && v == e.version {
		return
	}
	e.synced, e.version = true, v
	now := make(map[string]bool, len(tools))
	var gone []string
	for _, t := range tools {
		now[t.Name()] = true
	}
	for n := range e.offered {
		if !now[n] {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		e.srv.RemoveTools(gone...)
	}
	for _, t := range tools {
		e.srv.AddTool(mcpTool(t), e.handler(t.Name()))
	}
	e.offered = now
}

// mcpTool describes t to MCP clients.
func mcpTool(t *core.Tool) *mcp.Tool {
	schema := json.RawMessage(t.Parameters())
	var m map[string]any
	if json.Unmarshal(schema, &m) == nil && m["type"] == nil {
		m["type"] = "object"
		schema, _ = json.Marshal(m)
	}
	mt := &mcp.Tool{Name: t.Name(), Description: t.Description(), InputSchema: schema}
	if t.ReadOnly() || t.Idempotent() {
		mt.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly(), IdempotentHint: t.Idempotent() || t.ReadOnly()}
	}
	return mt
}

// handler answers the calls of the tool named name.
func (e *exported) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := core.Call{ID: "mcp_" + randomID(), Thread: e.thread(req.Session), Name: name, Arguments: req.Params.Arguments}
		if len(call.Arguments) == 0 {
			call.Arguments = json.RawMessage(`{}`)
		}
		tr, err := e.runner.Call(ctx, &core.CallRequest{Call: call, Journaled: true})
		if err != nil {
			return nil, err
		}
		if tr.Failed {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: tr.Error}}}, nil
		}
		return served(tr.Output), nil
	}
}

// thread returns the journal's thread of a session: its id, or one of
// its own for a session without (stdio).
func (e *exported) thread(ss *mcp.ServerSession) string {
	if ss == nil {
		return "mcp"
	}
	if id := ss.ID(); id != "" {
		return id
	}
	if t, ok := e.threads.Load(ss); ok {
		return t.(string)
	}
	t, _ := e.threads.LoadOrStore(ss, "mcp_session_"+randomID())
	return t.(string)
}

func randomID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// served maps an output to a tool result's content.
func served(o core.Output) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	switch {
	case o.Null:
	case o.Parts == nil:
		res.Content = append(res.Content, &mcp.TextContent{Text: o.Text})
		if t := strings.TrimSpace(o.Text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
			res.StructuredContent = json.RawMessage(t)
		}
	default:
		for _, p := range o.Parts {
			res.Content = append(res.Content, servedPart(p))
		}
	}
	return res
}

func servedPart(p core.Part) mcp.Content {
	switch p.Type {
	case core.PartText:
		return &mcp.TextContent{Text: p.Text}
	case core.PartImage:
		if mt, data, ok := dataURL(p.URL); ok {
			return &mcp.ImageContent{MIMEType: mt, Data: data}
		}
		if p.URL != "" {
			return &mcp.ResourceLink{URI: p.URL, Name: "image"}
		}
	case core.PartFile:
		if mt, data, ok := dataURL(p.Data); ok {
			return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///" + p.Filename, MIMEType: mt, Blob: data}}
		}
		if p.URL != "" {
			return &mcp.ResourceLink{URI: p.URL, Name: p.Filename}
		}
	}
	return &mcp.TextContent{Text: fmt.Sprintf("[a %s held by the service: %s]", p.Type, p.FileID)}
}

// dataURL decodes a base64 data: URL.
func dataURL(u string) (mediaType string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	mediaType, isB64 := strings.CutSuffix(meta, ";base64")
	if !found || !isB64 {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	return mediaType, data, err == nil
}

// servedBackend is the backend of a served toolbox's runner: it names
// the journal's entries "mcp", and runs no model.
type servedBackend struct{}

var errNoModel = &errcode.Error{Code: errcode.Unimplemented, Op: "mcptools: served toolbox", Err: fmt.Errorf("a toolbox served over MCP runs no model")}

func (servedBackend) Name() string { return "mcp" }
func (servedBackend) Start(context.Context, *driver.StartRequest) (*driver.Step, error) {
	return nil, errNoModel
}
func (servedBackend) Submit(context.Context, *driver.SubmitRequest) (*driver.Step, error) {
	return nil, errNoModel
}
func (servedBackend) Resume(context.Context, string) (*driver.Step, error) { return nil, errNoModel }
func (servedBackend) ErrorCode(err error) errcode.Code                     { return errcode.Of(err) }
func (servedBackend) Close() error                                         { return nil }
