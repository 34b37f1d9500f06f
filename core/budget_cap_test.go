package core

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/driver"
)

// TestSpendChildCap: what an agent call's child may spend is, in each
// field, the tighter of what the run's budget leaves and, in a run that
// is itself an agent's child, what its cap leaves once its spend from
// its start (base) and the step's calls are counted; a field below
// zero, and a Remaining not Set, set no limit.
func TestSpendChildCap(t *testing.T) {
	const un = Unlimited
	rem := func(in, out, total, calls int64, cost float64) *Remaining {
		return &Remaining{Set: true, InputTokens: in, OutputTokens: out, TotalTokens: total, ToolCalls: calls, Cost: cost}
	}
	// The run spent 10 input, 5 output, 15 tokens, 1 call and 0.5 since
	// its start; its step has 1 call more.
	base := driver.Spent{Usage: driver.Usage{InputTokens: 4, OutputTokens: 2, TotalTokens: 6}, ToolCalls: 3, Cost: 0.25}
	spent := driver.Spent{Usage: driver.Usage{InputTokens: 14, OutputTokens: 7, TotalTokens: 21}, ToolCalls: 4, Cost: 0.75}
	for _, c := range []struct {
		name   string
		budget Budget     // the run's
		cap    *Remaining // the run's cap, nil if it is no agent's child
		want   Remaining
	}{
		{"no budget, no cap", Budget{}, nil, Remaining{}},
		{"the budget alone", Budget{MaxToolCalls: 8}, nil, *rem(un, un, un, 3, un)},
		{"a cap not set", Budget{MaxToolCalls: 8}, &Remaining{}, *rem(un, un, un, 3, un)},
		{"the cap alone", Budget{}, rem(100, un, 20, 4, 2), *rem(90, un, 5, 2, 1.5)},
		{"the cap spent past", Budget{}, rem(5, un, un, 1, 0.25), *rem(0, un, un, 0, 0)},
		{"each field the tighter", Budget{MaxInputTokens: 54, MaxTotalTokens: 100, MaxToolCalls: 6, MaxCost: 1.25}, rem(100, 50, 20, un, 2), *rem(40, 45, 5, 1, 0.5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp := spend{b: c.budget, spent: spent, cap: c.cap, base: base}
			if diff := cmp.Diff(c.want, sp.childCap(1)); diff != "" {
				t.Errorf("childCap (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemainingLessMin: Less takes what was spent off each limit (0 once
// reached), leaving Unlimited counts and a Remaining not Set as they are;
// Min keeps the lower count of each field, Unlimited and a Remaining not
// Set being no limit.
func TestRemainingLessMin(t *testing.T) {
	const un = Unlimited
	rem := func(in, out, total, calls int64, cost float64) Remaining {
		return Remaining{Set: true, InputTokens: in, OutputTokens: out, TotalTokens: total, ToolCalls: calls, Cost: cost}
	}
	spent := driver.Spent{Usage: driver.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, ToolCalls: 2, Cost: 0.5}
	for _, c := range []struct {
		name      string
		got, want Remaining
	}{
		{"Less, no budget", Remaining{}.Less(spent), Remaining{}},
		{"Less", rem(100, un, 20, 4, 2).Less(spent), rem(90, un, 5, 2, 1.5)},
		{"Less, spent past", rem(5, un, un, 1, 0.25).Less(spent), rem(0, un, un, 0, 0)},
		{"Min, one not set", rem(1, 2, 3, 4, 5).Min(Remaining{}), rem(1, 2, 3, 4, 5)},
		{"Min, the other not set", Remaining{}.Min(rem(1, 2, 3, 4, 5)), rem(1, 2, 3, 4, 5)},
		{"Min, each field", rem(40, un, 5, 3, un).Min(rem(100, 45, un, 1, 0.5)), rem(40, 45, 5, 1, 0.5)},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
