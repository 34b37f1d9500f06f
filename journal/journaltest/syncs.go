package journaltest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// The writes [Syncs] makes, by the names its want map uses.
const (
	SyncClaim          = "claim"
	SyncClaimUnsynced  = "claim unsynced"
	SyncFinish         = "finish"
	SyncFinishUnsynced = "finish unsynced"
	SyncMarkSubmitted  = "mark submitted"
	SyncPutRun         = "put run"
	SyncRenewRun       = "renew run"
	SyncEndRun         = "end run"
)

// SyncsUnderClaims returns what [Syncs] wants of a journal that syncs only
// what exactly-once needs (the stores' "claims" setting): the claim of a
// call that may not run twice, and a run's record; no result, mark, run
// lease renewal or run end, and no write of a call that may run twice.
func SyncsUnderClaims() map[string]int64 {
	return map[string]int64{
		SyncClaim: 1, SyncFinish: 0, SyncClaimUnsynced: 0, SyncFinishUnsynced: 0,
		SyncMarkSubmitted: 0, SyncPutRun: 1, SyncRenewRun: 0, SyncEndRun: 0,
	}
}

// SyncsUnderFull returns what [Syncs] wants of a journal that also syncs
// results and run ends (the stores' "full" setting).
func SyncsUnderFull() map[string]int64 {
	want := SyncsUnderClaims()
	want[SyncFinish], want[SyncEndRun] = 1, 1
	return want
}

// Syncs checks which of j's writes wait for the disk, as j's Stats count
// them (j must implement [journaldriver.Stater]): it makes one write of each kind
// the runner makes on a call's and a run's path, one at a time, and
// compares the syncs each added with want, by the names above. The
// unsynced writes are made only if j implements [journaldriver.Unsynced] and the
// run writes only if it implements [journaldriver.Runs]; each write must add one
// to Writes by the time Get returns (a journal may make a write, such as a
// submitted mark, later, but before its next read).
func Syncs(t *testing.T, j journaldriver.Journal, want map[string]int64) {
	t.Helper()
	st, ok := j.(journaldriver.Stater)
	if !ok {
		t.Fatalf("%T does not report its Stats (journaldriver.Stater)", j)
	}
	ctx := t.Context()
	k1, k2 := key("synced"), key("unsynced")
	type write struct {
		name string
		do   func() error
	}
	writes := []write{
		{SyncClaim, func() error { _, _, err := j.Claim(ctx, k1, digest(k1), idem(k1), "w", live); return err }},
		{SyncFinish, func() error { return j.Finish(ctx, k1, "w", textResult("one")) }},
	}
	if u, ok := j.(journaldriver.Unsynced); ok {
		writes = append(writes,
			write{SyncClaimUnsynced, func() error { _, _, err := u.ClaimUnsynced(ctx, k2, digest(k2), idem(k2), "w", live); return err }},
			write{SyncFinishUnsynced, func() error { return u.FinishUnsynced(ctx, k2, "w", textResult("two")) }})
	}
	writes = append(writes, write{SyncMarkSubmitted, func() error { return j.MarkSubmitted(ctx, []journaldriver.Key{k1, k2}) }})
	if r, ok := j.(journaldriver.Runs); ok {
		writes = append(writes,
			write{SyncPutRun, func() error {
				return r.PutRun(ctx, journaldriver.Run{Backend: k1.Backend, Thread: k1.Thread, State: journaldriver.RunRunning, Owner: "w", LeaseUntil: time.Now().Add(live)})
			}},
			write{SyncRenewRun, func() error { return r.RenewRun(ctx, k1.Backend, k1.Thread, "w", live) }},
			write{SyncEndRun, func() error { return r.EndRun(ctx, k1.Backend, k1.Thread, "w", journaldriver.RunFinished, "") }})
	}
	got := map[string]int64{}
	for _, w := range writes {
		before := st.Stats()
		if err := w.do(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		// A journal may make a write later, but before its next read.
		if _, _, err := j.Get(ctx, k1); err != nil {
			t.Fatalf("Get after %s: %v", w.name, err)
		}
		after := st.Stats()
		if n := after.Writes - before.Writes; n != 1 {
			t.Errorf("%s: Stats counted %d writes, want 1", w.name, n)
		}
		got[w.name] = after.Syncs - before.Syncs
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("want syncs of %q, a write this journal does not make", name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("syncs per write (-want +got):\n%s", diff)
	}
}
