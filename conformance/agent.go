package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// The AgentTool scenarios run two agents: the parent, on the scenario's
// harness and loop, whose one tool is an agent tool (core.NewAgentTool)
// over the child, core's Runner on a second harness of the same maker (a
// fake of its own, playing the child's script), each over a journal of
// its own (two fakes of one kind name their threads alike: sharing a
// journal, their calls' keys would meet).
// They run in a subtest named Child, whose harness is named after it.

// agentPair is the parent's env (in the Child subtest) and the child's.
type agentPair struct {
	e, ce   *env
	journal *journaldriver.Memory // the parent's
	childJ  *journaldriver.Memory
	refunds atomic.Int32
	mu      sync.Mutex
	paths   []string // the child's events at the parent's OnEvent
}

// withChild runs body in the Child subtest, with a second harness for the
// child's fake.
func (e *env) withChild(body func(p *agentPair)) {
	e.t.Helper()
	e.t.Run("Child", func(t *testing.T) {
		h, err := e.newHarness(t.Context(), t)
		if err != nil {
			t.Fatalf("making the child's harness: %v", err)
		}
		t.Cleanup(h.Close)
		pe := *e
		pe.t = t
		body(&agentPair{e: &pe, ce: &env{t: t, h: h}, journal: journaldriver.NewMemory(), childJ: journaldriver.NewMemory()})
	})
}

// childScript: the child refunds order 7 (for amount), then answers with
// the refund's output.
func agentChildScript(amount string) *coretest.Script {
	return script(calls("refund", `{"order":"7","amount":`+amount+`}`), answer(`child: {{output "refund"}}`))
}

// agentParentScript: the parent asks the refund agent, then answers with
// its answer.
func agentParentScript() *coretest.Script {
	return script(calls("ask_refunds", `{"input":"refund order 7"}`), answer(`parent: {{output "ask_refunds"}}`))
}

// child makes the child's runner on its fake, whose refund runs fn,
// counted, needing approval by rule (nil: none); opts' Journal is the
// pair's child's.
func (p *agentPair) child(s *coretest.Script, opts core.Options, rule core.ApprovalRule, fn func(context.Context, refundArgs) (string, error)) (*core.Runner, *core.Toolbox, driver.Backend) {
	ce := p.ce
	ce.t.Helper()
	refund := tool(ce, "refund", "Refund an order.", counted(&p.refunds, fn), &core.ToolOptions{Approval: rule})
	tools, err := core.NewToolbox(refund)
	if err != nil {
		ce.t.Fatal(err)
	}
	b, err := ce.h.MakeBackend(ce.t.Context(), s, tools)
	if err != nil {
		ce.t.Fatalf("MakeBackend (child): %v", err)
	}
	opts.Logger, opts.Journal = quiet, p.childJ
	r := core.NewRunner(b, tools, &opts)
	ce.t.Cleanup(func() { r.Close() })
	if cr, ok := b.(driver.CapabilityReporter); ok {
		ce.caps = cr.Capabilities()
	}
	return r, tools, b
}

// agent returns the agent tool over child.
func (p *agentPair) agent(child *core.Runner) *core.Tool {
	t, err := core.NewAgentTool("ask_refunds", "Ask the refund agent.", child, nil)
	if err != nil {
		p.e.t.Fatal(err)
	}
	return t
}

// parentOptions returns the parent's options: the pair's journal, and an
// OnEvent that keeps the paths of the child's events.
func (p *agentPair) parentOptions(o core.Options) *core.Options {
	o.Journal = p.journal
	o.OnEvent = func(ev core.Event) {
		if len(ev.Path) > 0 {
			p.mu.Lock()
			p.paths = append(p.paths, ev.Path[0].Name+">"+ev.Kind.String())
			p.mu.Unlock()
		}
	}
	return &o
}

// childTurns counts the turns the child's fake was asked to start.
func (p *agentPair) childTurns() int {
	n := 0
	for _, r := range p.ce.h.Received() {
		if r.Kind == "input" {
			n++
		}
	}
	return n
}

func refunded(context.Context, refundArgs) (string, error) { return "refunded", nil }

