package adapter

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolrelay/toolrelay/core"
)

// TestRunnerOptions checks what each runner setting gives the runner's
// options: a setting that is set replaces the base's value, one left at
// zero (or false, or no table) keeps it, and the settings that are not
// core's (the backend's, the journal's URL and retention) change nothing.
func TestRunnerOptions(t *testing.T) {
	prices := Prices{"m": {Input: 1, Output: 2}}
	base := core.Options{MaxSteps: 7, Concurrency: 3, ToolTimeout: time.Second, RunTimeout: time.Minute, MaxArgumentBytes: 11,
		MaxOutputBytes: 12, Lease: 2 * time.Second, Budget: core.Budget{MaxInputTokens: 1, MaxOutputTokens: 2, MaxTotalTokens: 3,
			MaxToolCalls: 4, MaxCost: 5, Prices: map[string]core.Price{"base": {Input: 9}}}}
	tests := []struct {
		name string
		cfg  Settings
		want func(o *core.Options)
	}{
		{"none", Settings{}, func(*core.Options) {}},
		{"not core's", Settings{Backend: "x", Instructions: "i", MaxResponseBytes: 1, MaxEventBytes: 2, IdleTimeout: 3, MaxSilence: 4,
			Journal: "memory", JournalRetention: Duration(time.Hour)}, func(*core.Options) {}},
		{"max_steps", Settings{MaxSteps: 20}, func(o *core.Options) { o.MaxSteps = 20 }},
		{"concurrency", Settings{Concurrency: 9}, func(o *core.Options) { o.Concurrency = 9 }},
		{"tool_timeout", Settings{ToolTimeout: Duration(time.Hour)}, func(o *core.Options) { o.ToolTimeout = time.Hour }},
		{"run_timeout", Settings{RunTimeout: Duration(2 * time.Hour)}, func(o *core.Options) { o.RunTimeout = 2 * time.Hour }},
		{"max_argument_bytes", Settings{MaxArgumentBytes: 100}, func(o *core.Options) { o.MaxArgumentBytes = 100 }},
		{"max_output_bytes", Settings{MaxOutputBytes: 200}, func(o *core.Options) { o.MaxOutputBytes = 200 }},
		{"truncate_output", Settings{TruncateOutput: true}, func(o *core.Options) { o.TruncateOutput = true }},
		{"journal_lease", Settings{JournalLease: Duration(time.Minute)}, func(o *core.Options) { o.Lease = time.Minute }},
		{"max_input_tokens", Settings{MaxInputTokens: 10}, func(o *core.Options) { o.Budget.MaxInputTokens = 10 }},
		{"max_output_tokens", Settings{MaxOutputTokens: 20}, func(o *core.Options) { o.Budget.MaxOutputTokens = 20 }},
		{"max_total_tokens", Settings{MaxTotalTokens: 30}, func(o *core.Options) { o.Budget.MaxTotalTokens = 30 }},
		{"max_tool_calls", Settings{MaxToolCalls: 40}, func(o *core.Options) { o.Budget.MaxToolCalls = 40 }},
		{"max_cost", Settings{MaxCost: 0.5}, func(o *core.Options) { o.Budget.MaxCost = 0.5 }},
		{"prices", Settings{Prices: prices}, func(o *core.Options) { o.Budget.Prices = prices }},
		{"empty prices", Settings{Prices: Prices{}}, func(o *core.Options) { o.Budget.Prices = map[string]core.Price{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			want.Budget.Prices = map[string]core.Price{"base": {Input: 9}}
			tt.want(&want)
			got := runnerOptions(&tt.cfg, base)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(core.Options{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("runnerOptions (-want +got):\n%s", diff)
			}
		})
	}
}
