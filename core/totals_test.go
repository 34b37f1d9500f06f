package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

var stepUsage = core.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}

// totalsOf is what a run's totals are compared by.
type totalsOf struct {
	Steps int
	Calls []string
	Usage core.Usage
	// StepNumbers are the Step of each EventStepStarted, and Finished
	// the Step and Usage of EventRunFinished.
	StepNumbers   []int
	FinishedStep  int
	FinishedUsage core.Usage
}

// sharedStores opens, by store, the journals of two processes that share
// it: the memory journal (one value for both), SQLite (one file opened
// twice) and, when TOOLRELAY_TEST_POSTGRES names a database, PostgreSQL
// (a fresh table named after table, opened twice).
func sharedStores(table string) map[string]func(t *testing.T) (first, second journaldriver.Journal) {
	stores := map[string]func(t *testing.T) (first, second journaldriver.Journal){
		"memory": func(t *testing.T) (journaldriver.Journal, journaldriver.Journal) {
			m := journaldriver.NewMemory()
			return m, m
		},
		"sqlite": func(t *testing.T) (journaldriver.Journal, journaldriver.Journal) {
			u := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
			return openStore(t, u), openStore(t, u)
		},
	}
	if u := os.Getenv("TOOLRELAY_TEST_POSTGRES"); u != "" {
		stores["postgres"] = func(t *testing.T) (journaldriver.Journal, journaldriver.Journal) {
			u := pgtest.FreshTable(t, u, table)
			return openStore(t, u), openStore(t, u)
		}
	}
	return stores
}

// TestTotalsAcrossResume (issue 30, item 11): a run resumed in another
// process (another runner, over a journal opened anew on the same store)
// counts from its turn's start: Result's steps, calls and usage, the step
// numbers of its events, and its last event's totals; whether the first
// run paused for a decision or was stopped (its context ended) after a
// step. A later run on the thread, a new turn, counts from zero.
func TestTotalsAcrossResume(t *testing.T) {
	for name, open := range sharedStores("totals") {
		for _, how := range []string{"paused", "stopped"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				amount := "150" // needs a decision
				if how == "stopped" {
					amount = "50"
				}
				// Step 1 looks the order up, step 2 refunds it, step 3 answers.
				script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
					{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}},
					{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":` + amount + `}`)}}},
					{Text: `{{output "refund"}}`},
				}}, {Steps: []coretest.Step{
					{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}},
					{Text: `{{output "lookup"}}`},
				}}}}
				e := newApprovalEnv(t, script, nil)
				b := coretest.Metered{Backend: e.backend, Usage: stepUsage} // as a service reports a response's usage
				j1, j2 := open(t)
				var (
					mu     sync.Mutex
					events []core.Event
				)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				onEvent := func(ev core.Event) {
					mu.Lock()
					defer mu.Unlock()
					events = append(events, ev)
					if how == "stopped" && ev.Kind == core.EventResultsSubmitted {
						cancel() // the first worker stops once step 1's results went
					}
				}
				r1 := core.NewRunner(b, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: j1, Owner: "first", OnEvent: onEvent})
				defer r1.Close()
				res, err := r1.Run(ctx, "refund order 7", nil)
				switch how {
				case "paused":
					if !errors.Is(err, core.ErrAwaitingApproval) {
						t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
					}
				case "stopped":
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("Run = %v, want context.Canceled", err)
					}
				}
				r2 := core.NewRunner(b, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: j2, Owner: "second", OnEvent: onEvent})
				defer r2.Close()
				if how == "paused" {
					if err := r2.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
						t.Fatal(err)
					}
				}
				mu.Lock()
				events = nil
				mu.Unlock()
				got := func(res *core.Result) totalsOf {
					mu.Lock()
					defer mu.Unlock()
					o := totalsOf{Steps: res.Steps, Usage: res.Usage}
					for _, c := range res.Calls {
						o.Calls = append(o.Calls, c.Call.Name)
					}
					for _, ev := range events {
						switch ev.Kind {
						case core.EventStepStarted:
							o.StepNumbers = append(o.StepNumbers, ev.Step)
						case core.EventRunFinished:
							o.FinishedStep, o.FinishedUsage = ev.Step, ev.Usage
						}
					}
					events = nil
					return o
				}
				res, err = r2.Resume(t.Context(), res.Thread, nil)
				if err != nil || res.Text != "refunded" {
					t.Fatalf("Resume = %+v, %v; want the answer", res, err)
				}
				three := core.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}
				want := totalsOf{Steps: 2, Calls: []string{"lookup", "refund"}, Usage: three, StepNumbers: []int{2}, FinishedStep: 2, FinishedUsage: three}
				if diff := cmp.Diff(want, got(res)); diff != "" {
					t.Errorf("totals of the resumed run (-want +got):\n%s", diff)
				}
				if n := e.lookups.Load() + e.refunds.Load(); n != 2 {
					t.Errorf("%d handlers ran, want 2 (each once)", n)
				}

				// The thread's next turn counts from zero, also when resumed.
				res, err = r2.Run(t.Context(), "look it up", &core.RunOptions{Thread: res.Thread})
				if err != nil {
					t.Fatal(err)
				}
				two := core.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}
				want = totalsOf{Steps: 1, Calls: []string{"lookup"}, Usage: two, StepNumbers: []int{1}, FinishedStep: 1, FinishedUsage: two}
				if diff := cmp.Diff(want, got(res)); diff != "" {
					t.Errorf("totals of the next turn (-want +got):\n%s", diff)
				}
				res, err = r1.Resume(t.Context(), res.Thread, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.Steps != 0 || len(res.Calls) != 0 {
					t.Errorf("Resume of a thread whose turn is over: %d steps, %d calls; want none (the turn was counted)", res.Steps, len(res.Calls))
				}
			})
		}
	}
}