func agentAnswer(e *env) {
	e.withChild(func(p *agentPair) {
		e := p.e
		child, _, _ := p.child(agentChildScript("50"), core.Options{}, nil, refunded)
		r := e.runner(agentParentScript(), p.parentOptions(core.Options{}), p.agent(child))
		res := e.run(r, "go", nil)
		e.wantText(res, "parent: child: refunded")
		if n := p.refunds.Load(); n != 1 || p.childTurns() != 1 {
			e.t.Errorf("refunds %d, child turns %d; want 1 and 1", n, p.childTurns())
		}
		if got := p.ce.h.Received(); len(got) == 0 || got[0].Input != "refund order 7" {
			e.t.Errorf("the child's fake received %+v, want the call's input first", got)
		}
	})
}

func agentEvents(e *env) {
	e.withChild(func(p *agentPair) {
		e := p.e
		child, _, _ := p.child(agentChildScript("50"), core.Options{}, nil, refunded)
		r := e.runner(agentParentScript(), p.parentOptions(core.Options{}), p.agent(child))
		s := e.stream(r, "go", nil)
		if s.err != nil {
			e.t.Fatalf("the parent's stream: %v", s.err)
		}
		e.wantText(s.res, "parent: child: refunded")
		// The stream: the child's events, its run's end included, with
		// the parent's call as their path, before that call's end.
		var streamed []string
		for _, ev := range s.events {
			name := ""
			if ev.Call != nil {
				name = ev.Call.Name
			}
			switch {
			case len(ev.Path) > 0:
				streamed = append(streamed, ev.Path[0].Name+">"+ev.Kind.String()+" "+name)
			case ev.Call != nil && ev.Call.Name == "ask_refunds":
				streamed = append(streamed, ev.Kind.String()+" ask_refunds")
			}
		}
		want := []string{"call_started ask_refunds", "ask_refunds>call_started refund", "ask_refunds>call_finished refund", "ask_refunds>run_finished ", "call_finished ask_refunds"}
		if !isSubsequence(want, streamed) {
			e.t.Errorf("the parent's stream gave the agent call's events\n%s\nwant, in this order, among them:\n%s", strings.Join(streamed, "\n"), strings.Join(want, "\n"))
		}
		// OnEvent: the child's calls' events (every loop's OnEvent has
		// its calls'), with the parent's call as their path.
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, want := range []string{"ask_refunds>call_started", "ask_refunds>call_finished"} {
			if !slices.Contains(p.paths, want) {
				e.t.Errorf("the child's events at the parent's OnEvent = %v, want %s", p.paths, want)
			}
		}
	})
}

