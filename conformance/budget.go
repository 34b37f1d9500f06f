package conformance

import (
	"errors"
	"math"
	"sync/atomic"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
)

// budgetScript: three steps of one call each, then the answer; afterStop
// for a new turn.
func budgetScript() *coretest.Script {
	st := calls("getUserFavoriteCity", `{}`)
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{st, st, st, answer("done")}}, afterStop}}
}

// wantBudgetStop checks that err is a run stopped on its budget, and that
// runs calls ran and results results were sent so far.
func (e *env) wantBudgetStop(err error, runs *atomic.Int32, calls int) {
	e.t.Helper()
	if !errors.Is(err, core.ErrBudgetExceeded) {
		e.t.Fatalf("Run error = %v, want ErrBudgetExceeded", err)
	}
	e.wantCode(err, errcode.ResourceExhausted)
	if n := int(runs.Load()); n != calls {
		e.t.Errorf("the function ran %d times, want %d", n, calls)
	}
	if n := len(e.results()); n != calls {
		e.t.Errorf("%d results sent, want %d (none past the budget)", n, calls)
	}
}

// budgetToolCalls: a run allowed two tool calls stops before the third
// step's call runs, sending nothing more; a resume with the same budget
// stops again; one with a raised budget finishes the turn, each call run
// once.
func budgetToolCalls(e *env) {
	var runs atomic.Int32
	r := e.runner(budgetScript(), nil, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	two := &core.RunOptions{Budget: core.Budget{MaxToolCalls: 2}}
	res, err := r.Run(e.t.Context(), "go", two)
	e.wantBudgetStop(err, &runs, 2)
	if res == nil || res.Thread == "" || res.ToolCalls != 2 || !res.Remaining.Set || res.Remaining.ToolCalls != 0 {
		e.t.Fatalf("Result = %+v, want the thread, 2 tool calls, none left", res)
	}
	_, err = r.Resume(e.t.Context(), res.Thread, two)
	e.wantBudgetStop(err, &runs, 2)
	res, err = r.Resume(e.t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 3}})
	if err != nil {
		e.t.Fatalf("Resume with a raised budget: %v", err)
	}
	e.wantText(res, "done")
	if n := runs.Load(); n != 3 || res.ToolCalls != 3 || len(e.results()) != 3 {
		e.t.Errorf("the function ran %d times, %d tool calls counted, %d results sent; want 3 of each", n, res.ToolCalls, len(e.results()))
	}
}

// budgetTokens: a run whose token budget is spent by its first step stops
// before running that step's call; a resume with a raised budget finishes
// the turn. A service that reports usage only with a turn's answer
// cannot be stopped between steps: the sub-case is skipped, saying so,
// only when the run shows it (usage came with the answer alone).
func budgetTokens(e *env) {
	var runs atomic.Int32
	r := e.runner(budgetScript(), nil, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	spent := &core.RunOptions{Budget: core.Budget{MaxTotalTokens: 1}}
	s := r.Stream(e.t.Context(), "go", spent)
	var usageAt []int // the step counts of the usage events
	for ev, err := range s.Events() {
		if err == nil && ev.Kind == core.EventUsage && ev.Usage.TotalTokens > 0 {
			usageAt = append(usageAt, ev.Step)
		}
	}
	res, err := s.Result()
	if err == nil {
		for _, n := range usageAt {
			if n < res.Steps {
				e.t.Fatalf("a run whose token budget was spent at step %d ran to its answer (%d steps)", n, res.Steps)
			}
		}
		if len(usageAt) == 0 {
			e.t.Skip("the service reports no token usage: a token budget has nothing to count")
		}
		e.t.Skip("the service reports usage only with a turn's answer (OpenAI sessions: the turn's usage comes when it completes), so a token budget cannot stop a run between its steps (the turn's usage is counted in its Result once it ends)")
	}
	e.wantBudgetStop(err, &runs, 0)
	if res == nil || res.Thread == "" || res.Usage.TotalTokens < 1 || res.Remaining.TotalTokens != 0 {
		e.t.Fatalf("Result = %+v, want the thread and the step's usage, nothing left", res)
	}
	res, err = r.Resume(e.t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxTotalTokens: core.Unlimited}})
	if err != nil {
		e.t.Fatalf("Resume with the budget lifted: %v", err)
	}
	e.wantText(res, "done")
	if n := runs.Load(); n != 3 || len(e.results()) != 3 {
		e.t.Errorf("the function ran %d times, %d results sent; want 3 of each", n, len(e.results()))
	}
}

