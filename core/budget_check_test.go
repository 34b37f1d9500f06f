package core_test

import (
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// manyLookups: twenty steps of one lookup each, then the answer.
func manyLookups() *coretest.Script {
	lookup := coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}}
	var steps []coretest.Step
	for range 20 {
		steps = append(steps, lookup)
	}
	return &coretest.Script{Turns: []coretest.Turn{{Steps: append(steps, coretest.Step{Text: "done"})}}}
}

// badBudgets are budgets no runner may take (issue 46, items 1 and 2),
// each with the text its error must name; a lift by any negative value
// but Unlimited, a cost that is not a finite number, a price negative or
// not a finite number.
var badBudgets = []struct {
	name string
	b    core.Budget
	says string
}{
	{"tool calls -3", core.Budget{MaxToolCalls: -3}, "MaxToolCalls is -3"},
	{"total tokens -100", core.Budget{MaxTotalTokens: -100}, "MaxTotalTokens is -100"},
	{"input tokens -2", core.Budget{MaxInputTokens: -2}, "MaxInputTokens is -2"},
	{"output tokens -7", core.Budget{MaxOutputTokens: -7}, "MaxOutputTokens is -7"},
	{"cost -0.5", core.Budget{MaxCost: -0.5}, "MaxCost is -0.5"},
	{"cost NaN", core.Budget{MaxCost: math.NaN()}, "MaxCost is NaN"},
	{"cost +Inf", core.Budget{MaxCost: math.Inf(1)}, "MaxCost is +Inf"},
	{"price negative", core.Budget{Prices: map[string]core.Price{"gpt-test": {Input: -1, Output: 2}}}, `the price of "gpt-test" is -1`},
	{"price NaN", core.Budget{Prices: map[string]core.Price{"*": {Input: 1, Output: math.NaN()}}}, `the price of "*" is NaN`},
	{"price -Inf", core.Budget{MaxCost: 1, Prices: map[string]core.Price{"gpt-test": {Input: math.Inf(-1)}}}, `the price of "gpt-test" is -Inf`},
}

// TestBudgetRefused (issue 46, items 1 and 2): a budget with a value no
// budget may hold, in a run's options or in the runner's, fails Run,
// Stream, Resume and Enqueue with InvalidArgument naming the value, before
// anything is sent or run; before, a negative limit lifted the runner's
// default (2 calls, 40 tokens, a cost of 0.05) and a NaN cost or negative
// price let every call of twenty run.
func TestBudgetRefused(t *testing.T) {
	defaults := core.Budget{MaxToolCalls: 2, MaxTotalTokens: 40, MaxCost: 0.05, Prices: map[string]core.Price{"*": {Input: 1000, Output: 2000}}}
	for _, tt := range badBudgets {
		for _, where := range []string{"run", "runner"} {
			t.Run(where+"/"+tt.name, func(t *testing.T) {
				var lookups atomic.Int64
				tools := lookupCounted(t, &lookups)
				fake := coretest.NewBackend(manyLookups(), &coretest.BackendOptions{Tools: tools})
				opts, ro := &core.Options{Logger: quiet, Journal: journaldriver.NewMemory(), Budget: defaults}, &core.RunOptions{Budget: tt.b}
				field := "RunOptions.Budget: "
				if where == "runner" {
					opts.Budget, ro = tt.b, nil
					field = "Options.Budget: "
				}
				r := core.NewRunner(priced(fake), tools, opts)
				defer r.Close()
				refused := func(what string, err error) {
					t.Helper()
					if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), field+tt.says) {
						t.Errorf("%s = %v (%v), want InvalidArgument saying %q", what, err, errcode.Of(err), field+tt.says)
					}
				}
				_, err := r.Run(t.Context(), "look it up twenty times", ro)
				refused("Run", err)
				st := r.Stream(t.Context(), "look it up twenty times", ro)
				var last error
				for ev, err := range st.Events() {
					if ev.Kind == core.EventRunFinished {
						last = err
					}
				}
				refused("the stream's last event", last)
				_, err = st.Result()
				refused("Stream", err)
				_, err = r.Resume(t.Context(), "thread_1", ro)
				refused("Resume", err)
				if where == "run" {
					_, err = r.Enqueue(t.Context(), "look it up", ro)
					refused("Enqueue", err)
				}
				if n, got := lookups.Load(), fake.Received(); n != 0 || len(got) != 0 {
					t.Errorf("%d lookups ran and the service received %d requests; want none", n, len(got))
				}
			})
		}
	}
}

// TestBudgetCheck: Budget.Check takes every budget a runner may run
// with, Unlimited and zero in every field, and refuses the rest with
// InvalidArgument.
func TestBudgetCheck(t *testing.T) {
	un := int64(core.Unlimited)
	for _, b := range []core.Budget{
		{},
		{MaxInputTokens: un, MaxOutputTokens: un, MaxTotalTokens: un, MaxToolCalls: un, MaxCost: core.Unlimited},
		{MaxInputTokens: 1, MaxOutputTokens: 2, MaxTotalTokens: 3, MaxToolCalls: 4, MaxCost: 0.5, Prices: map[string]core.Price{"*": {}, "m": {Input: 1.75, Output: 14}}},
	} {
		if err := b.Check(); err != nil {
			t.Errorf("Check(%+v) = %v, want nil", b, err)
		}
	}
	for _, tt := range badBudgets {
		if err := tt.b.Check(); errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: Check = %v, want InvalidArgument saying %q", tt.name, err, tt.says)
		}
	}
	if err := (&core.Budget{MaxToolCalls: -3}).Check(); errors.Is(err, core.ErrBudgetExceeded) {
		t.Errorf("Check = %v: a refused budget is not one exceeded", err)
	}
}
