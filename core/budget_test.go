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
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// priced reports stepUsage with every step, a step given again by Resume
// included, made by the model "gpt-test".
func priced(b *coretest.Backend) coretest.Metered {
	return coretest.Metered{Backend: b, Model: "gpt-test", Usage: stepUsage}
}

// lookupCounted returns a toolbox of one tool, "lookup", which counts its
// runs in n.
func lookupCounted(t *testing.T, n *atomic.Int64) *core.Toolbox {
	t.Helper()
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
		n.Add(1)
		return "order 7", nil
	}, nil))
	tools, err := core.NewToolbox(lookup)
	if err != nil {
		t.Fatal(err)
	}
	return tools
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
			tools := lookupCounted(t, &lookups)
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
	tools := lookupCounted(t, &lookups)
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
	tools := lookupCounted(t, &lookups)
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

// TestStepCountedOnce (issue 46, item 3): a step whose approval is
// decided while another of its calls still runs goes again (its calls
// run again, the finished one from the journal): it is one step, its
// usage counted once, its calls announced once, one usage event. Before,
// two steps of 15 tokens counted 45 and a limit of 40 stopped the run
// that had spent 30.
func TestStepCountedOnce(t *testing.T) {
	release := make(chan struct{})
	var slow, refunds atomic.Int32
	refund := mustTool(t)(core.NewTool("refund", "Refund an order.", func(context.Context, struct{}) (string, error) {
		refunds.Add(1)
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(context.Context, struct{}) (bool, string) { return true, "refunds need a person" })}))
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(ctx context.Context, _ struct{}) (string, error) {
		if slow.Add(1) == 1 {
			select { // the first lookup runs until the refund is decided
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "order 7", nil
	}, nil))
	tools, err := core.NewToolbox(refund, lookup)
	if err != nil {
		t.Fatal(err)
	}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{}`)}, {Name: "lookup", Arguments: []byte(`{}`)}}},
		{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}},
		{Text: "done"},
	}}}}
	fake := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})
	var r *core.Runner
	decided := make(chan error, 1)
	onEvent := func(ev core.Event) {
		if ev.Kind == core.EventApprovalRequested {
			// Decided while the step's lookup still runs, then the lookup ends.
			go func() {
				err := r.Decide(context.WithoutCancel(t.Context()), ev.Thread, ev.Call.ID, core.Decision{Approved: true})
				close(release)
				decided <- err
			}()
		}
	}
	r = core.NewRunner(coretest.Metered{Backend: fake, Usage: stepUsage}, tools, &core.Options{Logger: quiet, Journal: journaldriver.NewMemory(), OnEvent: onEvent})
	defer r.Close()
	st := r.Stream(t.Context(), "refund order 7", &core.RunOptions{Budget: core.Budget{MaxTotalTokens: 40}})
	count := map[core.EventKind]int{}
	for ev := range st.Events() {
		count[ev.Kind]++
	}
	res, err := st.Result()
	if err := <-decided; err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if err != nil {
		t.Fatalf("Run = %v, want the answer (30 tokens of 40 spent)", err)
	}
	three := core.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}
	got := budgetOutcome{Text: res.Text, Lookups: int64(slow.Load()), Usage: res.Usage, ToolCalls: res.ToolCalls}
	want := budgetOutcome{Text: "done", Lookups: 2, Usage: three, ToolCalls: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the run (-want +got):\n%s", diff)
	}
	if refunds.Load() != 1 || res.Steps != 2 {
		t.Errorf("%d refunds, %d steps; want 1 and 2", refunds.Load(), res.Steps)
	}
	wantEvents := map[core.EventKind]int{core.EventToolCall: 3, core.EventUsage: 3, core.EventStepStarted: 2, core.EventResultsSubmitted: 2}
	gotEvents := map[core.EventKind]int{}
	for k := range wantEvents {
		gotEvents[k] = count[k]
	}
	if diff := cmp.Diff(wantEvents, gotEvents); diff != "" {
		t.Errorf("events by kind (-want +got):\n%s", diff)
	}
}

// lookupArgs are the arguments of twoLookups' calls.
type lookupArgs struct {
	N int `json:"n,omitempty"`
}

// submits counts the requests that sent results to b.
func submits(b *coretest.Backend) int {
	n := 0
	for _, r := range b.Received() {
		if r.Kind == "results" {
			n++
		}
	}
	return n
}

// twoLookups: two steps of two lookups each, then the answer.
func twoLookups() *coretest.Script {
	two := coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{"n":1}`)}, {Name: "lookup", Arguments: []byte(`{"n":2}`)}}}
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{two, two, {Text: "done"}}}}}
}

