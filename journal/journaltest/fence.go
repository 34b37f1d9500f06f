package journaltest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// fkey returns the key of a call of a run's thread.
func fkey(thread, call string) journaldriver.Key {
	return journaldriver.Key{Backend: "journaltest", Thread: thread, Turn: "turn-1", Call: call}
}

// fencingJournal is a journal that keeps runs and fences claims with them.
type fencingJournal interface {
	journaldriver.Journal
	journaldriver.Runs
	journaldriver.Fenced
}

// fenceCases are the rules of [journaldriver.Fenced], checked for journals
// that keep runs and implement it.
var fenceCases = []optionalCase[fencingJournal]{
	{
		name: "ClaimFenced",
		explanation: "ClaimFenced with Run set claims the call only if the run's record is running under the claim's owner (its lease expired or not), " +
			"atomically with the claim: a run taken over, paused, ended or not recorded gives ErrLeaseLost, no entry created and none returned; " +
			"with Run empty it is Claim; Unsynced keeps the same rules.",
		f: func(t *testing.T, j fencingJournal) {
			ctx := t.Context()
			held, ended := time.Now().Add(time.Hour), time.Now().Add(-time.Second)
			for _, r := range []journaldriver.Run{
				{Thread: "mine", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: held},
				{Thread: "expired", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: ended},
				{Thread: "taken", State: journaldriver.RunRunning, Owner: "b", LeaseUntil: held},
				{Thread: "paused", State: journaldriver.RunAwaiting, Owner: "a"},
				{Thread: "over", State: journaldriver.RunFinished, Owner: "a"},
			} {
				r.Backend = "journaltest"
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			// An entry of the taken run's thread, which a fenced claim must
			// not return to an owner that lost the run.
			if _, _, err := j.Claim(ctx, fkey("taken", "c0"), "d", "i", "b", time.Hour); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, unsynced := range []bool{false, true} {
				for _, thread := range []string{"mine", "expired", "taken", "paused", "over", "gone"} {
					call := "c1"
					if unsynced {
						call = "c2"
					}
					if thread == "taken" {
						call = "c0"
					}
					req := journaldriver.ClaimRequest{Key: fkey(thread, call), Digest: "d", IdempotencyKey: "i", Owner: "a", Lease: time.Hour, Run: thread, Unsynced: unsynced}
					e, created, err := j.ClaimFenced(ctx, req)
					name := thread + "/" + call
					switch {
					case errors.Is(err, journaldriver.ErrLeaseLost):
						got[name] = "refused"
						if e != (journaldriver.Entry{}) || created {
							t.Errorf("ClaimFenced of %s refused, returning entry %+v (created %v), want none", name, e, created)
						}
					case err != nil:
						t.Fatalf("ClaimFenced of %s: %v", name, err)
					case created && e.State == journaldriver.Started && e.Owner == "a":
						got[name] = "claimed"
					default:
						t.Errorf("ClaimFenced of %s = %+v, created %v", name, e, created)
					}
				}
			}
			want := map[string]string{
				"mine/c1": "claimed", "expired/c1": "claimed", "taken/c0": "refused", "paused/c1": "refused", "over/c1": "refused", "gone/c1": "refused",
				"mine/c2": "claimed", "expired/c2": "claimed", "paused/c2": "refused", "over/c2": "refused", "gone/c2": "refused",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("fenced claims by owner a (-want +got):\n%s", diff)
			}
			for _, thread := range []string{"paused", "over", "gone"} {
				for _, call := range []string{"c1", "c2"} {
					if e, ok, err := j.Get(ctx, fkey(thread, call)); err != nil || ok {
						t.Errorf("Get(%s/%s) after a refused claim = %+v, %v, %v; want no entry", thread, call, e, ok, err)
					}
				}
			}
			// Claimed again under the fence: the entry as stored.
			e, created, err := j.ClaimFenced(ctx, journaldriver.ClaimRequest{Key: fkey("mine", "c1"), Digest: "d", IdempotencyKey: "i", Owner: "a", Lease: time.Hour, Run: "mine"})
			if err != nil || created || e.Owner != "a" || e.State != journaldriver.Started {
				t.Errorf("ClaimFenced of a claimed call = %+v, %v, %v; want the entry, not created", e, created, err)
			}
			// No fence: a claim as Claim makes it, run record or not.
			if _, created, err := j.ClaimFenced(ctx, journaldriver.ClaimRequest{Key: fkey("gone", "c3"), Digest: "d", IdempotencyKey: "i", Owner: "a", Lease: time.Hour}); err != nil || !created {
				t.Errorf("ClaimFenced with no run = %v, %v; want it claimed", created, err)
			}
		},
	},
	{
		name: "ClaimFencedAfterTakeOver",
		explanation: "A worker that stalled past its run's lease, whose run another worker took over (ClaimRuns), finished and ended, and whose call's entry a prune deleted, " +
			"cannot claim the call again through ClaimFenced (ErrLeaseLost): its handler would run a second time.",
		f: func(t *testing.T, j fencingJournal) {
			ctx := t.Context()
			run := journaldriver.Run{Backend: "journaltest", Thread: "t", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: time.Now().Add(-time.Second)}
			if err := j.PutRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			taken, err := j.ClaimRuns(ctx, "journaltest", "b", time.Hour, 10)
			if err != nil || len(taken) != 1 {
				t.Fatalf("ClaimRuns by b = %+v, %v; want the run", taken, err)
			}
			k := fkey("t", "charge")
			req := journaldriver.ClaimRequest{Key: k, Digest: "d", IdempotencyKey: "i", Owner: "b", Lease: time.Hour, Run: "t"}
			if _, created, err := j.ClaimFenced(ctx, req); err != nil || !created {
				t.Fatalf("ClaimFenced by the run's new owner = %v, %v; want it claimed", created, err)
			}
			if err := j.Finish(ctx, k, "b", journaldriver.Result{Output: driver.Output{Text: "charged"}}); err != nil {
				t.Fatal(err)
			}
			if err := j.MarkSubmitted(ctx, []journaldriver.Key{k}); err != nil {
				t.Fatal(err)
			}
			if err := j.EndRun(ctx, "journaltest", "t", "b", journaldriver.RunFinished, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Prune(ctx, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := j.Get(ctx, k); err != nil || ok {
				t.Fatalf("Get after the prune: found %v, %v; want the entry pruned (the case needs it)", ok, err)
			}
			req.Owner = "a"
			e, created, err := j.ClaimFenced(ctx, req)
			if !errors.Is(err, journaldriver.ErrLeaseLost) || created {
				t.Errorf("ClaimFenced by the stalled worker = %+v, created %v, %v; want ErrLeaseLost", e, created, err)
			}
			if _, ok, err := j.Get(ctx, k); err != nil || ok {
				t.Errorf("Get after the refused claim: found %v, %v; want no entry", ok, err)
			}
		},
	},
}
