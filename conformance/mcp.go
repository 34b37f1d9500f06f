package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/mcptools"
	"github.com/toolrelay/toolrelay/mcptools/mcptest"
)

// The MCP scenarios offer the tools of an MCP server (package mcptest's,
// reached through package mcptools) beside the program's own, over the
// transports named in their names: in memory, stdio (the test binary
// started again as the server) and streamable HTTP (on loopback).
var mcpTransports = mcptest.Transports

func init() {
	type mcpScenario struct {
		name, explanation string
		run               func(e *env, tr string)
		transports        []string
	}
	all, memory := mcpTransports, mcpTransports[:1]
	for _, sc := range []mcpScenario{
		{"MCPListedAndCalled", "an MCP server's tools are offered beside the program's own and called; text, structured and image content reach the model", mcpListedAndCalled, all},
		{"MCPCollision", "an MCP tool named as a program's tool is refused, naming both, and nothing is offered", mcpCollision, memory},
		{"MCPPrefix", "a server's prefix applies to its tools' names, so that one named as a program's tool is offered beside it", mcpPrefix, memory},
		{"MCPListChanged", "a server's tools/list_changed mid-run swaps its tools from the next step: a new tool is offered and called, a call of one gone gets a failed result", mcpListChanged, all},
		{"MCPIsError", "an isError result of an MCP tool is a failed result whose text the model reads, and the run goes on", mcpIsError, memory},
		{"MCPCrash", "an MCP server dying mid-call fails the call cleanly (Unavailable in the events), is started again, and serves the next step", mcpCrash, all},
		{"MCPCancel", "an MCP call past its timeout is canceled on the server (notifications/cancelled) and the model is told it timed out", mcpCancel, all},
		{"MCPApproval", "an MCP tool configured to need approval pauses the run; approved, it runs once on the server", mcpApproval, memory},
		{"MCPJournalReuse", "an MCP call whose result was journaled before the process died is not sent to the server again on the resume", mcpJournalReuse, memory},
	} {
		for _, tr := range sc.transports {
			scenarios = append(scenarios, scenario{sc.name + "/" + tr, sc.explanation, func(e *env) { sc.run(e, tr) }})
		}
	}
}

// mcpServer returns a fresh test server reached over tr, and the
// directory where it records what happened.
func (e *env) mcpServer(tr string) (mcptools.Server, string) {
	e.t.Helper()
	return mcptest.Over(e.t, tr)
}

// mcpRunner connects to servers, with the program's tools own, and makes
// the backend for script. changed receives the servers' changes of
// tools: each time, the server's tools' names in the toolbox.
func (e *env) mcpRunner(script *coretest.Script, opts *core.Options, servers []mcptools.Server, changed chan<- []string, own ...*core.Tool) Loop {
	e.t.Helper()
	if err := script.Check(); err != nil {
		e.t.Fatalf("bad script: %v", err)
	}
	tb, err := core.NewToolbox(own...)
	if err != nil {
		e.t.Fatal(err)
	}
	mo := &mcptools.Options{Logger: quiet}
	if changed != nil {
		mo.OnChange = func(_ string, tools []string) {
			select {
			case changed <- tools:
			default: // nobody waits for this one
			}
		}
	}
	set, err := mcptools.Connect(e.t.Context(), tb, servers, mo)
	if err != nil {
		e.t.Fatalf("mcptools.Connect: %v", err)
	}
	e.t.Cleanup(func() { set.Close() })
	r, err := e.runnerOn(script, opts, tb)
	if err != nil {
		e.t.Fatalf("MakeBackend: %v", err)
	}
	return r
}

// waitChange returns a middleware that, after a call of the tool named
// name, waits for the server's tools to change in the toolbox to a set
// until accepts (or 10 s): the program knows the call changes them, and
// the scenario needs the change in place before the next step. (A server
// may notify a change in several steps, each listed again on its own: a
// tool removed, then one added.)
func waitChange(changed <-chan []string, name string, until func(tools []string) bool) core.Middleware {
	return func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, c *core.Call) (core.CallResult, error) {
			res, err := next(ctx, c)
			if c.Name != name {
				return res, err
			}
			timeout := time.After(10 * time.Second)
			for {
				select {
				case tools := <-changed:
					if until(tools) {
						return res, err
					}
					continue
				case <-timeout:
				}
				return res, err
			}
		}
	}
}

