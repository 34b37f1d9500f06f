package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// priced reports stepUsage with every step, a step given again by Resume
// included, made by the model "gpt-test".
func priced(b *coretest.Backend) coretest.Metered {
	return coretest.Metered{Backend: b, Model: "gpt-test", Usage: stepUsage}
}

// budgetScript: three steps of one lookup each, then the answer.
func budgetScript() *coretest.Script {
	lookup := coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}}
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{lookup, lookup, lookup, {Text: "done"}}}}}
}

// budgetOutcome is what a run of TestBudget is compared by.
type budgetOutcome struct {
	Exceeded  bool // the error matches ErrBudgetExceeded, code ResourceExhausted
	Text      string
	Lookups   int64 // handlers run so far
	Submits   int   // results sent to the service so far
	Usage     core.Usage
	ToolCalls int
	Cost      float64
	Remaining core.Remaining
	// Events are the Remaining of the run's last EventRunFinished.
	Finished core.Remaining
}

// TestBudget (issue 37, item 1): a run stops on its budget before the
// request that would pass it, its step's calls not run; a resume in
// another process (another runner over the SQLite journal file opened
// anew) with the same budget stops again, counting the step once; one
// with a raised budget goes on to the answer. Each limit: tokens (input,
// output, total), tool calls, cost, and the runner's default budget
// lifted by Unlimited.
func TestBudget(t *testing.T) {
	lifted := core.Budget{MaxInputTokens: core.Unlimited, MaxOutputTokens: core.Unlimited, MaxTotalTokens: core.Unlimited, MaxToolCalls: core.Unlimited, MaxCost: core.Unlimited}
	prices := map[string]core.Price{"gpt-test": {Input: 1000, Output: 2000}} // 0.02 a step
	un := int64(core.Unlimited)
	two := core.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}
	three := core.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}
	four := core.Usage{InputTokens: 40, OutputTokens: 20, TotalTokens: 60}
	tests := []struct {
		name            string
		runner          core.Budget // Options.Budget
		first, raised   core.Budget // RunOptions.Budget of the run (and the resume that stops again), of the last resume
		stopped, resume budgetOutcome
	}{{
		name:    "total tokens",
		first:   core.Budget{MaxTotalTokens: 30},
		raised:  core.Budget{MaxTotalTokens: 100},
		stopped: budgetOutcome{Exceeded: true, Lookups: 1, Submits: 1, Usage: two, ToolCalls: 1, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: 0, ToolCalls: un, Cost: core.Unlimited}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: 40, ToolCalls: un, Cost: core.Unlimited}},
	}, {
		name:    "input tokens",
		first:   core.Budget{MaxInputTokens: 25},
		raised:  core.Budget{MaxInputTokens: 45},
		stopped: budgetOutcome{Exceeded: true, Lookups: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: core.Remaining{Set: true, InputTokens: 0, OutputTokens: un, TotalTokens: un, ToolCalls: un, Cost: core.Unlimited}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: core.Remaining{Set: true, InputTokens: 5, OutputTokens: un, TotalTokens: un, ToolCalls: un, Cost: core.Unlimited}},
	}, {
		name:    "output tokens",
		first:   core.Budget{MaxOutputTokens: 5},
		raised:  core.Budget{MaxOutputTokens: 1000},
		stopped: budgetOutcome{Exceeded: true, Lookups: 0, Submits: 0, Usage: stepUsage, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: 0, TotalTokens: un, ToolCalls: un, Cost: core.Unlimited}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: 980, TotalTokens: un, ToolCalls: un, Cost: core.Unlimited}},
	}, {
		name:    "tool calls",
		first:   core.Budget{MaxToolCalls: 2},
		raised:  core.Budget{MaxToolCalls: 3},
		stopped: budgetOutcome{Exceeded: true, Lookups: 2, Submits: 2, Usage: three, ToolCalls: 2, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: un, ToolCalls: 0, Cost: core.Unlimited}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: un, ToolCalls: 0, Cost: core.Unlimited}},
	}, {
		name:    "cost",
		first:   core.Budget{MaxCost: 0.03, Prices: prices},
		raised:  core.Budget{MaxCost: 1, Prices: prices},
		stopped: budgetOutcome{Exceeded: true, Lookups: 1, Submits: 1, Usage: two, ToolCalls: 1, Cost: 0.04, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: un, ToolCalls: un, Cost: 0}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3, Cost: 0.08, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: un, ToolCalls: un, Cost: 0.92}},
	}, {
		name:    "runner's budget lifted",
		runner:  core.Budget{MaxToolCalls: 1},
		raised:  lifted,
		stopped: budgetOutcome{Exceeded: true, Lookups: 1, Submits: 1, Usage: two, ToolCalls: 1, Remaining: core.Remaining{Set: true, InputTokens: un, OutputTokens: un, TotalTokens: un, ToolCalls: 0, Cost: core.Unlimited}},
		resume:  budgetOutcome{Text: "done", Lookups: 3, Submits: 3, Usage: four, ToolCalls: 3},
	}}
	approx := cmp.Comparer(func(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lookups atomic.Int64
			lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
				lookups.Add(1)
				return "order 7", nil
			}, nil))
			tools, err := core.NewToolbox(lookup)
			if err != nil {
				t.Fatal(err)
			}
			fake := coretest.NewBackend(budgetScript(), &coretest.BackendOptions{Tools: tools})
			b := priced(fake)
			u := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
			var (
				mu       sync.Mutex
				finished core.Remaining
			)
			onEvent := func(ev core.Event) {
				if ev.Kind == core.EventRunFinished {
					mu.Lock()
					finished = ev.Remaining
					mu.Unlock()
				}
			}
			// Each runner is a process of its own, with its own journal
			// opened on the file.
			runner := func(owner string) *core.Runner {
				r := core.NewRunner(b, tools, &core.Options{Logger: quiet, Journal: openStore(t, u), Owner: owner, OnEvent: onEvent, Budget: tt.runner})
				t.Cleanup(func() { r.Close() })
				return r
			}
			outcome := func(res *core.Result, err error) budgetOutcome {
				t.Helper()
				if err != nil && (!errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted) {
					t.Fatalf("run: %v (%v), want ErrBudgetExceeded (ResourceExhausted) or none", err, errcode.Of(err))
				}
				submits := 0
				for _, r := range fake.Received() {
					if r.Kind == "results" {
						submits++
					}
				}
				mu.Lock()
				defer mu.Unlock()
				return budgetOutcome{Exceeded: err != nil, Text: res.Text, Lookups: lookups.Load(), Submits: submits,
					Usage: res.Usage, ToolCalls: res.ToolCalls, Cost: res.Cost, Remaining: res.Remaining, Finished: finished}
			}
			check := func(what string, want, got budgetOutcome) {
				t.Helper()
				want.Finished = want.Remaining
				if diff := cmp.Diff(want, got, approx); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			}
			res, err := runner("first").Run(t.Context(), "look it up three times", &core.RunOptions{Budget: tt.first})
			check("the run", tt.stopped, outcome(res, err))
			thread := res.Thread
			// Another process, the same budget: it stops again, the step counted once.
			res, err = runner("second").Resume(t.Context(), thread, &core.RunOptions{Budget: tt.first})
			check("a resume with the same budget", tt.stopped, outcome(res, err))
			// A third, with the budget raised: it goes on.
			res, err = runner("third").Resume(t.Context(), thread, &core.RunOptions{Budget: tt.raised})
			check("a resume with a raised budget", tt.resume, outcome(res, err))
		})
	}
}

