package core_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// BenchmarkBudget (issue 37, item 4) measures what a budget costs a step:
// one op is one step of calls calls of an instant tool, as in
// BenchmarkRunnerStep, every step reporting its usage, in runs of
// turnSteps steps (the cost of a turn's start and answer shared by its
// steps; the turn's totals, noted in the journal after every step, stay
// as short as a real turn's); budget=off runs
// without a budget, budget=on with every limit set (none reached) and a
// price table, so that every step counts its cost, checks each limit and
// puts what is left on its events. Compare with benchstat -col /budget.
func BenchmarkBudget(b *testing.B) {
	const turnSteps = 10
	type args struct {
		ID string `json:"id"`
	}
	tool, err := core.NewTool("lookup", "Look up a record.", func(ctx context.Context, in args) (string, error) {
		return "record " + in.ID, nil
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		b.Fatal(err)
	}
	const lots = 1 << 60
	budgets := []struct {
		name   string
		budget core.Budget
	}{
		{"off", core.Budget{}},
		{"on", core.Budget{MaxInputTokens: lots, MaxOutputTokens: lots, MaxTotalTokens: lots, MaxToolCalls: lots, MaxCost: lots,
			Prices: map[string]core.Price{"bench-model": {Input: 1.25, Output: 10}}}},
	}
	for _, calls := range []int{1, 8} {
		for _, bu := range budgets {
			b.Run(fmt.Sprintf("calls=%d/budget=%s", calls, bu.name), func(b *testing.B) {
				st := &stepper{steps: b.N, calls: calls, turn: turnSteps, usage: core.Usage{InputTokens: 1000, OutputTokens: 50, TotalTokens: 1050}}
				r := core.NewRunner(st, tools, &core.Options{Budget: bu.budget})
				defer r.Close()
				b.ReportAllocs()
				b.ResetTimer()
				for steps := 0; steps < b.N; {
					res, err := r.Run(context.Background(), "go", nil)
					if err != nil {
						b.Fatal(err)
					}
					want := min(turnSteps, b.N-steps)
					if res.Steps != want || res.ToolCalls != want*calls || res.Remaining.Set != (bu.name == "on") {
						b.Fatalf("Run took %d steps and %d calls (remaining %+v), want %d and %d", res.Steps, res.ToolCalls, res.Remaining, want, want*calls)
					}
					steps += res.Steps
				}
			})
		}
	}
}

// BenchmarkBudgetWork measures the work a budget adds to one step of
// BenchmarkBudget's budget=on, alone: the step's usage and cost charged,
// every limit checked before its calls, and what is left computed for
// its three events (step started, results submitted, the run's result).
// Its ns/op over BenchmarkBudget/calls=1/budget=off's, from the same run,
// is the budget's share of a step's time.
func BenchmarkBudgetWork(b *testing.B) {
	const lots = 1 << 60
	bu := core.Budget{MaxInputTokens: lots, MaxOutputTokens: lots, MaxTotalTokens: lots, MaxToolCalls: lots, MaxCost: lots,
		Prices: map[string]core.Price{"bench-model": {Input: 1.25, Output: 10}}}
	step := &driver.Step{Model: "bench-model", Usage: core.Usage{InputTokens: 1000, OutputTokens: 50, TotalTokens: 1050},
		Calls: []driver.Call{{ID: "c1", Name: "lookup"}}}
	var s driver.Spent
	var rem core.Remaining
	b.ReportAllocs()
	for b.Loop() {
		bu.Charge(&s, step)
		if err := bu.Exceeded(s, len(step.Calls)); err != nil {
			b.Fatal(err)
		}
		s.ToolCalls++
		for range 3 {
			rem = bu.Remaining(s)
		}
	}
	if !rem.Set || s.ToolCalls == 0 {
		b.Fatalf("nothing was counted: %+v, %+v", s, rem)
	}
}
