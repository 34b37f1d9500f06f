package mcptools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// MaxTools bounds the tools one server may list; past it, the rest are
// left out (and logged).
const MaxTools = 1000

// listTimeout bounds a listing of a server's tools.
const listTimeout = 30 * time.Second

// Options configure [Connect]. nil is usable.
type Options struct {
	// Logger receives what happens to the servers: restarts, tools left
	// out, list changes, a stdio server's standard error (at Debug). Nil
	// means slog.Default().
	Logger *slog.Logger
	// Client names the program to the servers; nil means "toolrelay".
	Client *mcp.Implementation
	// OnChange, if set, is called after the tools of a server changed in
	// the toolbox (after a tools/list_changed notification or a
	// restart), with the server's name and its tools' names in the
	// toolbox, from the goroutine that made the change.
	OnChange func(server string, tools []string)
}

// A Set holds the connections to MCP servers whose tools are in a
// toolbox. It keeps them up: a server that notifies a change of its tools
// has them listed again and swapped in the toolbox at once (the new set
// applies from the next step of a run), and one whose connection ended is
// started again (bounded by [Server.MaxRestarts]). Close it when done.
type Set struct {
	tools  *core.Toolbox
	logger *slog.Logger
	opts   Options
	conns  []*conn

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu orders the changes of the toolbox the set makes, and guards
	// owner.
	mu sync.Mutex
	// owner maps the names of the servers' tools in the toolbox to their
	// server.
	owner map[string]*conn
}

// errDown is the cause of a call made while its server is not connected.
var errDown = errors.New("the MCP server is not connected")

// Connect connects to servers, lists their tools and adds them to tools,
// where the program's own tools may be. It refuses, with an
// InvalidArgument error naming both and adding nothing, a tool whose name
// (after [ToolName], with the server's prefix) is already taken, by the
// program or by another server; a tool whose schema cannot be used is left
// out, and logged. A server that cannot be reached fails Connect, with
// code Unavailable; one that redirects the client to another origin, with
// code PermissionDenied. opts may be nil.
func Connect(ctx context.Context, tools *core.Toolbox, servers []Server, opts *Options) (*Set, error) {
	if tools == nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "mcptools: Connect with a nil toolbox")
	}
	s := &Set{tools: tools, owner: map[string]*conn{}}
	if opts != nil {
		s.opts = *opts
	}
	s.logger = s.opts.Logger
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.opts.Client == nil {
		s.opts.Client = &mcp.Implementation{Name: "toolrelay", Version: "v1"}
	}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	seen := map[string]bool{}
	for i := range servers {
		srv := servers[i]
		if err := srv.check(); err != nil {
			return nil, err
		}
		if seen[srv.Name] {
			return nil, errcode.Errorf(errcode.InvalidArgument, "mcptools: two MCP servers named %q", srv.Name)
		}
		seen[srv.Name] = true
		s.conns = append(s.conns, &conn{set: s, srv: srv, relisted: make(chan struct{}, 1)})
	}
	type listed struct {
		tools []*core.Tool
		mcp   map[string]string // toolbox name → MCP name
	}
	all := make([]listed, len(s.conns))
	for i, c := range s.conns {
		cs, err := c.dial(ctx)
		if err != nil {
			s.Close()
			return nil, err
		}
		c.setSession(cs)
		ts, byName, err := c.list(ctx, cs)
		if err != nil {
			s.Close()
			return nil, err
		}
		all[i] = listed{ts, byName}
	}
	// Every name is checked before any is added: against the program's
	// tools, and against the servers before.
	taken := map[string]string{} // toolbox name → who holds it, for the error
	for _, n := range tools.Names() {
		taken[n] = "the program's own tool"
	}
	var add []*core.Tool
	for i, c := range s.conns {
		for _, t := range all[i].tools {
			if who, dup := taken[t.Name()]; dup {
				s.Close()
				return nil, errcode.Errorf(errcode.InvalidArgument, "mcptools: tool %q of MCP server %q is named %q in the toolbox, as is %s: set a prefix for the server (Server.Prefix)", all[i].mcp[t.Name()], c.srv.Name, t.Name(), who)
			}
			taken[t.Name()] = fmt.Sprintf("tool %q of MCP server %q", all[i].mcp[t.Name()], c.srv.Name)
			add = append(add, t)
			s.owner[t.Name()] = c
		}
		c.names = names(all[i].tools)
	}
	if err := tools.Add(add...); err != nil {
		s.Close()
		return nil, errcode.Errorf(errcode.InvalidArgument, "mcptools: %v", err)
	}
	for _, c := range s.conns {
		s.wg.Add(1)
		go c.keepUp()
	}
	return s, nil
}

