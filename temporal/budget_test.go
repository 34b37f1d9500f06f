package temporal

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// stepUsage is what each step of TestBudget reports.
var stepUsage = core.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}

// budgetScript: three steps of one call each, then the answer.
func budgetScript() *coretest.Script {
	st := coretest.Step{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}}
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{st, st, st, {Text: "done"}}}}}
}

// budgetOutcome is what a turn of TestBudget is compared by.
type budgetOutcome struct {
	Exceeded  bool // the error matches core.ErrBudgetExceeded, code ResourceExhausted
	Text      string
	Calls     int32 // calls run so far
	Submits   int   // results sent to the service so far
	Usage     core.Usage
	ToolCalls int
	Cost      float64
	Remaining core.Remaining
	// Finished is the Remaining of the turn's EventRunFinished, Started
	// those of its EventStepStarted.
	Finished core.Remaining
	Started  []core.Remaining
}

// TestBudget (issue 37, item 1, on Temporal): a turn stops on its budget
// before the request that would pass it, its step's calls not run; a
// resume with the same budget stops again, counting the step once; one
// with a raised budget goes on from the step to the answer. Each limit:
// tokens (input, output, total), tool calls, cost, and the loop's
// default budget (LoopOptions.Budget) lifted by Unlimited. The numbers
// are those of core's TestBudget.
func TestBudget(t *testing.T) {
	lifted := core.Budget{MaxInputTokens: core.Unlimited, MaxOutputTokens: core.Unlimited, MaxTotalTokens: core.Unlimited, MaxToolCalls: core.Unlimited, MaxCost: core.Unlimited}
	prices := map[string]core.Price{"gpt-test": {Input: 1000, Output: 2000}} // 0.02 a step
	const un = core.Unlimited
	rem := func(in, out, total, calls int64, cost float64) core.Remaining {
		return core.Remaining{Set: true, InputTokens: in, OutputTokens: out, TotalTokens: total, ToolCalls: calls, Cost: cost}
	}
	two := core.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}
	three := core.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}
	four := core.Usage{InputTokens: 40, OutputTokens: 20, TotalTokens: 60}
	tests := []struct {
		name            string
		loop            core.Budget // LoopOptions.Budget
		first, raised   core.Budget // RunRequest.Budget of the run (and the resume that stops again), of the last resume
		stopped, resume budgetOutcome
	}{{
		name:    "total tokens",
		first:   core.Budget{MaxTotalTokens: 30},
		raised:  core.Budget{MaxTotalTokens: 100},
		stopped: budgetOutcome{Exceeded: true, Calls: 1, Submits: 1, Usage: two, ToolCalls: 1, Remaining: rem(un, un, 0, un, un), Started: []core.Remaining{rem(un, un, 15, un, un)}},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: rem(un, un, 40, un, un), Started: []core.Remaining{rem(un, un, 70, un, un), rem(un, un, 55, un, un)}},
	}, {
		name:    "input tokens",
		first:   core.Budget{MaxInputTokens: 25},
		raised:  core.Budget{MaxInputTokens: 45},
		stopped: budgetOutcome{Exceeded: true, Calls: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: rem(0, un, un, un, un), Started: []core.Remaining{rem(15, un, un, un, un), rem(5, un, un, un, un)}},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: rem(5, un, un, un, un), Started: []core.Remaining{rem(15, un, un, un, un)}},
	}, {
		name:    "output tokens",
		first:   core.Budget{MaxOutputTokens: 5},
		raised:  core.Budget{MaxOutputTokens: 1000},
		stopped: budgetOutcome{Exceeded: true, Usage: stepUsage, Remaining: rem(un, 0, un, un, un)},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: rem(un, 980, un, un, un), Started: []core.Remaining{rem(un, 995, un, un, un), rem(un, 990, un, un, un), rem(un, 985, un, un, un)}},
	}, {
		name:    "tool calls",
		first:   core.Budget{MaxToolCalls: 2},
		raised:  core.Budget{MaxToolCalls: 3},
		stopped: budgetOutcome{Exceeded: true, Calls: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: rem(un, un, un, 0, un), Started: []core.Remaining{rem(un, un, un, 2, un), rem(un, un, un, 1, un)}},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: rem(un, un, un, 0, un), Started: []core.Remaining{rem(un, un, un, 1, un)}},
	}, {
		name:    "cost",
		first:   core.Budget{MaxCost: 0.03, Prices: prices},
		raised:  core.Budget{MaxCost: 1, Prices: prices},
		stopped: budgetOutcome{Exceeded: true, Calls: 1, Submits: 1, Usage: two, ToolCalls: 1, Cost: 0.04, Remaining: rem(un, un, un, un, 0), Started: []core.Remaining{rem(un, un, un, un, 0.01)}},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Cost: 0.08, Remaining: rem(un, un, un, un, 0.92), Started: []core.Remaining{rem(un, un, un, un, 0.96), rem(un, un, un, un, 0.94)}},
	}, {
		name:    "loop's budget lifted",
		loop:    core.Budget{MaxToolCalls: 1},
		raised:  lifted,
		stopped: budgetOutcome{Exceeded: true, Calls: 1, Submits: 1, Usage: two, ToolCalls: 1, Remaining: rem(un, un, un, 0, un), Started: []core.Remaining{rem(un, un, un, 1, un)}},
		resume:  budgetOutcome{Text: "done", Calls: 3, Submits: 3, Usage: four, ToolCalls: 3, Started: []core.Remaining{{}, {}}},
	}}
	approx := cmp.Comparer(func(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvOn(t, budgetScript(), func(b *coretest.Backend) driver.Backend {
				return coretest.Metered{Backend: b, Model: "gpt-test", Usage: stepUsage}
			}, LoopOptions{Budget: tt.loop})
			var run, again, raised outcome
			var seen [3]seen
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather three times", Budget: tt.first})
			e.look(2*time.Second, &seen[0])
			e.update(3*time.Second, UpdateResume, &again, resumeRequest{Budget: tt.first})
			e.look(4*time.Second, &seen[1])
			e.update(5*time.Second, UpdateResume, &raised, resumeRequest{Budget: tt.raised})
			e.look(6*time.Second, &seen[2])
			e.run()
			for i, c := range []struct {
				what string
				o    outcome
				want budgetOutcome
			}{
				{"the run", run, tt.stopped},
				{"a resume with the same budget", again, tt.stopped},
				{"a resume with a raised budget", raised, tt.resume},
			} {
				got := e.budgetOutcome(c.o, &seen[i])
				want := c.want
				want.Finished = want.Remaining
				if i == 1 {
					want.Started = nil // the held step starts no step
				}
				if diff := cmp.Diff(want, got, approx); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.what, diff)
				}
			}
		})
	}
}

