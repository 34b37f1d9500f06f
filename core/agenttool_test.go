package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// agentEnv is a parent runner whose one tool, ask_refunds, is an agent
// tool over a child runner whose tool refund counts its runs; both on
// in-memory backends of their own, over one journal.
type agentEnv struct {
	t               *testing.T
	journal         *journaldriver.Memory
	jr              journaldriver.Journal // the runners' journal, if not journal
	parentB, childB *coretest.Backend
	parentD, childD driver.Backend // the backends the runners use (metered, or the same)
	refunds         atomic.Int32
	refund          func(ctx context.Context, in refundArgs) (string, error)
	approval        core.ApprovalRule
	verify          func(context.Context, core.Call) (any, bool, error)
	agentOpts       *core.AgentToolOptions
	parentOpts      core.Options
	childOpts       core.Options
	parent, child   *core.Runner
	mu              sync.Mutex
	events          []core.Event // the parent's OnEvent's
}

// childScript: the child refunds order 7 for amount, then answers with
// the refund's output.
func childScript(amount string) *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":` + amount + `}`)}}},
		{Text: `child: {{output "refund"}}`},
	}}}}
}

// parentScript: the parent asks the refund agent, then answers with its
// answer.
func parentScript() *coretest.Script {
	return coretest.Simple("ask_refunds", `{"input":"refund order 7"}`, `parent: {{output "ask_refunds"}}`)
}

func newAgentEnv(t *testing.T, parent, child *coretest.Script) *agentEnv {
	t.Helper()
	e := &agentEnv{t: t, journal: journaldriver.NewMemory()}
	e.parentB = coretest.NewBackend(parent, &coretest.BackendOptions{Name: "parent"})
	e.childB = coretest.NewBackend(child, &coretest.BackendOptions{Name: "child"})
	e.parentD, e.childD = e.parentB, e.childB
	e.refund = func(context.Context, refundArgs) (string, error) { return "refunded", nil }
	return e
}

// open makes a runner pair over the env's backends and journal, as a
// process of the program does.
func (e *agentEnv) open() {
	t := e.t
	t.Helper()
	refund := mustTool(t)(core.NewTool("refund", "Refund an order.", func(ctx context.Context, in refundArgs) (string, error) {
		e.refunds.Add(1)
		return e.refund(ctx, in)
	}, &core.ToolOptions{Approval: e.approval, Verify: e.verify}))
	childTools, err := core.NewToolbox(refund)
	if err != nil {
		t.Fatal(err)
	}
	var j journaldriver.Journal = e.journal
	if e.jr != nil {
		j = e.jr
	}
	co := e.childOpts
	co.Logger, co.Journal = quiet, j
	e.child = core.NewRunner(e.childD, childTools, &co)
	agent, err := core.NewAgentTool("ask_refunds", "Ask the refund agent.", e.child, e.agentOpts)
	if err != nil {
		t.Fatal(err)
	}
	parentTools, err := core.NewToolbox(agent)
	if err != nil {
		t.Fatal(err)
	}
	po := e.parentOpts
	po.Logger, po.Journal = quiet, j
	po.OnEvent = func(ev core.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}
	e.parent = core.NewRunner(e.parentD, parentTools, &po)
}

// inputs counts the user inputs (turns started) the child's backend got.
func (e *agentEnv) inputs() int {
	n := 0
	for _, r := range e.childB.Received() {
		if r.Kind == "input" {
			n++
		}
	}
	return n
}

// relayed returns the kinds of the child's events the parent's OnEvent
// got, with the id of the parent's call they came through.
func (e *agentEnv) relayed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		if len(ev.Path) > 0 {
			out = append(out, ev.Path[0].Name+">"+ev.Kind.String())
		}
	}
	return out
}