func names(tools []*core.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name()
	}
	return out
}

// Tools returns the names, in the toolbox, of the tools of the server
// named server, sorted; nil for a server the set does not hold.
func (s *Set) Tools(server string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.srv.Name == server {
			return slices.Sorted(slices.Values(c.names))
		}
	}
	return nil
}

// Session returns the SDK's session with the server named server, for
// what this package does not cover (resources, prompts), or nil while
// it is not connected.
func (s *Set) Session(server string) *mcp.ClientSession {
	for _, c := range s.conns {
		if c.srv.Name == server {
			return c.session()
		}
	}
	return nil
}

// Close closes the connections (a stdio server's standard input, then,
// if it has not exited within 2 s, a SIGTERM) and stops restarting them.
// The servers' tools stay in the toolbox; their calls fail, telling the
// model the server is unavailable.
func (s *Set) Close() error {
	s.cancel()
	var errs []error
	for _, c := range s.conns {
		c.mu.Lock()
		c.closed = true
		cs := c.cs
		c.cs = nil
		c.mu.Unlock()
		if cs != nil {
			if err := cs.Close(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("mcptools: close %s: %w", c.srv.Name, err))
			}
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// swap replaces the tools of c in the toolbox with tools: one change of
// the toolbox. A new tool whose name is taken by another server's or the
// program's is left out, and logged.
func (s *Set) swap(c *conn, tools []*core.Tool, mcpNames map[string]string) {
	s.mu.Lock()
	kept := tools[:0:0]
	for _, t := range tools {
		if o := s.owner[t.Name()]; (o != nil && o != c) || (o == nil && s.tools.Lookup(t.Name()) != nil) {
			s.logger.Warn("toolrelay: MCP tool left out: its name is taken; set a prefix for the server", "server", c.srv.Name, "tool", mcpNames[t.Name()], "name", t.Name())
			continue
		}
		kept = append(kept, t)
	}
	err := s.tools.Replace(c.names, kept...)
	if err == nil {
		for _, n := range c.names {
			delete(s.owner, n)
		}
		for _, t := range kept {
			s.owner[t.Name()] = c
		}
		c.names = names(kept)
	}
	now := slices.Clone(c.names)
	s.mu.Unlock()
	if err != nil {
		s.logger.Error("toolrelay: MCP tools not swapped", "server", c.srv.Name, "error", err)
		return
	}
	s.logger.Info("toolrelay: MCP tools listed again", "server", c.srv.Name, "tools", strings.Join(now, ","))
	if s.opts.OnChange != nil {
		s.opts.OnChange(c.srv.Name, now)
	}
}

// A conn is the connection to one server.
type conn struct {
	set *Set
	srv Server

	mu     sync.Mutex
	cs     *mcp.ClientSession // nil while down
	closed bool
	// relisted asks keepUp to list the tools again.
	relisted chan struct{}

	names []string // its tools' names in the toolbox; guarded by set.mu
}

func (c *conn) session() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs
}

func (c *conn) setSession(cs *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cs = cs
}

// dial connects to the server.
func (c *conn) dial(ctx context.Context) (*mcp.ClientSession, error) {
	t, err := c.srv.transport(ctx, func() *lineLog { return &lineLog{logger: c.set.logger, server: c.srv.Name} }, c.drop)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(c.set.opts.Client, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.relisted <- struct{}{}:
			default: // a listing is already asked for
			}
		},
	})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		code := errcode.Unavailable
		if refused(err) {
			code = errcode.PermissionDenied
		}
		return nil, &errcode.Error{Code: code, Op: "mcptools: connect " + c.srv.Name, Err: err}
	}
	return cs, nil
}