// TestBudgetRules (issue 46, item 12): what the budget tests of one call a
// step did not hold. The calls of a step count before they run: two of a
// step, with one call left, stop the run (a check of the calls spent
// alone let four of three run). A run budget without prices is counted
// at the runner's (without them, its cost limit had no price).
func TestBudgetRules(t *testing.T) {
	prices := map[string]core.Price{"gpt-test": {Input: 1000, Output: 2000}} // 0.02 a step
	tests := []struct {
		name        string
		script      *coretest.Script
		runner, run core.Budget
		want        budgetOutcome
		code        errcode.Code
	}{{
		name:   "a step's calls count before they run",
		script: twoLookups(),
		run:    core.Budget{MaxToolCalls: 3},
		want:   budgetOutcome{Exceeded: true, Lookups: 2, Submits: 1, Usage: core.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}, ToolCalls: 2},
		code:   errcode.ResourceExhausted,
	}, {
		name:   "a run's cost limit at the runner's prices",
		script: budgetScript(),
		runner: core.Budget{Prices: prices},
		run:    core.Budget{MaxCost: 0.03},
		want:   budgetOutcome{Exceeded: true, Lookups: 1, Submits: 1, Usage: core.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}, ToolCalls: 1, Cost: 0.04},
		code:   errcode.ResourceExhausted,
	}}
	approx := cmp.Comparer(func(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lookups atomic.Int64
			lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, lookupArgs) (string, error) {
				lookups.Add(1)
				return "order 7", nil
			}, nil))
			tools, err := core.NewToolbox(lookup)
			if err != nil {
				t.Fatal(err)
			}
			fake := coretest.NewBackend(tt.script, &coretest.BackendOptions{Tools: tools})
			r := core.NewRunner(priced(fake), tools, &core.Options{Logger: quiet, Budget: tt.runner})
			defer r.Close()
			res, err := r.Run(t.Context(), "look it up", &core.RunOptions{Budget: tt.run})
			if errcode.Of(err) != tt.code {
				t.Fatalf("Run = %v (%v), want code %v", err, errcode.Of(err), tt.code)
			}
			got := budgetOutcome{Exceeded: errors.Is(err, core.ErrBudgetExceeded), Text: res.Text, Lookups: lookups.Load(), Submits: submits(fake),
				Usage: res.Usage, ToolCalls: res.ToolCalls, Cost: res.Cost}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// staleFirst is a backend whose first Resume gives back the turn's first
// step, whose results were sent (a stale read of the service's state),
// and which drops results sent again for it, giving the step the turn
// waits on, as a service that has them does.
type staleFirst struct {
	*coretest.Backend
	mu       sync.Mutex
	first    *driver.Step
	answered bool // first's results were sent
	resumed  bool
}

func (b *staleFirst) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	step, err := b.Backend.Start(ctx, req)
	if err == nil {
		b.mu.Lock()
		c := *step
		b.first = &c
		b.mu.Unlock()
	}
	return step, err
}

func (b *staleFirst) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	b.mu.Lock()
	again := b.answered && len(req.Step.Calls) > 0 && req.Step.Calls[0].ID == b.first.Calls[0].ID
	b.answered = true
	b.mu.Unlock()
	if again {
		return b.Backend.Resume(ctx, req.Step.Thread)
	}
	return b.Backend.Submit(ctx, req)
}

func (b *staleFirst) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.resumed {
		b.resumed = true
		c := *b.first
		return &c, nil
	}
	return b.Backend.Resume(ctx, thread)
}

// TestResumeStaleStep (issue 46, item 12): a resume given back a step
// whose results an earlier run sent (the service's state read stale)
// counts its calls once: the turn's tool calls are the calls sent, each
// once, and its calls' handlers do not run again.
func TestResumeStaleStep(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}},
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":50}`)}}},
		{Text: `{{output "refund"}}`},
	}}}}
	e := newApprovalEnv(t, script, nil)
	b := &staleFirst{Backend: e.backend}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop := func(ev core.Event) {
		if ev.Kind == core.EventResultsSubmitted {
			cancel() // the first worker stops once step 1's results went
		}
	}
	r1 := core.NewRunner(b, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: e.journal, Owner: "first", OnEvent: stop})
	defer r1.Close()
	res, err := r1.Run(ctx, "refund order 7", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	r2 := core.NewRunner(b, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: e.journal, Owner: "second"})
	defer r2.Close()
	res, err = r2.Resume(t.Context(), res.Thread, &core.RunOptions{Budget: core.Budget{MaxToolCalls: 2}})
	if err != nil {
		t.Fatalf("Resume = %v, want the answer (2 tool calls of 2)", err)
	}
	var names []string
	for _, c := range res.Calls {
		names = append(names, c.Call.Name)
	}
	type outcome struct {
		Text             string
		Steps, ToolCalls int
		Calls            []string
		Lookups, Refunds int32
	}
	want := outcome{Text: "refunded", Steps: 2, ToolCalls: 2, Calls: []string{"lookup", "refund"}, Lookups: 1, Refunds: 1}
	got := outcome{Text: res.Text, Steps: res.Steps, ToolCalls: res.ToolCalls, Calls: names, Lookups: e.lookups.Load(), Refunds: e.refunds.Load()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the resumed run (-want +got):\n%s", diff)
	}
}