// isSubsequence reports whether want's elements are in got, in order.
func isSubsequence(want, got []string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

func agentApproval(e *env) {
	e.withChild(func(p *agentPair) {
		e := p.e
		child, _, _ := p.child(agentChildScript("150"), core.Options{}, core.ApprovalAlways("every refund needs approval"), refunded)
		r := e.runner(agentParentScript(), p.parentOptions(core.Options{}), p.agent(child))
		ap := e.approver(r)
		res, err := r.Run(e.t.Context(), "go", nil)
		if !errors.Is(err, core.ErrAwaitingApproval) || res == nil || len(res.Pending) != 1 || res.Pending[0].Tool != "refund" {
			e.t.Fatalf("Run = %+v, %v; want a pause on the child's refund", res, err)
		}
		list, err := ap.Approvals(e.t.Context(), res.Thread)
		if err != nil || len(list) != 1 || list[0].Key.Call != res.Pending[0].Key.Call {
			e.t.Fatalf("the parent's Approvals = %+v, %v; want the child's refund", list, err)
		}
		if p.refunds.Load() != 0 {
			e.t.Fatal("the refund ran before its approval")
		}
		if err := r.Decide(e.t.Context(), res.Thread, list[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
			e.t.Fatal(err)
		}
		res, err = r.Resume(e.t.Context(), res.Thread, nil)
		if err != nil {
			e.t.Fatalf("Resume: %v", err)
		}
		e.wantText(res, "parent: child: refunded")
		if n := p.refunds.Load(); n != 1 || p.childTurns() != 1 {
			e.t.Errorf("refunds %d, child turns %d; want 1 and 1", n, p.childTurns())
		}
	})
}

func agentCrash(e *env) {
	e.withChild(func(p *agentPair) {
		e, ce := p.e, p.ce
		pre, ok1 := e.h.(Reopener)
		cre, ok2 := ce.h.(Reopener)
		if !ok1 || !ok2 {
			e.t.Skip("the harness cannot open a second backend on its fake (conformance.Reopener)")
		}
		ctx, cancel := context.WithCancel(e.t.Context())
		defer cancel()
		opts := core.Options{Lease: 100 * time.Millisecond, OnEvent: func(ev core.Event) {
			if ev.Kind == core.EventCallFinished && ev.Call.Name == "refund" {
				cancel() // the refund is journaled, its result not sent
			}
		}}
		child, childTools, _ := p.child(agentChildScript("50"), opts, nil, refunded)
		if ce.caps.LocalThreads {
			e.t.Skip("the backend's threads live in the process that started them (Capabilities.LocalThreads)")
		}
		r1, _ := e.runnerTools(agentParentScript(), p.parentOptions(core.Options{Lease: 100 * time.Millisecond}), p.agent(child))
		e.processOpener(r1)
		if e.caps.LocalThreads {
			e.t.Skip("the backend's threads live in the process that started them (Capabilities.LocalThreads)")
		}
		res, err := r1.Run(ctx, "go", nil)
		if !errors.Is(err, context.Canceled) || res == nil || res.Thread == "" {
			e.t.Fatalf("Run = %+v, %v; want the thread, canceled mid-child", res, err)
		}
		if n := p.refunds.Load(); n != 1 {
			e.t.Fatalf("refunds before the second process = %d, want 1", n)
		}
		// The second process: both runners anew, on the same fakes and journal.
		cb2, err := cre.Reopen(e.t.Context(), childTools)
		if err != nil {
			e.t.Fatalf("Reopen (child): %v", err)
		}
		child2 := core.NewRunner(cb2, childTools, &core.Options{Logger: quiet, Journal: p.childJ})
		e.t.Cleanup(func() { child2.Close() })
		tools2, err := core.NewToolbox(p.agent(child2))
		if err != nil {
			e.t.Fatal(err)
		}
		pb2, err := pre.Reopen(e.t.Context(), tools2)
		if err != nil {
			e.t.Fatalf("Reopen (parent): %v", err)
		}
		r2, err := e.processOpener(r1).OpenProcess(e.t, pb2, tools2, &core.Options{Logger: quiet, Journal: p.journal})
		if errors.Is(err, ErrLacking) {
			pb2.Close()
			e.skipLacking(err)
		}
		if err != nil {
			e.t.Fatalf("opening the loop in the second process: %v", err)
		}
		e.t.Cleanup(func() { r2.Close() })
		res, err = r2.Resume(e.t.Context(), res.Thread, nil)
		if err != nil {
			e.t.Fatalf("Resume in the second process: %v", err)
		}
		// A durable loop keeps a call's result in its history, not in a
		// journal: the first process's worker, stopped as the refund's
		// handler returned, may have died before its activity reported
		// the result, and the refund (neither idempotent nor verified)
		// is then in doubt, not run again.
		if _, durable := r1.(DurableLoop); !durable || !strings.Contains(res.Text, `the outcome of this call of "refund" is unknown`) {
			e.wantText(res, "parent: child: refunded")
		}
		if n := p.refunds.Load(); n != 1 || p.childTurns() != 1 {
			e.t.Errorf("refunds %d, child turns %d; want 1 and 1 (the same child turn resumed)", n, p.childTurns())
		}
	})
}

func agentBudget(e *env) {
	e.withChild(func(p *agentPair) {
		e := p.e
		s := script(calls("refund", `{"order":"7","amount":1}`), calls("refund", `{"order":"8","amount":1}`), answer("child: done"))
		child, _, _ := p.child(s, core.Options{}, nil, refunded)
		r := e.runner(agentParentScript(), p.parentOptions(core.Options{}), p.agent(child))
		// Two calls for both: the agent call, and one of the child's.
		two := &core.RunOptions{Budget: core.Budget{MaxToolCalls: 2}}
		res, err := r.Run(e.t.Context(), "go", two)
		if !errors.Is(err, core.ErrBudgetExceeded) || res == nil || res.Thread == "" {
			e.t.Fatalf("Run = %+v, %v; want the thread, ErrBudgetExceeded", res, err)
		}
		e.wantCode(err, errcode.ResourceExhausted)
		if n := p.refunds.Load(); n != 1 || len(e.results()) != 0 {
			e.t.Fatalf("refunds %d, parent results sent %d; want 1 and none", n, len(e.results()))
		}
		if _, err := r.Resume(e.t.Context(), res.Thread, two); !errors.Is(err, core.ErrBudgetExceeded) || p.refunds.Load() != 1 {
			e.t.Fatalf("Resume with the same budget: %v (refunds %d); want ErrBudgetExceeded, nothing run", err, p.refunds.Load())
		}
		res, err = r.Resume(e.t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 4}})
		if err != nil {
			e.t.Fatalf("Resume with a raised budget: %v", err)
		}
		e.wantText(res, "parent: child: done")
		if n := p.refunds.Load(); n != 2 || p.childTurns() != 1 || res.ToolCalls != 3 {
			e.t.Errorf("refunds %d, child turns %d, tool calls counted %d; want 2, 1 and 3", n, p.childTurns(), res.ToolCalls)
		}
	})
}