// list lists the server's tools and makes theirs, with the MCP name of
// each by its name in the toolbox. Tools the allow- and deny-lists leave
// out, past MaxTools, of a schema that cannot be used, or whose name
// clashes with another of the server's (after ToolName) are left out,
// and logged.
func (c *conn) list(ctx context.Context, cs *mcp.ClientSession) ([]*core.Tool, map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var tools []*core.Tool
	byName := map[string]string{}
	n := 0
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, &errcode.Error{Code: errcode.Unavailable, Op: "mcptools: list tools of " + c.srv.Name, Err: err}
		}
		if !c.srv.offered(t.Name) {
			continue
		}
		if n++; n > MaxTools {
			c.set.logger.Warn("toolrelay: MCP server lists too many tools; the rest are left out", "server", c.srv.Name, "max", MaxTools)
			break
		}
		tool, err := c.tool(t)
		if err != nil {
			c.set.logger.Warn("toolrelay: MCP tool left out", "server", c.srv.Name, "error", err)
			continue
		}
		if other, dup := byName[tool.Name()]; dup {
			c.set.logger.Warn("toolrelay: MCP tool left out: two of the server's tools have one name in the toolbox", "server", c.srv.Name, "tool", t.Name, "other", other, "name", tool.Name())
			continue
		}
		byName[tool.Name()] = t.Name
		tools = append(tools, tool)
	}
	return tools, byName, nil
}

// keepUp lists the tools again when the server says they changed, and
// connects again when the connection ends, until the set is closed.
func (c *conn) keepUp() {
	defer c.set.wg.Done()
	ctx := c.set.ctx
	restarts := 0
	for {
		cs := c.session()
		if cs == nil {
			return
		}
		ended := make(chan struct{})
		go func() { cs.Wait(); close(ended) }()
	serve:
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.relisted:
				c.relist(ctx, cs)
			case <-ended:
				break serve
			}
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.cs = nil
		c.mu.Unlock()
		cs = nil
		for cs == nil {
			if restarts >= c.srv.maxRestarts() {
				c.set.logger.Error("toolrelay: MCP server stopped and was not started again: its calls fail", "server", c.srv.Name, "restarts", restarts)
				return
			}
			restarts++
			wait := min(100*time.Millisecond<<(restarts-1), 5*time.Second)
			c.set.logger.Warn("toolrelay: MCP server stopped; starting it again", "server", c.srv.Name, "restart", restarts, "after", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			var err error
			if cs, err = c.dial(ctx); err != nil {
				c.set.logger.Warn("toolrelay: MCP server did not start again", "server", c.srv.Name, "error", err)
				cs = nil
			}
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			cs.Close()
			return
		}
		c.cs = cs
		c.mu.Unlock()
		c.relist(ctx, cs) // its tools may have changed
	}
}

// relist lists the tools again and swaps them in the toolbox.
func (c *conn) relist(ctx context.Context, cs *mcp.ClientSession) {
	tools, byName, err := c.list(ctx, cs)
	if err != nil {
		if ctx.Err() == nil {
			c.set.logger.Warn("toolrelay: MCP tools not listed again", "server", c.srv.Name, "error", err)
		}
		return
	}
	c.set.swap(c, tools, byName)
}

// drop closes the session, whose connection broke: its calls fail, and
// keepUp connects again.
func (c *conn) drop() {
	if cs := c.session(); cs != nil {
		go cs.Close()
	}
}

// call calls the server's tool named name (its MCP name) with args.
func (c *conn) call(ctx context.Context, name string, args []byte) (any, error) {
	cs := c.session()
	if cs == nil {
		return nil, callError(ctx, c.srv.Name, name, errDown)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: jsonArgs(args)})
	if err != nil && ctx.Err() == nil && broken(err) {
		c.drop()
	}
	if err != nil {
		return nil, callError(ctx, c.srv.Name, name, err)
	}
	return output(res)
}

// jsonArgs passes arguments on as they are, already validated JSON.
type jsonArgs []byte

func (a jsonArgs) MarshalJSON() ([]byte, error) { return a, nil }