// TestTotalsBounded (issue 48, item 1): the totals noted after every step
// do not grow with the turn (they listed every call the turn had sent, so
// that a turn of n steps wrote n²/2 calls' worth of notes: 1.4 ms a step
// at 8,000 steps against 0.24 ms at 500); the calls before the last ones
// go to pages, each written once. A turn of 100 steps stopped after 70
// and resumed in another process counts its 100 calls, in order, each
// handler run once; once it is over no page is left.
func TestTotalsBounded(t *testing.T) {
	for name, open := range sharedStores("totals_bounded") {
		t.Run(name, func(t *testing.T) {
			const steps, stop = 100, 70
			var turn coretest.Turn
			for i := range steps {
				turn.Steps = append(turn.Steps, coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`), ID: "call_" + strconv.Itoa(i+1)}}})
			}
			turn.Steps = append(turn.Steps, coretest.Step{Text: "done"})
			e := newApprovalEnv(t, &coretest.Script{Turns: []coretest.Turn{turn}}, nil)
			j1, j2 := open(t)
			notes := j1.(journaldriver.Notes)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var (
				mu      sync.Mutex
				longest int // the most calls a totals note listed
				thread  string
			)
			onEvent := func(ev core.Event) {
				if ev.Kind != core.EventResultsSubmitted {
					return
				}
				v, _, err := notes.Note(t.Context(), e.backend.Name(), ev.Thread, "totals")
				var note struct{ Calls []json.RawMessage }
				if err == nil {
					err = json.Unmarshal([]byte(v), &note)
				}
				if err != nil {
					t.Errorf("the totals note after step %d: %q, %v", ev.Step, v, err)
				}
				mu.Lock()
				longest, thread = max(longest, len(note.Calls)), ev.Thread
				mu.Unlock()
				if ev.Step == stop {
					cancel()
				}
			}
			r1 := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: j1, Owner: "first", OnEvent: onEvent, MaxSteps: steps + 1})
			defer r1.Close()
			if _, err := r1.Run(ctx, "look it up", nil); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			r2 := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: j2, Owner: "second", OnEvent: onEvent, MaxSteps: steps + 1})
			defer r2.Close()
			res, err := r2.Resume(t.Context(), thread, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range res.Calls {
				ids = append(ids, c.Call.ID)
			}
			var want []string
			for i := range steps {
				want = append(want, "call_"+strconv.Itoa(i+1))
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("the resumed run's calls (-want +got):\n%s", diff)
			}
			if res.Steps != steps || res.ToolCalls != steps || e.lookups.Load() != steps {
				t.Errorf("%d steps, %d tool calls, %d lookups; want %d of each", res.Steps, res.ToolCalls, e.lookups.Load(), steps)
			}
			if longest > 64 {
				t.Errorf("a totals note listed %d calls; want at most 64 whatever the turn's length", longest)
			}
			for i := range steps / core.TotalsPage {
				if v, found, _ := notes.Note(t.Context(), e.backend.Name(), thread, "totals."+strconv.Itoa(i)); found && v != "" {
					t.Errorf("page %d of the turn's totals is left after the turn: %.60s…", i, v)
				}
			}
		})
	}
}
