package mcptools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/redact"
)

// DefaultMaxRestarts bounds how many times a server whose connection ended
// (a stdio server that exited) is started again, unless
// [Server.MaxRestarts] says otherwise.
const DefaultMaxRestarts = 3

// A Server is an MCP server to connect to ([Connect]), whose tools a
// program offers to the model; [ToolboxServer] is the other way, serving
// a toolbox. Exactly one of Command, URL and Transport says how to reach
// it.
type Server struct {
	// Name names the server in errors, logs, events and spans. It is
	// required, and unique among the servers of a [Set].
	Name string

	// Command, with Args, starts the server as a child process that
	// speaks MCP on its standard input and output (the stdio transport).
	// The child's environment holds only PATH, HOME, USER, LOGNAME, SHELL,
	// TERM, TMPDIR and LANG from the program's, and Env ("KEY=value"):
	// the program's other variables, its credentials among them, are not
	// passed on. What it writes to standard error goes to the logger, at
	// Debug, a line at a time.
	Command string
	Args    []string
	Env     []string
	// Dir is the child's working directory; empty means the program's.
	Dir string

	// URL reaches the server over the streamable HTTP transport. Headers
	// (such as Authorization) go with every request to URL's origin
	// (scheme, host and port) and nowhere else: a redirect to another
	// origin is refused before anything is sent there (the call, or
	// [Connect], fails with code PermissionDenied; the connection stays),
	// and headers go over plain http only to a loopback host. HTTPClient,
	// if set, sends the requests (its own CheckRedirect sees only the
	// redirects within the origin).
	URL        string
	Headers    map[string]string
	HTTPClient *http.Client

	// Transport, if set, returns a new connection to the server each
	// time it is called (at the start, and again after the connection
	// ended): for servers in the same process ([InMemory]) or reached by
	// a transport of the SDK's that Command and URL do not cover.
	Transport func(ctx context.Context) (mcp.Transport, error)

	// Prefix goes before the names of the server's tools in the toolbox
	// (as given: "weather_" makes "weather_forecast"). Without one, a
	// tool of the same name as another server's or the program's own is
	// refused by [Connect], naming both.
	Prefix string
	// Allow, if not empty, lists the only tools of the server offered to
	// the model; Deny lists tools that are not. Both hold MCP names (not
	// prefixed), or path.Match patterns such as "delete_*".
	Allow, Deny []string

	// TrustHints makes the server's annotations count: a tool with
	// readOnlyHint is ReadOnly, one with idempotentHint is Idempotent
	// (for the journal: see core.ToolOptions), and one whose
	// destructiveHint is true needs a person's approval (unless Approval
	// gives it a rule). Off by default: hints are the server's claims.
	TrustHints bool
	// Approval, if set, returns the approval rule of the server's tool
	// named name (its MCP name), or nil when its calls need none (see
	// core.ToolOptions.Approval; [ApproveNames] makes one from names).
	Approval func(name string) core.ApprovalRule
	// Timeout bounds each call of the server's tools; zero means the
	// runner's (core.Options.ToolTimeout). A call past it is canceled on
	// the server (notifications/cancelled).
	Timeout time.Duration
	// Middleware wraps the calls of the server's tools (see
	// core.ToolOptions.Middleware).
	Middleware []core.Middleware
	// MaxRestarts bounds how many times the server is started (or
	// connected) again after its connection ended; zero means
	// DefaultMaxRestarts, a negative value never. Calls made while it is
	// down fail, telling the model the server is unavailable.
	MaxRestarts int
}

// ApproveNames returns a [Server.Approval] by which calls of the tools
// named by patterns (MCP names, or path.Match patterns) need a person's
// approval, the reason naming the tool and its server.
func ApproveNames(patterns ...string) func(name string) core.ApprovalRule {
	return func(name string) core.ApprovalRule {
		if !matchAny(patterns, name) {
			return nil
		}
		return core.ApprovalAlways(fmt.Sprintf("tool %q of an MCP server is configured to need approval", name))
	}
}

// InMemory returns a [Server.Transport] that connects to srv in this
// process, over the SDK's in-memory transport: each connection is a new
// session of srv.
func InMemory(srv *mcp.Server) func(ctx context.Context) (mcp.Transport, error) {
	return func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

// check reports what makes s unusable, as an InvalidArgument error that
// never repeats a header's value.
func (s *Server) check() error {
	ways := 0
	for _, set := range []bool{s.Command != "", s.URL != "", s.Transport != nil} {
		if set {
			ways++
		}
	}
	switch {
	case s.Name == "":
		return errcode.Errorf(errcode.InvalidArgument, "mcptools: an MCP server without a name")
	case ways != 1:
		return errcode.Errorf(errcode.InvalidArgument, "mcptools: MCP server %q: set exactly one of a command, a URL and a transport", s.Name)
	case s.Timeout < 0:
		return errcode.Errorf(errcode.InvalidArgument, "mcptools: MCP server %q: negative timeout", s.Name)
	case s.URL != "":
		if err := origin.CheckBaseURL(fmt.Sprintf("mcptools: MCP server %q: URL", s.Name), s.URL, len(s.Headers) > 0); err != nil {
			return err
		}
	}
	return nil
}

// maxRestarts returns how many restarts s allows.
func (s *Server) maxRestarts() int {
	switch {
	case s.MaxRestarts < 0:
		return 0
	case s.MaxRestarts == 0:
		return DefaultMaxRestarts
	}
	return s.MaxRestarts
}

// passedEnv names the variables of the program's environment a stdio
// server gets.
var passedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG"}

// transport returns a new transport to s; stderr receives a stdio child's
// standard error; broken is called when a response from an HTTP server
// breaks off (the server died: the SDK would wait for the rest).
func (s *Server) transport(ctx context.Context, stderr func() *lineLog, broken func()) (mcp.Transport, error) {
	switch {
	case s.Transport != nil:
		return s.Transport(ctx)
	case s.Command != "":
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Dir = s.Dir
		cmd.Env = []string{}
		for _, k := range passedEnv {
			if v, ok := os.LookupEnv(k); ok {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		cmd.Env = append(cmd.Env, s.Env...)
		cmd.Stderr = stderr()
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "mcptools: MCP server %q: URL %q does not parse", s.Name, redact.ConnString(s.URL))
	}
	hc := origin.Client(s.HTTPClient)
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &watchTransport{next: base, broken: broken}
	if len(s.Headers) > 0 {
		hc.Transport = &headerTransport{origin: u, headers: s.Headers, next: hc.Transport}
	}
	return &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc}, nil
}

// headerTransport adds headers to the requests sent to one origin, and
// refuses to send them over plain http to a host that is not loopback.
type headerTransport struct {
	origin  *url.URL
	headers map[string]string
	next    http.RoundTripper
}

// errOtherOrigin is the error of a request to another origin than the
// server's, which the headers must not reach.
var errOtherOrigin = errors.New("refused a request to another origin than the MCP server's: its headers go only to its own")

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !origin.Same(req.URL, t.origin) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "mcptools: " + origin.Of(req.URL), Err: errOtherOrigin}
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.next.RoundTrip(req)
}

// watchTransport reports a response body that breaks off: the server
// died, or the connection to it did.
type watchTransport struct {
	next   http.RoundTripper
	broken func()
}

func (t *watchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: req.Context(), broken: t.broken}
	return resp, nil
}

type watchedBody struct {
	io.ReadCloser
	ctx    context.Context
	broken func()
	closed bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !b.closed && b.ctx.Err() == nil {
		b.broken()
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.closed = true
	return b.ReadCloser.Close()
}