// TestAgentToolAnswer: the child's answer is the call's result, its input
// the call's arguments (the default {"input"} or a schema of the
// program's), one child turn per call; the parent's OnEvent gets the
// child's events with the path of the parent's call.
func TestAgentToolAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       *core.AgentToolOptions
		args       string
		wantInput  string
		wantParams string
	}{
		{name: "default", args: `{"input":"refund order 7"}`, wantInput: "refund order 7",
			wantParams: `{"type":"object","properties":{"input":{"type":"string","description":"what to ask the agent"}},"required":["input"],"additionalProperties":false}`},
		{name: "schema", opts: &core.AgentToolOptions{Parameters: []byte(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`)},
			args: `{"order":"7"}`, wantInput: `{"order":"7"}`,
			wantParams: `{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t, coretest.Simple("ask_refunds", tc.args, `parent: {{output "ask_refunds"}}`), childScript("50"))
			e.agentOpts = tc.opts
			e.open()
			if got := string(e.parent.Toolbox().Lookup("ask_refunds").Parameters()); got != tc.wantParams {
				t.Errorf("Parameters = %s, want %s", got, tc.wantParams)
			}
			res, err := e.parent.Run(t.Context(), "go", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "parent: child: refunded" {
				t.Errorf("Text = %q, want the child's answer inside the parent's", res.Text)
			}
			if n := e.refunds.Load(); n != 1 || e.inputs() != 1 {
				t.Errorf("refunds %d, child turns %d; want 1 and 1", n, e.inputs())
			}
			if got := e.childB.Received()[0].Input; got != tc.wantInput {
				t.Errorf("child's input = %q, want %q", got, tc.wantInput)
			}
			want := []string{"ask_refunds>step_started", "ask_refunds>call_started", "ask_refunds>call_finished", "ask_refunds>results_submitted", "ask_refunds>run_finished"}
			if diff := cmp.Diff(want, e.relayed()); diff != "" {
				t.Errorf("the child's events at the parent (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentToolStream: a streamed parent's reader gets the child's
// events, text included, with the path of the parent's call.
func TestAgentToolStream(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("50"))
	e.open()
	s := e.parent.Stream(t.Context(), "go", nil)
	var child []string
	for ev, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Path) == 1 && ev.Path[0].Name == "ask_refunds" && (ev.Kind == core.EventTextDone || ev.Kind == core.EventCallFinished) {
			child = append(child, ev.Kind.String()+":"+ev.Text)
		}
	}
	if _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"call_finished:", "text_done:child: refunded"}, child); diff != "" {
		t.Errorf("the child's events in the parent's stream (-want +got):\n%s", diff)
	}
}

// TestAgentToolApproval: a child's call that needs approval pauses the
// parent; the parent's Approvals lists it, the parent's Decide decides it,
// and the parent's Resume resumes both, the child's turn the same one.
func TestAgentToolApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		d        core.Decision
		wantText string
		refunds  int32
	}{
		{name: "approve", d: core.Decision{Approved: true, Actor: "ann"}, wantText: "parent: child: refunded", refunds: 1},
		{name: "deny", d: core.Decision{Reason: "too much", Actor: "ann"}, wantText: "parent: child: a person denied this call: too much", refunds: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t, parentScript(), childScript("150"))
			e.approval = core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) { return in.Amount > 100, "over 100" })
			e.open()
			res, err := e.parent.Run(t.Context(), "go", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run error = %v, want ErrAwaitingApproval", err)
			}
			if len(res.Pending) != 1 || res.Pending[0].Tool != "refund" || res.Pending[0].Why != "over 100" || res.Pending[0].Key.Backend != "parent" {
				t.Fatalf("Pending = %+v, want the child's refund, on the parent's thread", res.Pending)
			}
			id := res.Pending[0].Key.Call
			list, err := e.parent.Approvals(t.Context(), res.Thread)
			if err != nil || len(list) != 1 || list[0].Key.Call != id {
				t.Fatalf("parent's Approvals = %+v, %v; want the child's refund", list, err)
			}
			if err := e.parent.Decide(t.Context(), res.Thread, id, core.Decision{Approved: true, Arguments: []byte(`{"order":"7","amount":1}`)}); errcode.Of(err) != errcode.InvalidArgument {
				t.Errorf("Decide with edited arguments: %v, want InvalidArgument", err)
			}
			if _, err := e.parent.Resume(t.Context(), res.Thread, nil); !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Resume before the decision: %v, want ErrAwaitingApproval", err)
			}
			if err := e.parent.Decide(t.Context(), res.Thread, id, tc.d); err != nil {
				t.Fatal(err)
			}
			res, err = e.parent.Resume(t.Context(), res.Thread, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.wantText {
				t.Errorf("Text = %q, want %q", res.Text, tc.wantText)
			}
			if n := e.refunds.Load(); n != tc.refunds || e.inputs() != 1 {
				t.Errorf("refunds %d, child turns %d; want %d and 1", n, e.inputs(), tc.refunds)
			}
		})
	}
}