// seen is what a turn of TestBudget left: its events, the calls run and
// the results sent so far.
type seen struct {
	events  []event
	calls   int32
	submits int
}

// look keeps at delay what the current turn left in s.
func (e *env) look(delay time.Duration, s *seen) {
	e.te.RegisterDelayedCallback(func() {
		s.calls = e.calls.Load()
		for _, r := range e.backend.Received() {
			if r.Kind == "results" {
				s.submits++
			}
		}
		v, err := e.te.QueryWorkflow(QueryEvents, eventsRequest{})
		if err != nil {
			e.t.Errorf("events query: %v", err)
			return
		}
		var p eventsPage
		if err := v.Get(&p); err != nil {
			e.t.Errorf("events query: %v", err)
		}
		s.events = p.Events
	}, delay)
}

// budgetOutcome is what a turn of TestBudget gave, s what it left.
func (e *env) budgetOutcome(o outcome, s *seen) budgetOutcome {
	e.t.Helper()
	if o.err != nil || o.res == nil {
		e.t.Fatalf("update: %+v, %v", o.res, o.err)
	}
	res, err := result("thread", o.res)
	if err != nil && (!errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted) {
		e.t.Fatalf("turn: %v (%v), want ErrBudgetExceeded (ResourceExhausted) or none", err, errcode.Of(err))
	}
	got := budgetOutcome{Exceeded: err != nil, Text: res.Text, Calls: s.calls, Submits: s.submits,
		Usage: res.Usage, ToolCalls: res.ToolCalls, Cost: res.Cost, Remaining: res.Remaining}
	for _, ev := range s.events {
		switch ev.Kind {
		case core.EventRunFinished:
			got.Finished = ev.core().Remaining
		case core.EventStepStarted:
			got.Started = append(got.Started, ev.core().Remaining)
		}
	}
	return got
}

// TestBudgetCancelHeld: Cancel abandons a turn held on its budget: the
// service's turn is canceled, and a resume then returns the held turn's
// outcome without going on.
func TestBudgetCancelHeld(t *testing.T) {
	e := newEnv(t, budgetScript(), LoopOptions{})
	var run, resume outcome
	one := core.Budget{MaxToolCalls: 1}
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: one})
	e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, 2*time.Second)
	e.update(3*time.Second, UpdateResume, &resume, resumeRequest{Budget: core.Budget{MaxToolCalls: core.Unlimited}})
	e.run()
	var kinds []string
	for _, r := range e.backend.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "results", "cancel"}, kinds); diff != "" {
		t.Errorf("the service received (-want +got):\n%s", diff)
	}
	if resume.err != nil || resume.res == nil || resume.res.Err.Err() == nil || !errors.Is(resume.res.Err.Err(), core.ErrBudgetExceeded) || e.calls.Load() != 1 {
		t.Errorf("resume after cancel = %+v, %v with %d calls run; want the held turn's budget error and 1 call", resume.res, resume.err, e.calls.Load())
	}
}