// TestResumeKeepsBudget (issue 46, item 4): a turn keeps its run's
// budget: a resume given none holds the turn to it (before, it took the
// runner's: a run of 2 tool calls resumed ran 5), a resume's own budget
// overrides it field by field and is the turn's from then on, and
// Unlimited lifts a limit. In one process (the runner's own journal) as
// across two sharing a journal.
func TestResumeKeepsBudget(t *testing.T) {
	un := int64(core.Unlimited)
	type want struct {
		Exceeded             bool
		Text                 string
		Handlers             int64 // lookups and refunds run so far
		ToolCalls            int
		LeftCalls, LeftTotal int64 // Remaining.ToolCalls, TotalTokens
	}
	type resume struct {
		opts *core.RunOptions
		want want
	}
	tests := []struct {
		name     string
		approval bool // the first step's call needs a decision
		run      core.Budget
		resumes  []resume
	}{{
		name: "none given keeps the run's",
		run:  core.Budget{MaxToolCalls: 2},
		resumes: []resume{
			{nil, want{Exceeded: true, Handlers: 2, ToolCalls: 2, LeftCalls: 0, LeftTotal: un}},
		},
	}, {
		name: "one given overrides field by field",
		run:  core.Budget{MaxToolCalls: 2, MaxTotalTokens: 100},
		resumes: []resume{
			{&core.RunOptions{Budget: core.Budget{MaxToolCalls: 4}}, want{Exceeded: true, Handlers: 4, ToolCalls: 4, LeftCalls: 0, LeftTotal: 25}},
		},
	}, {
		name: "a raised budget is the turn's from then on",
		run:  core.Budget{MaxToolCalls: 1},
		resumes: []resume{
			{&core.RunOptions{Budget: core.Budget{MaxToolCalls: 3}}, want{Exceeded: true, Handlers: 3, ToolCalls: 3, LeftCalls: 0, LeftTotal: un}},
			{nil, want{Exceeded: true, Handlers: 3, ToolCalls: 3, LeftCalls: 0, LeftTotal: un}},
		},
	}, {
		name: "Unlimited lifts a limit",
		run:  core.Budget{MaxToolCalls: 2, MaxTotalTokens: 1000},
		resumes: []resume{
			{&core.RunOptions{Budget: core.Budget{MaxToolCalls: core.Unlimited}}, want{Text: "done", Handlers: 20, ToolCalls: 20, LeftCalls: un, LeftTotal: 1000 - 21*15}},
		},
	}, {
		name:     "a run paused for a decision keeps it",
		approval: true,
		run:      core.Budget{MaxToolCalls: 2},
		resumes: []resume{
			{nil, want{Exceeded: true, Handlers: 2, ToolCalls: 2, LeftCalls: 0, LeftTotal: un}},
		},
	}}
	stores := sharedStores("resume_budget")
	stores["own"] = func(*testing.T) (journaldriver.Journal, journaldriver.Journal) { return nil, nil }
	for store, open := range stores {
		for _, tt := range tests {
			t.Run(store+"/"+tt.name, func(t *testing.T) {
				script := manyLookups()
				if tt.approval {
					steps := script.Turns[0].Steps
					steps[0] = coretest.Step{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":150}`)}}}
				}
				e := newApprovalEnv(t, script, nil)
				b := coretest.Metered{Backend: e.backend, Usage: stepUsage}
				j1, j2 := open(t)
				// The runner's default would let five calls run.
				opts := func(j journaldriver.Journal, owner string) *core.Options {
					return &core.Options{Logger: quiet, Journal: j, Owner: owner, MaxSteps: 30, Budget: core.Budget{MaxToolCalls: 5}}
				}
				r1 := core.NewRunner(b, e.runner.Toolbox(), opts(j1, "first"))
				defer r1.Close()
				r2 := r1
				if j2 != nil {
					r2 = core.NewRunner(b, e.runner.Toolbox(), opts(j2, "second"))
					defer r2.Close()
				}
				res, err := r1.Run(t.Context(), "look it up", &core.RunOptions{Budget: tt.run})
				if tt.approval {
					if !errors.Is(err, core.ErrAwaitingApproval) {
						t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
					}
					if err := r2.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
						t.Fatal(err)
					}
				} else if !errors.Is(err, core.ErrBudgetExceeded) {
					t.Fatalf("Run = %v, want ErrBudgetExceeded", err)
				}
				thread := res.Thread
				for i, rs := range tt.resumes {
					res, err := r2.Resume(t.Context(), thread, rs.opts)
					if err != nil && !errors.Is(err, core.ErrBudgetExceeded) {
						t.Fatalf("resume %d: %v", i+1, err)
					}
					got := want{Exceeded: err != nil, Text: res.Text, Handlers: int64(e.lookups.Load() + e.refunds.Load()), ToolCalls: res.ToolCalls,
						LeftCalls: res.Remaining.ToolCalls, LeftTotal: res.Remaining.TotalTokens}
					if diff := cmp.Diff(rs.want, got); diff != "" {
						t.Errorf("resume %d (-want +got):\n%s", i+1, diff)
					}
				}
			})
		}
	}
}
