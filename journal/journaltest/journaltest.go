// Package journaltest checks implementations of [journaldriver.Journal]: [Run] is the
// contract every journal keeps, [RunDamaged] how a store reads a damaged
// entry, [Race] has several owners race for the same calls, and
// [Benchmark] measures what the runner's journal writes cost per call. A journal's whole contract test is one call:
//
//	func TestContract(t *testing.T) {
//		journaltest.Run(t, func(t *testing.T) driver.Journal {
//			j, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "j"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { j.Close() })
//			return j
//		})
//	}
//
// The suite runs on core's memory journal and on the stores of package
// journal (SQLite and PostgreSQL).
package journaltest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Leases the cases use: a live one that nothing in a test outlasts, and an
// expired one (a negative lease ends before the claim is made).
const (
	live    = time.Hour
	expired = -time.Hour
)

// slack is how far a stored time may be from what the test expects, so that
// a store keeping time by a database server's clock, or rounding it, passes.
const slack = time.Minute

// A testCase is one rule of the contract.
type testCase struct {
	name        string
	explanation string
	f           func(t *testing.T, j journaldriver.Journal)
}

// Run checks that the journals newJournal returns keep the contract of
// [journaldriver.Journal]. It calls newJournal once per case, in a subtest; each call
// must return a new, empty journal (newJournal closes it with t.Cleanup).
// A failing case logs the rule it checks.
func Run(t *testing.T, newJournal func(t *testing.T) journaldriver.Journal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			explain(t, c.explanation)
			c.f(t, newJournal(t))
		})
	}
	// The journal's claims and results without a sync keep the same
	// contract: every case again, through them.
	t.Run("Unsynced", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				j := newJournal(t)
				u, ok := j.(journaldriver.Unsynced)
				if !ok {
					t.Skip("the journal has no claims and results without a sync (journaldriver.Unsynced)")
				}
				explain(t, c.explanation+" (through ClaimUnsynced and FinishUnsynced)")
				c.f(t, unsynced{j, u})
			})
		}
	})
	runOptional(t, newJournal, approvalCases, "the journal keeps no approvals (journaldriver.Approvals)")
	runOptional(t, newJournal, noteCases, "the journal keeps no notes (journaldriver.Notes)")
	runOptional(t, newJournal, runCases, "the journal keeps no runs (journaldriver.Runs)")
	runOptional(t, newJournal, fenceCases, "the journal does not fence claims with runs (journaldriver.Runs and journaldriver.Fenced)")
	runOptional(t, newJournal, entryCases, "the journal does not list its entries (journaldriver.Entries)")
}

// explain logs the rule a case checks, if it fails.
func explain(t *testing.T, rule string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rule: %s", rule)
		}
	})
}

// unsynced is a journal whose Claim and Finish are its ClaimUnsynced and
// FinishUnsynced.
type unsynced struct {
	journaldriver.Journal
	u journaldriver.Unsynced
}

func (j unsynced) Claim(ctx context.Context, key journaldriver.Key, digest, idem, owner string, lease time.Duration) (journaldriver.Entry, bool, error) {
	return j.u.ClaimUnsynced(ctx, key, digest, idem, owner, lease)
}

func (j unsynced) Finish(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	return j.u.FinishUnsynced(ctx, key, owner, r)
}

// key returns a key of the suite's thread.
func key(call string) journaldriver.Key {
	return journaldriver.Key{Backend: "journaltest", Thread: "thread-1", Turn: "turn-1", Call: call}
}

// digest returns a digest for k's arguments (any stable text will do).
func digest(k journaldriver.Key) string { return "digest-of-" + k.Call }

func idem(k journaldriver.Key) string { return journaldriver.IdempotencyKey(k, digest(k)) }

func textResult(s string) journaldriver.Result {
	return journaldriver.Result{Output: driver.Output{Text: s}, Outcome: driver.OK}
}

func claim(t *testing.T, j journaldriver.Journal, k journaldriver.Key, owner string, lease time.Duration) (journaldriver.Entry, bool) {
	t.Helper()
	e, created, err := j.Claim(t.Context(), k, digest(k), idem(k), owner, lease)
	if err != nil {
		t.Fatalf("Claim(%q, %s): %v", k.Call, owner, err)
	}
	return e, created
}

func finish(t *testing.T, j journaldriver.Journal, k journaldriver.Key, owner string, r journaldriver.Result) {
	t.Helper()
	if err := j.Finish(t.Context(), k, owner, r); err != nil {
		t.Fatalf("Finish(%q, %s): %v", k.Call, owner, err)
	}
}

func markSubmitted(t *testing.T, j journaldriver.Journal, keys ...journaldriver.Key) {
	t.Helper()
	if err := j.MarkSubmitted(t.Context(), keys); err != nil {
		t.Fatalf("MarkSubmitted: %v", err)
	}
}

func get(t *testing.T, j journaldriver.Journal, k journaldriver.Key) (journaldriver.Entry, bool) {
	t.Helper()
	e, ok, err := j.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k.Call, err)
	}
	return e, ok
}

func mustGet(t *testing.T, j journaldriver.Journal, k journaldriver.Key) journaldriver.Entry {
	t.Helper()
	e, ok := get(t, j, k)
	if !ok {
		t.Fatalf("Get(%q): no entry, want one", k.Call)
	}
	return e
}

// ignoreTimes leaves the times of entries out of a comparison; the cases
// check them with within.
var ignoreTimes = cmpopts.IgnoreFields(journaldriver.Entry{}, "LeaseUntil", "Created", "Updated")

// equateTimes compares times with Equal, ignoring their location and
// monotonic reading.
var equateTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// checkEntry compares an entry with want, but for its times.
func checkEntry(t *testing.T, what string, want, got journaldriver.Entry) {
	t.Helper()
	if diff := cmp.Diff(want, got, ignoreTimes); diff != "" {
		t.Errorf("%s: entry (-want +got):\n%s", what, diff)
	}
}

// within checks that a stored time lies between from and to, give or take
// slack.
func within(t *testing.T, what string, got, from, to time.Time) {
	t.Helper()
	if got.Before(from.Add(-slack)) || got.After(to.Add(slack)) {
		t.Errorf("%s = %v, want between %v and %v (±%v)", what, got, from, to, slack)
	}
}

// An optionalCase is a rule of an interface a journal may implement beside
// journaldriver.Journal (J: journaldriver.Approvals, journaldriver.Notes, journaldriver.Runs).
type optionalCase[J any] struct {
	name, explanation string
	f                 func(t *testing.T, j J)
}

// runOptional runs cases on journals that implement J, and skips them,
// saying why (skip), on the others.
func runOptional[J any](t *testing.T, newJournal func(t *testing.T) journaldriver.Journal, cases []optionalCase[J], skip string) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, ok := newJournal(t).(J)
			if !ok {
				t.Skip(skip)
			}
			explain(t, c.explanation)
			c.f(t, j)
		})
	}
}