// TestAgentToolCrash: a parent stopped mid-child (its context canceled
// once the child's refund ran, before the child sent its result), then a
// new runner pair over the same journal and services resumes the parent:
// the same child turn goes on, its refund's result taken from the
// journal; one child turn, one refund.
func TestAgentToolCrash(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("50"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e.childOpts.OnEvent = func(ev core.Event) {
		if ev.Kind == core.EventCallFinished && ev.Call.Name == "refund" {
			cancel() // the child's refund is journaled; its result is not sent
		}
	}
	e.childOpts.Lease, e.parentOpts.Lease = 50*time.Millisecond, 50*time.Millisecond
	e.open()
	res, err := e.parent.Run(ctx, "go", nil)
	if !errors.Is(err, context.Canceled) || res == nil || res.Thread == "" {
		t.Fatalf("Run = %+v, %v; want the thread, canceled", res, err)
	}
	if n := e.refunds.Load(); n != 1 {
		t.Fatalf("refunds before the resume = %d, want 1", n)
	}
	e.childOpts.OnEvent = nil
	e.open() // a new process
	res, err = e.parent.Resume(t.Context(), res.Thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "parent: child: refunded" {
		t.Errorf("Text = %q, want the child's answer", res.Text)
	}
	if n := e.refunds.Load(); n != 1 || e.inputs() != 1 {
		t.Errorf("refunds %d, child turns %d; want 1 and 1", n, e.inputs())
	}
	if got := e.childB.Received(); len(got) != 2 || got[1].Kind != "results" || got[1].Thread != got[0].Thread {
		t.Errorf("the child's service received %+v, want its input, then the refund's result on the same thread", got)
	}
}

// TestAgentToolBudget: the child runs under what the parent's budget has
// left; past it both stop (ErrBudgetExceeded), and a resume of the parent
// with the budget lifted resumes the child's turn. The child's usage is
// the parent's once its result is sent.
func TestAgentToolBudget(t *testing.T) {
	twice := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":1}`)}}},
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"8","amount":1}`)}}},
		{Text: "child: done"},
	}}}}
	e := newAgentEnv(t, parentScript(), twice)
	u := driver.Usage{InputTokens: 6, OutputTokens: 4, TotalTokens: 10}
	e.parentD = coretest.Metered{Backend: e.parentB, Usage: u}
	e.childD = coretest.Metered{Backend: e.childB, Usage: u}
	e.parentOpts.Budget = core.Budget{MaxTotalTokens: 25}
	e.open()
	// The parent's first step spends 10: 15 left for the child, whose
	// second step (20) passes it before its second refund.
	res, err := e.parent.Run(t.Context(), "go", nil)
	if !errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted {
		t.Fatalf("Run error = %v, want ErrBudgetExceeded", err)
	}
	if n := e.refunds.Load(); n != 1 || len(e.parentB.Received()) != 1 {
		t.Fatalf("refunds %d, parent received %+v; want 1 refund, the parent's input only", n, e.parentB.Received())
	}
	// With the same budget, the resume stops again, running nothing.
	if _, err := e.parent.Resume(t.Context(), res.Thread, nil); !errors.Is(err, core.ErrBudgetExceeded) {
		t.Fatalf("Resume with the same budget: %v, want ErrBudgetExceeded", err)
	}
	res, err = e.parent.Resume(t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxTotalTokens: core.Unlimited}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "parent: child: done" {
		t.Errorf("Text = %q", res.Text)
	}
	if n := e.refunds.Load(); n != 2 || e.inputs() != 1 {
		t.Errorf("refunds %d, child turns %d; want 2 and 1", n, e.inputs())
	}
	// Parent: 2 steps; child: 3 steps (its second counted once).
	if want := (driver.Usage{InputTokens: 30, OutputTokens: 20, TotalTokens: 50}); res.Usage != want || res.ToolCalls != 3 {
		t.Errorf("Usage = %+v, ToolCalls %d; want %+v and 3 (the agent call and the child's two)", res.Usage, res.ToolCalls, want)
	}
}

// TestAgentToolCancel: canceling the parent's context cancels the
// child's run: the child's handler sees its context end, and the parent
// returns the cancellation.
func TestAgentToolCancel(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("50"))
	started := make(chan struct{})
	ended := make(chan error, 1)
	e.refund = func(ctx context.Context, _ refundArgs) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
			return "", ctx.Err()
		case <-time.After(10 * time.Second):
			ended <- nil
			return "late", nil
		}
	}
	e.open()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	res, err := e.parent.Run(ctx, "go", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the child's handler ended with %v, want its context canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the child's handler still runs")
	}
	if got := e.relayed(); !slices.Contains(got, "ask_refunds>run_finished") {
		t.Errorf("the child's events at the parent = %v, want its run finished", got)
	}
	if res == nil || res.Thread == "" {
		t.Errorf("Result = %+v, want the thread, to resume", res)
	}
}

// TestAgentToolTakeOver: a runner pair whose worker stopped mid-child (its
// child's refund stuck, its lease renewals lost, as a killed process's
// would be) is taken over by another pair sharing the journal and the
// services: the parent's run is found and finished, the same child turn
// resumed, the refund found (by its Verify hook) rather than run again.
func TestAgentToolTakeOver(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("50"))
	release := make(chan struct{})
	defer close(release)
	e.refund = func(context.Context, refundArgs) (string, error) {
		<-release // the first worker is stuck here, after the refund took effect
		return "refunded", nil
	}
	e.verify = func(context.Context, core.Call) (any, bool, error) { return "refunded", true, nil }
	const lease = 300 * time.Millisecond
	e.parentOpts.Lease, e.childOpts.Lease = lease, lease
	e.parentOpts.Owner, e.childOpts.Owner = "dead", "dead-child"
	e.jr = deadJournal{e.journal}
	e.open()
	dead := e.parent
	go dead.Run(context.Background(), "go", nil)
	for e.refunds.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(lease + 50*time.Millisecond)
	e.jr = nil
	e.parentOpts.Owner, e.childOpts.Owner = "alive", "alive-child"
	e.open()
	got, err := e.parent.TakeOver(t.Context())
	if err != nil || len(got) != 1 {
		t.Fatalf("TakeOver = %+v, %v; want the parent's run", got, err)
	}
	if got[0].Text != "parent: child: refunded" {
		t.Errorf("Text = %q, want the child's answer", got[0].Text)
	}
	if n := e.refunds.Load(); n != 1 || e.inputs() != 1 {
		t.Errorf("refunds %d, child turns %d; want 1 and 1", n, e.inputs())
	}
}

// TestAgentToolChildBudget: a child stopped on its own budget gives the
// call a failed result the model reads, its turn canceled, and the parent
// goes on; a child that fails otherwise, the same, naming the code.
func TestAgentToolChildBudget(t *testing.T) {
	twice := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":1}`)}}},
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"8","amount":1}`)}}},
		{Text: "child: done"},
	}}}}
	e := newAgentEnv(t, parentScript(), twice)
	e.childOpts.Budget = core.Budget{MaxToolCalls: 1}
	e.open()
	res, err := e.parent.Run(t.Context(), "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `parent: agent "ask_refunds" stopped: its budget is spent`; res.Text != want {
		t.Errorf("Text = %q, want %q", res.Text, want)
	}
	got := e.childB.Received()
	if n := e.refunds.Load(); n != 1 || len(got) == 0 || got[len(got)-1].Kind != "cancel" {
		t.Errorf("refunds %d, the child's service received %+v; want 1 refund, the child's turn canceled last", n, got)
	}
}

// An agentChain is a parent, a middle agent and a grandchild, each an
// agent tool over the next (ask_desk, ask_refunds), on coretest backends
// of those names sharing one journal: the grandchild refunds order 7, its
// refund counted.
type agentChain struct {
	parent   *core.Runner
	backends map[string]*coretest.Backend
	refunds  atomic.Int32
}

// newAgentChain returns the chain whose middle agent is named middle and
// whose grandchild refunds amount, its refund's options opts: each step at
// each service reports usage (none: unmetered), and each runner has the
// budget of its name in budgets.
func newAgentChain(t *testing.T, middle, amount string, opts *core.ToolOptions, usage driver.Usage, budgets map[string]core.Budget) *agentChain {
	t.Helper()
	j := journaldriver.NewMemory()
	ch := &agentChain{backends: map[string]*coretest.Backend{
		"grandchild": coretest.NewBackend(childScript(amount), &coretest.BackendOptions{Name: "grandchild"}),
		middle:       coretest.NewBackend(coretest.Simple("ask_refunds", `{"input":"refund order 7"}`, middle+`: {{output "ask_refunds"}}`), &coretest.BackendOptions{Name: middle}),
		"parent":     coretest.NewBackend(coretest.Simple("ask_desk", `{"input":"refund order 7"}`, `parent: {{output "ask_desk"}}`), &coretest.BackendOptions{Name: "parent"}),
	}}
	refund := mustTool(t)(core.NewTool("refund", "Refund an order.", func(context.Context, refundArgs) (string, error) {
		ch.refunds.Add(1)
		return "refunded", nil
	}, opts))
	open := func(name string, tools ...*core.Tool) *core.Runner {
		tb, err := core.NewToolbox(tools...)
		if err != nil {
			t.Fatal(err)
		}
		var d driver.Backend = ch.backends[name]
		if usage != (driver.Usage{}) {
			d = coretest.Metered{Backend: ch.backends[name], Usage: usage}
		}
		r := core.NewRunner(d, tb, &core.Options{Journal: j, Logger: quiet, Budget: budgets[name]})
		t.Cleanup(func() { r.Close() })
		return r
	}
	grandchild := open("grandchild", refund)
	mid := open(middle, mustTool(t)(core.NewAgentTool("ask_refunds", "Ask the refund agent.", grandchild, nil)))
	ch.parent = open("parent", mustTool(t)(core.NewAgentTool("ask_desk", "Ask the desk.", mid, nil)))
	return ch
}

// received returns the kinds of the requests each service received.
func (ch *agentChain) received() map[string][]string {
	got := map[string][]string{}
	for name, b := range ch.backends {
		for _, r := range b.Received() {
			got[name] = append(got[name], r.Kind)
		}
	}
	return got
}

// TestAgentToolCancelNested: Runner.Cancel of a parent paused on its
// grandchild's approval (parent → child → grandchild, each an agent tool
// over the next) cancels the waiting turns all the way down, and the
// grandchild's refund never runs.
func TestAgentToolCancelNested(t *testing.T) {
	ctx := t.Context()
	ch := newAgentChain(t, "child", "150", &core.ToolOptions{Approval: core.ApprovalAlways("every refund needs approval")}, driver.Usage{}, nil)
	parent := ch.parent

	res, err := parent.Run(ctx, "go", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || res == nil || len(res.Pending) != 1 {
		t.Fatalf("Run = %+v, %v; want a pause on the grandchild's refund", res, err)
	}
	if err := parent.Cancel(ctx, res.Thread); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	got := ch.received()
	want := map[string][]string{
		"parent":     {"input", "cancel"},
		"child":      {"input", "cancel"},
		"grandchild": {"input", "cancel"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what each service received (-want +got):\n%s", diff)
	}
	if n := ch.refunds.Load(); n != 0 {
		t.Errorf("the refund ran %d times; want none", n)
	}
}

// TestAgentToolNestedBudget: a grandchild (parent → desk → refund agent,
// each an agent tool over the next) runs under what the parent's budget
// left the desk, less what the desk spent since: past it, the grandchild
// stops before its refund, and the desk and the parent stop so too
// (ErrBudgetExceeded), their turns left waiting, as a child past its
// parent's budget does; a resume of the parent with the same budget stops
// again, one with a raised budget resumes all three turns, and the refund
// runs once. The desk's own budget, if any, does not lift the parent's.
func TestAgentToolNestedBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		usage         driver.Usage // each step's, at each service
		budget, raise core.Budget  // the parent's, and its resume's
		desk          core.Budget  // the desk's own
		wantUsage     driver.Usage
	}{
		{name: "tool calls", budget: core.Budget{MaxToolCalls: 2}, raise: core.Budget{MaxToolCalls: 3}},
		{name: "tool calls, the desk's own budget looser", budget: core.Budget{MaxToolCalls: 2}, raise: core.Budget{MaxToolCalls: core.Unlimited}, desk: core.Budget{MaxToolCalls: 10}},
		// The parent's first step spends 10 and the desk's 10: 5 of 25
		// left for the refund agent, whose first step (10) passes it.
		{name: "total tokens", usage: driver.Usage{InputTokens: 6, OutputTokens: 4, TotalTokens: 10},
			budget: core.Budget{MaxTotalTokens: 25}, raise: core.Budget{MaxTotalTokens: 60},
			wantUsage: driver.Usage{InputTokens: 36, OutputTokens: 24, TotalTokens: 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ch := newAgentChain(t, "desk", "50", nil, tc.usage, map[string]core.Budget{"parent": tc.budget, "desk": tc.desk})
			parent, received := ch.parent, ch.received
			stopped := map[string][]string{"parent": {"input"}, "desk": {"input"}, "grandchild": {"input"}}

			res, err := parent.Run(ctx, "go", nil)
			if !errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted || res == nil {
				t.Fatalf("Run = %+v, %v; want ErrBudgetExceeded", res, err)
			}
			if !strings.Contains(err.Error(), "the parent run's budget had left") {
				t.Errorf("Run error = %v; want the grandchild stopped on what its parent had left", err)
			}
			if n := ch.refunds.Load(); n != 0 {
				t.Errorf("the refund ran %d times; want none", n)
			}
			if diff := cmp.Diff(stopped, received()); diff != "" {
				t.Errorf("what each service received, stopped (-want +got):\n%s", diff)
			}
			if _, err := parent.Resume(ctx, res.Thread, nil); !errors.Is(err, core.ErrBudgetExceeded) {
				t.Fatalf("Resume with the same budget: %v, want ErrBudgetExceeded", err)
			}
			if n := ch.refunds.Load(); n != 0 {
				t.Errorf("the refund ran %d times after a resume with the same budget; want none", n)
			}
			res, err = parent.Resume(ctx, res.Thread, &core.RunOptions{Budget: tc.raise})
			if err != nil {
				t.Fatalf("Resume with a raised budget: %v", err)
			}
			if want := "parent: desk: child: refunded"; res.Text != want {
				t.Errorf("Text = %q, want %q", res.Text, want)
			}
			if n := ch.refunds.Load(); n != 1 {
				t.Errorf("the refund ran %d times; want once", n)
			}
			for name, kinds := range received() {
				if n := strings.Count(strings.Join(kinds, " "), "input"); n != 1 || slices.Contains(kinds, "cancel") {
					t.Errorf("%s's service received %v; want one turn, not canceled", name, kinds)
				}
			}
			// The agent calls and the refund, each counted once.
			if res.Usage != tc.wantUsage || res.ToolCalls != 3 {
				t.Errorf("Usage = %+v, ToolCalls %d; want %+v and 3", res.Usage, res.ToolCalls, tc.wantUsage)
			}
		})
	}
}