func agentCancel(e *env) {
	e.withChild(func(p *agentPair) {
		e := p.e
		started := make(chan struct{})
		ended := make(chan error, 1)
		child, _, _ := p.child(agentChildScript("50"), core.Options{}, nil, func(ctx context.Context, _ refundArgs) (string, error) {
			close(started)
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
				return "", ctx.Err()
			case <-time.After(10 * time.Second):
				ended <- nil
				return "late", nil
			}
		})
		r := e.runner(agentParentScript(), p.parentOptions(core.Options{}), p.agent(child))
		ctx, cancel := context.WithCancel(e.t.Context())
		go func() { <-started; cancel() }()
		res, err := r.Run(ctx, "go", nil)
		if !errors.Is(err, context.Canceled) {
			e.t.Fatalf("Run error = %v, want context.Canceled", err)
		}
		e.wantCode(err, errcode.Canceled)
		if _, ok := r.(DurableLoop); ok {
			// The caller's context bounds only its wait: the turn, and
			// the child's, end on the runner's Cancel.
			if err := e.canceler(r).Cancel(e.t.Context(), res.Thread); err != nil {
				e.t.Fatalf("Runner.Cancel: %v", err)
			}
			_, err := r.Resume(e.t.Context(), res.Thread, nil)
			if !errors.Is(err, context.Canceled) {
				e.t.Fatalf("Resume after Cancel: %v, want the turn ended Canceled", err)
			}
			e.wantCode(err, errcode.Canceled)
		}
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				e.t.Errorf("the child's handler ended with %v, want its context canceled", err)
			}
		case <-time.After(5 * time.Second):
			e.t.Fatal("the child's handler still runs")
		}
		if got := e.results(); len(got) != 0 {
			e.t.Errorf("the parent sent results after cancellation: %+v", got)
		}
	})
}

func agentCancelPaused(e *env) {
	e.withChild(func(p *agentPair) {
		e, ce := p.e, p.ce
		cs := agentChildScript("150")
		cs.Turns = append(cs.Turns, afterStop)
		child, _, cb := p.child(cs, core.Options{}, core.ApprovalAlways("every refund needs approval"), refunded)
		s := agentParentScript()
		s.Turns = append(s.Turns, afterStop)
		r := e.runner(s, p.parentOptions(core.Options{}), p.agent(child))
		cr := e.canceler(r)
		_, ok1 := e.b.(driver.Canceler)
		_, ok2 := cb.(driver.Canceler)
		if !ok1 || !ok2 {
			e.t.Skip("the backend cannot cancel a turn (driver.Canceler)")
		}
		// The parent's stream gives the child's events, by which the
		// scenario finds the child's thread (see AgentTool/Events).
		st := e.stream(r, "go", nil)
		res, err := st.res, st.err
		if !errors.Is(err, core.ErrAwaitingApproval) || res == nil || len(res.Pending) != 1 {
			e.t.Fatalf("Stream = %+v, %v; want a pause on the child's refund", res, err)
		}
		ct := ""
		for _, ev := range st.events {
			if len(ev.Path) > 0 && ev.Thread != "" {
				ct = ev.Thread
			}
		}
		if ct == "" {
			e.t.Fatal("no event of the child's came in the parent's stream with its thread")
		}
		if err := cr.Cancel(e.t.Context(), res.Thread); err != nil {
			e.skipLacking(err)
			e.t.Fatalf("Runner.Cancel: %v", err)
		}
		e.wantThreadUsable(r, res.Thread)
		// The child's thread takes new input: its turn was abandoned, not
		// left waiting on the refund's decision.
		cres, err := child.Run(e.t.Context(), "again", &core.RunOptions{Thread: ct})
		if err != nil {
			e.t.Fatalf("a new run on the child's thread failed (its turn was left waiting?): %v", err)
		}
		ce.wantText(cres, "fresh start")
		if n := p.refunds.Load(); n != 0 {
			e.t.Errorf("the child's refund ran %d times; want none (its turn was abandoned)", n)
		}
	})
}