// TestBudgetTakeOver: a run enqueued with a budget keeps it in its record:
// the worker that takes it over stops it on that budget, not its own.
func TestBudgetTakeOver(t *testing.T) {
	var lookups atomic.Int64
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
		lookups.Add(1)
		return "order 7", nil
	}, nil))
	tools, err := core.NewToolbox(lookup)
	if err != nil {
		t.Fatal(err)
	}
	b := priced(coretest.NewBackend(budgetScript(), &coretest.BackendOptions{Tools: tools}))
	u := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
	first := core.NewRunner(b, tools, &core.Options{Logger: quiet, Journal: openStore(t, u), Owner: "first"})
	defer first.Close()
	if _, err := first.Enqueue(t.Context(), "look it up", &core.RunOptions{Budget: core.Budget{MaxToolCalls: 1}}); err != nil {
		t.Fatal(err)
	}
	worker := core.NewRunner(b, tools, &core.Options{Logger: quiet, Journal: openStore(t, u), Owner: "worker"})
	defer worker.Close()
	results, err := worker.TakeOver(t.Context())
	if !errors.Is(err, core.ErrBudgetExceeded) || errcode.Of(err) != errcode.ResourceExhausted || len(results) != 0 {
		t.Fatalf("TakeOver = %d results, %v; want the run stopped on its budget", len(results), err)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d lookups; want 1 (the second step's call not run)", n)
	}
}