// anyChange accepts every change of tools.
func anyChange([]string) bool { return true }

func ownTool(e *env) *core.Tool {
	return tool(e, "get_user_city", "Gets the user's city.", func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil)
}

func mcpListedAndCalled(e *env, tr string) {
	s, dir := e.mcpServer(tr)
	r := e.mcpRunner(script(
		calls("get_user_city", `{}`, "echo", `{"text":"héllo"}`, "add", `{"a":2,"b":3}`, "picture", `{}`),
		answer("{{result 0}} | {{result 1}} | {{result 2}}"),
	), nil, []mcptools.Server{s}, nil, ownTool(e))
	res := e.run(r, "Use the tools", nil)
	e.wantText(res, `Seattle, WA | héllo | {"sum":5}`)
	got := e.results()
	if len(got) != 4 {
		e.t.Fatalf("results %+v, want 4", got)
	}
	if got[3].Failed || !strings.Contains(got[3].Text()+got[3].Output, "a picture:") {
		e.t.Errorf("picture's result = %+v, want its text (and its image where the wire carries content arrays)", got[3])
	}
	if n := mcptest.Count(dir, "call echo") + mcptest.Count(dir, "call add"); n != 2 {
		e.t.Errorf("the server ran %d calls, want 2", n)
	}
}

func mcpCollision(e *env, _ string) {
	s, _ := e.mcpServer("memory")
	stop := tool(e, "stop", "Stops the program.", func(context.Context, struct{}) (string, error) { return "stopped", nil }, nil)
	tb, err := core.NewToolbox(stop)
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = mcptools.Connect(e.t.Context(), tb, []mcptools.Server{s}, &mcptools.Options{Logger: quiet})
	e.wantCode(err, errcode.InvalidArgument)
	if err != nil && !strings.Contains(err.Error(), `tool "stop" of MCP server "tester"`) || err != nil && !strings.Contains(err.Error(), "the program's own tool") {
		e.t.Errorf("error %q does not name both tools", err)
	}
	if names := tb.Names(); len(names) != 1 {
		e.t.Errorf("toolbox after the refusal: %v, want the program's tool alone", names)
	}
}

func mcpPrefix(e *env, _ string) {
	s, _ := e.mcpServer("memory")
	s.Prefix = "mcp_"
	stop := tool(e, "stop", "Stops the program.", func(context.Context, struct{}) (string, error) { return "own stop", nil }, nil)
	r := e.mcpRunner(script(calls("stop", `{}`, "mcp_stop", `{"x":"the server"}`), answer("{{result 0}} | {{result 1}}")), nil, []mcptools.Server{s}, nil, stop)
	e.wantText(e.run(r, "Stop both", nil), "own stop | stopped the server")
}

func mcpListChanged(e *env, tr string) {
	s, dir := e.mcpServer(tr)
	changed := make(chan []string, 4)
	s.Middleware = []core.Middleware{waitChange(changed, "change", func(tools []string) bool {
		return slices.Contains(tools, "added") && !slices.Contains(tools, "fail")
	})}
	// One call at a time: fail, asked for in the same step as change,
	// is taken up after change removed it.
	r := e.mcpRunner(script(
		calls("change", `{}`, "fail", `{}`),
		calls("added", `{}`),
		answer("{{result 0}}"),
	), &core.Options{Logger: quiet, Concurrency: 1}, []mcptools.Server{s}, changed, ownTool(e))
	res := e.run(r, "Change the tools", nil)
	got := e.results()
	if len(got) != 3 || got[0].Output != "changed" || got[2].Failed || got[2].Output != "added" {
		e.t.Fatalf("results %+v, want change, then added served in the next step", got)
	}
	e.wantFailure(got[1], `unknown tool "fail"`)
	if n := mcptest.Count(dir, "call fail"); n != 0 {
		e.t.Errorf("the server ran fail %d times after it was removed", n)
	}
	e.wantText(res, "added")
}