// TestBudgetReachedService: a turn the service ends on its own budget
// (budget_reached, session_budget_exceeded) fails with an error matching
// core.ErrBudgetExceeded across the activity's and the workflow's
// boundaries, as core's Runner gives it; another failure does not.
func TestBudgetReachedService(t *testing.T) {
	for _, c := range []struct {
		code string
		want bool
	}{{"budget_reached", true}, {"session_budget_exceeded", true}, {"server_error", false}} {
		t.Run(c.code, func(t *testing.T) {
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
				{Fail: &coretest.Failure{Code: c.code, Message: "spent"}},
			}}}}
			e := newEnv(t, script, LoopOptions{})
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "go"})
			e.run()
			if run.err != nil || run.res == nil {
				t.Fatalf("run: %+v, %v", run.res, run.err)
			}
			_, err := result("thread", run.res)
			if err == nil || errors.Is(err, core.ErrBudgetExceeded) != c.want {
				t.Errorf("turn error %v; matches ErrBudgetExceeded: %v, want %v", err, errors.Is(err, core.ErrBudgetExceeded), c.want)
			}
		})
	}
}

// TestBudgetRefusedUpdate (issue 46, item 1, on Temporal): the run and
// resume updates refuse, recording nothing, a budget core.Budget.Check
// refuses (a client other than the Runner, which checks it before it
// sends, may send one): InvalidArgument, nothing sent to the service, no
// call run. Before, a negative limit lifted the loop's default.
func TestBudgetRefusedUpdate(t *testing.T) {
	for _, b := range []core.Budget{
		{MaxToolCalls: -3},
		{MaxTotalTokens: -100},
		{MaxCost: -0.5},
		{Prices: map[string]core.Price{"*": {Input: -1}}},
	} {
		e := newEnv(t, budgetScript(), LoopOptions{Budget: core.Budget{MaxToolCalls: 1}})
		var run, resume outcome
		e.update(time.Second, UpdateRun, &run, runRequest{Input: "go", Budget: b})
		e.update(2*time.Second, UpdateResume, &resume, resumeRequest{Budget: b})
		e.run()
		for what, o := range map[string]outcome{"run": run, "resume": resume} {
			if errcode.Of(clientError(what, o.err)) != errcode.InvalidArgument || o.res != nil {
				t.Errorf("%+v: the %s update = %v (a turn ran: %t); want it refused, InvalidArgument", b, what, o.err, o.res != nil)
			}
		}
		if n, got := e.calls.Load(), e.backend.Received(); n != 0 || len(got) != 0 {
			t.Errorf("%+v: %d calls ran, the service received %d requests; want none", b, n, len(got))
		}
	}
}

// TestResumeKeepsBudget (issue 46, item 4, on Temporal): a resume of a
// turn held on its budget lays its budget over the turn's, field by
// field, as core's Runner does: a raised tool call limit keeps the
// turn's token limit, and a resume given none keeps the turn's (before,
// the resume's budget replaced the turn's whole).
func TestResumeKeepsBudget(t *testing.T) {
	e := newEnvOn(t, budgetScript(), func(b *coretest.Backend) driver.Backend {
		return coretest.Metered{Backend: b, Model: "gpt-test", Usage: stepUsage}
	}, LoopOptions{})
	var run, raised, none outcome
	var seen [3]seen
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather three times", Budget: core.Budget{MaxToolCalls: 1, MaxTotalTokens: 100}})
	e.look(2*time.Second, &seen[0])
	e.update(3*time.Second, UpdateResume, &raised, resumeRequest{Budget: core.Budget{MaxToolCalls: 2}})
	e.look(4*time.Second, &seen[1])
	e.update(5*time.Second, UpdateResume, &none, resumeRequest{})
	e.look(6*time.Second, &seen[2])
	e.run()
	const un = core.Unlimited
	rem := func(total, calls int64) core.Remaining {
		return core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: total, ToolCalls: calls, Cost: un}
	}
	three := core.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}
	for i, c := range []struct {
		what string
		o    outcome
		want budgetOutcome
	}{
		{"a resume with a raised call limit", raised, budgetOutcome{Exceeded: true, Calls: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: rem(55, 0), Finished: rem(55, 0), Started: []core.Remaining{rem(70, 1)}}},
		{"a resume given none", none, budgetOutcome{Exceeded: true, Calls: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: rem(55, 0), Finished: rem(55, 0)}},
	} {
		got := e.budgetOutcome(c.o, &seen[i+1])
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.what, diff)
		}
	}
}