// TestBudgetReachedService: a turn the service ended on its own budget
// (budget_reached, session_budget_exceeded) gives an error matching
// ErrBudgetExceeded; another failure does not.
func TestBudgetReachedService(t *testing.T) {
	for code, want := range map[string]bool{"budget_reached": true, "session_budget_exceeded": true, "server_error": false} {
		script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Fail: &coretest.Failure{Code: code}}}}}}
		r, _ := newRunner(t, script, nil, nil)
		_, err := r.Run(t.Context(), "hi", nil)
		if err == nil || errors.Is(err, core.ErrBudgetExceeded) != want {
			t.Errorf("%s: Run = %v; matches ErrBudgetExceeded: %v, want %v", code, err, errors.Is(err, core.ErrBudgetExceeded), want)
		}
	}
}

// TestBudgetOldTotals: the totals a runner noted before budgets (no cost,
// no held step) still count: a resume reads their calls as the tool
// calls spent, stops on the same budget, and goes on with a raised one.
func TestBudgetOldTotals(t *testing.T) {
	var lookups atomic.Int64
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
		lookups.Add(1)
		return "order 7", nil
	}, nil))
	tools, err := core.NewToolbox(lookup)
	if err != nil {
		t.Fatal(err)
	}
	fake := coretest.NewBackend(budgetScript(), &coretest.BackendOptions{Tools: tools})
	j := journaldriver.NewMemory()
	r := core.NewRunner(priced(fake), tools, &core.Options{Logger: quiet, Journal: j})
	defer r.Close()
	one := &core.RunOptions{Budget: core.Budget{MaxToolCalls: 1}}
	res, err := r.Run(t.Context(), "look it up three times", one)
	if !errors.Is(err, core.ErrBudgetExceeded) {
		t.Fatalf("Run = %v, want ErrBudgetExceeded", err)
	}
	// The note as an older runner wrote it: steps, usage and calls only.
	v, found, err := j.Note(t.Context(), fake.Name(), res.Thread, "totals")
	if err != nil || !found {
		t.Fatalf("the totals note: %q, %v, %v", v, found, err)
	}
	var note map[string]any
	if err := json.Unmarshal([]byte(v), &note); err != nil {
		t.Fatal(err)
	}
	if _, ok := note["held"]; !ok {
		t.Fatalf("the note %s holds no held step", v)
	}
	delete(note, "held")
	delete(note, "cost")
	note["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15} // the held step's not counted
	b, _ := json.Marshal(note)
	if err := j.SetNote(t.Context(), fake.Name(), res.Thread, "totals", string(b)); err != nil {
		t.Fatal(err)
	}
	res, err = r.Resume(t.Context(), res.Thread, one)
	if !errors.Is(err, core.ErrBudgetExceeded) || res.ToolCalls != 1 || lookups.Load() != 1 {
		t.Fatalf("Resume with the same budget = %d tool calls, %d lookups, %v; want 1, 1 and ErrBudgetExceeded", res.ToolCalls, lookups.Load(), err)
	}
	res, err = r.Resume(t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 3}})
	if err != nil || res.Text != "done" || res.ToolCalls != 3 || lookups.Load() != 3 {
		t.Fatalf("Resume with a raised budget = %q, %d tool calls, %d lookups, %v; want the answer after 3 and 3", res.Text, res.ToolCalls, lookups.Load(), err)
	}
	if want := (core.Usage{InputTokens: 40, OutputTokens: 20, TotalTokens: 60}); res.Usage != want {
		t.Errorf("Usage = %+v, want %+v (the held step counted once, as the service gave it again)", res.Usage, want)
	}
}