func mcpIsError(e *env, _ string) {
	s, _ := e.mcpServer("memory")
	r := e.mcpRunner(script(calls("fail", `{}`), answer("after: {{result 0}}")), nil, []mcptools.Server{s}, nil)
	res := e.run(r, "Fail", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results %+v", got)
	}
	e.wantFailure(got[0], "the tool broke")
	if !strings.Contains(res.Text, "the tool broke") {
		e.t.Errorf("answer %q does not show the model read the error", res.Text)
	}
}

func mcpCrash(e *env, tr string) {
	s, dir := e.mcpServer(tr)
	changed := make(chan []string, 4)
	s.Middleware = []core.Middleware{waitChange(changed, "crash", anyChange)}
	var unavailable atomic.Bool
	opts := &core.Options{Logger: quiet, OnEvent: func(ev core.Event) {
		if ev.Kind == core.EventCallFinished && ev.Call.Name == "crash" && errcode.Of(ev.Err) == errcode.Unavailable {
			unavailable.Store(true)
		}
	}}
	r := e.mcpRunner(script(calls("crash", `{}`), calls("echo", `{"text":"back"}`), answer("{{result 0}}")), opts, []mcptools.Server{s}, changed)
	res := e.run(r, "Crash", nil)
	got := e.results()
	if len(got) != 2 {
		e.t.Fatalf("results %+v, want 2", got)
	}
	e.wantFailure(got[0], `the MCP server "tester"`)
	if !unavailable.Load() {
		e.t.Error("no call_finished event of the crash with an Unavailable error")
	}
	if got[1].Failed || got[1].Output != "back" {
		e.t.Errorf("echo after the restart = %+v", got[1])
	}
	e.wantText(res, "back")
	if n := mcptest.Count(dir, "call crash"); n != 1 {
		e.t.Errorf("crash ran %d times, want 1", n)
	}
}

func mcpCancel(e *env, tr string) {
	s, dir := e.mcpServer(tr)
	s.Timeout = 300 * time.Millisecond
	r := e.mcpRunner(script(calls("slow", `{}`), answer("{{result 0}}")), nil, []mcptools.Server{s}, nil)
	e.run(r, "Wait", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results %+v", got)
	}
	e.wantFailure(got[0], "timed out")
	for deadline := time.Now().Add(10 * time.Second); mcptest.Count(dir, "cancelled slow") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the server never saw the cancellation: %v", mcptest.Events(dir))
		}
	}
}

func mcpApproval(e *env, _ string) {
	s, dir := e.mcpServer("memory")
	s.Approval = mcptools.ApproveNames("echo")
	r := e.mcpRunner(script(calls("echo", `{"text":"approved"}`), answer("{{result 0}}")), nil, []mcptools.Server{s}, nil)
	res, err := r.Run(e.t.Context(), "Echo, once approved", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		e.t.Fatalf("Run = %v (pending %d), want ErrAwaitingApproval with one call", err, len(res.Pending))
	}
	if n := mcptest.Count(dir, "call echo"); n != 0 {
		e.t.Fatalf("echo ran %d times before the decision", n)
	}
	if err := r.Decide(e.t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res, "approved")
	if n := mcptest.Count(dir, "call echo"); n != 1 {
		e.t.Errorf("echo ran %d times, want 1", n)
	}
}

func mcpJournalReuse(e *env, _ string) {
	s, dir := e.mcpServer("memory")
	j := journaldriver.NewMemory()
	r := e.mcpRunner(script(calls("count", `{}`), answer("{{result 0}}")), &core.Options{Journal: j, Logger: quiet}, []mcptools.Server{s}, nil)
	e.notDurable(r, "keeps no core journal: its workflow history keeps each call's result, so no process dies with a result that only a journal holds, unsent")
	dying := core.NewRunner(submitFails{e.b}, e.tools, &core.Options{Journal: j, Logger: quiet})
	res, err := dying.Run(e.t.Context(), "Count", nil)
	if !errors.Is(err, errDied) || res == nil || res.Thread == "" {
		e.t.Fatalf("Run = %v, want the failure, with the thread", err)
	}
	if n := mcptest.Count(dir, "call count"); n != 1 || len(e.results()) != 0 {
		e.t.Fatalf("count ran %d times, %d results sent; want 1 and none", n, len(e.results()))
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res, "counted")
	if n := mcptest.Count(dir, "call count"); n != 1 {
		e.t.Errorf("count ran %d times on the server, want 1: the journaled result was not reused", n)
	}
}
