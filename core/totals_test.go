package core_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