// budgetReached: a turn the service ends on its own spending limit
// (code budget_reached, as an OpenAI session paused on its budget) gives
// the same error as a run's budget.
func budgetReached(e *env) {
	s := script(calls("getUserFavoriteCity", `{}`), coretest.Step{Fail: &coretest.Failure{Code: "budget_reached", Message: "the session's budget is spent"}})
	r := e.runner(s, nil, weatherTools(e)...)
	_, err := r.Run(e.t.Context(), "go", nil)
	if !errors.Is(err, core.ErrBudgetExceeded) {
		e.t.Fatalf("Run error = %v, want ErrBudgetExceeded", err)
	}
}

// refusedBudgets are budgets no runner may take (see core.Budget.Check).
var refusedBudgets = []core.Budget{
	{MaxToolCalls: -3},
	{MaxTotalTokens: -100},
	{MaxCost: -0.5},
	{MaxCost: math.NaN()},
	{MaxCost: math.Inf(1)},
	{Prices: map[string]core.Price{"*": {Input: -1}}},
	{MaxCost: 1, Prices: map[string]core.Price{"*": {Output: math.NaN()}}},
}

// budgetRefused: a budget no runner may take, in a run's options (of a
// start, a stream, a resume) or in the runner's, fails with
// InvalidArgument before anything is sent or run, on every runner alike
// (core's once ran every call under a NaN cost; Temporal's failed
// encoding it, under Unknown).
func budgetRefused(e *env) {
	var runs atomic.Int32
	r := e.runner(budgetScript(), &core.Options{Budget: core.Budget{MaxToolCalls: 2}}, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	for _, b := range refusedBudgets {
		_, err := r.Run(e.t.Context(), "go", &core.RunOptions{Budget: b})
		e.wantCode(err, errcode.InvalidArgument)
		s := r.Stream(e.t.Context(), "go", &core.RunOptions{Budget: b})
		for range s.Events() {
		}
		_, err = s.Result()
		e.wantCode(err, errcode.InvalidArgument)
	}
	if n := runs.Load(); n != 0 || len(e.h.Received()) != 0 {
		e.t.Fatalf("the function ran %d times, the service received %v; want nothing", n, e.kinds())
	}
	res, err := r.Run(e.t.Context(), "go", &core.RunOptions{Budget: core.Budget{MaxToolCalls: 1}})
	e.wantBudgetStop(err, &runs, 1)
	for _, b := range refusedBudgets {
		_, err := r.Resume(e.t.Context(), res.Thread, &core.RunOptions{Budget: b})
		e.wantCode(err, errcode.InvalidArgument)
	}
	if n := runs.Load(); n != 1 || len(e.results()) != 1 {
		e.t.Fatalf("after the refused resumes: the function ran %d times, %d results sent; want 1 and 1", n, len(e.results()))
	}
	bad := e.runner(budgetScript(), &core.Options{Budget: core.Budget{MaxCost: math.NaN()}}, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	_, err = bad.Run(e.t.Context(), "go", nil)
	e.wantCode(err, errcode.InvalidArgument)
	if n := runs.Load(); n != 1 {
		e.t.Errorf("under a runner's NaN cost limit the function ran; want it refused")
	}
}

// budgetResumeKeeps: a turn keeps its run's budget: a resume given none
// stops where the run stopped, and one given a budget overrides the
// turn's field by field (a raised call limit keeps its other limits).
func budgetResumeKeeps(e *env) {
	var runs atomic.Int32
	r := e.runner(budgetScript(), &core.Options{Budget: core.Budget{MaxToolCalls: 5}}, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	res, err := r.Run(e.t.Context(), "go", &core.RunOptions{Budget: core.Budget{MaxToolCalls: 1, MaxCost: 100, Prices: map[string]core.Price{"*": {}}}})
	e.wantBudgetStop(err, &runs, 1)
	thread := res.Thread
	res, err = r.Resume(e.t.Context(), thread, nil)
	e.wantBudgetStop(err, &runs, 1)
	res, err = r.Resume(e.t.Context(), thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 2}})
	e.wantBudgetStop(err, &runs, 2)
	if res == nil || res.Remaining.ToolCalls != 0 || res.Remaining.Cost != 100 {
		e.t.Errorf("Remaining = %+v, want no call left and the turn's cost limit kept (100 left)", res.Remaining)
	}
}
