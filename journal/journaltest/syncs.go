package journaltest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
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
		{SyncClaim, callWrite(ctx, j, SyncClaim, k1)},
		{SyncFinish, callWrite(ctx, j, SyncFinish, k1)},
	}
	if _, ok := j.(journaldriver.Unsynced); ok {
		writes = append(writes,
			write{SyncClaimUnsynced, callWrite(ctx, j, SyncClaimUnsynced, k2)},
			write{SyncFinishUnsynced, callWrite(ctx, j, SyncFinishUnsynced, k2)})
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

// callWrite returns the write name (SyncClaim, SyncClaimUnsynced,
// SyncFinish, SyncFinishUnsynced or SyncMarkSubmitted) of the call k, by
// owner "w": a finish needs k claimed by "w"; the unsynced writes need j
// to implement [journaldriver.Unsynced] (the write fails if it does not).
func callWrite(ctx context.Context, j journaldriver.Journal, name string, k journaldriver.Key) func() error {
	u, _ := j.(journaldriver.Unsynced)
	noUnsynced := func() error { return fmt.Errorf("%T has no %s (journaldriver.Unsynced)", j, name) }
	switch name {
	case SyncClaim:
		return func() error { _, _, err := j.Claim(ctx, k, digest(k), idem(k), "w", live); return err }
	case SyncClaimUnsynced:
		if u == nil {
			return noUnsynced
		}
		return func() error { _, _, err := u.ClaimUnsynced(ctx, k, digest(k), idem(k), "w", live); return err }
	case SyncFinish:
		return func() error { return j.Finish(ctx, k, "w", textResult("result of "+k.Call)) }
	case SyncFinishUnsynced:
		if u == nil {
			return noUnsynced
		}
		return func() error { return u.FinishUnsynced(ctx, k, "w", textResult("result of "+k.Call)) }
	case SyncMarkSubmitted:
		return func() error { return j.MarkSubmitted(ctx, []journaldriver.Key{k}) }
	}
	return func() error { return fmt.Errorf("journaltest: no write %q", name) }
}

// Batching is what [SyncsBatched] needs of a journal that makes its
// writes in batches (group commit): hooks of the journal's own tests into
// its writer.
type Batching struct {
	// Hold makes the journal's writer busy with a write of its own until
	// release is called, so that the writes made meanwhile wait and go
	// together into the next batch. The held write counts, in Stats, as
	// one write in a commit of its own, not synced; release returns once
	// it is committed.
	Hold func(t *testing.T) (release func())
	// Queued returns how many writes wait for the next batch (not counting
	// those the journal makes later, such as submitted marks).
	Queued func() int
}

// SyncsBatched checks that a batch of writes (a group commit) waits for
// the disk if one of its writes must, whatever their order in it: the
// claim of a call that may not run twice, batched after the unsynced
// claim of one that may, or after a submitted mark (which a journal writes
// first in its next batch), is on disk before it is acknowledged. want
// says which writes must be synced, by the names [Syncs] uses: a batch
// must add one to Syncs if one of its writes has a want above zero, and
// none otherwise. SyncsBatched makes every ordered pair of the writes of
// a call (claim and finish, synced or not) in one batch, and each of them
// with a submitted mark, with b holding the writer while they queue, and
// checks from j's Stats that each pair took one commit and the syncs it
// added. j must implement [journaldriver.Stater] and
// [journaldriver.Unsynced].
func SyncsBatched(t *testing.T, j journaldriver.Journal, want map[string]int64, b Batching) {
	t.Helper()
	st, ok := j.(journaldriver.Stater)
	if !ok {
		t.Fatalf("%T does not report its Stats (journaldriver.Stater)", j)
	}
	if _, ok := j.(journaldriver.Unsynced); !ok {
		t.Fatalf("%T has no writes without a sync (journaldriver.Unsynced)", j)
	}
	ctx := t.Context()
	calls := []string{SyncClaim, SyncClaimUnsynced, SyncFinish, SyncFinishUnsynced}
	var batches [][]string
	for _, first := range calls {
		for _, second := range calls {
			batches = append(batches, []string{first, second})
		}
		batches = append(batches, []string{first, SyncMarkSubmitted})
	}
	wantStats, got := map[string]journaldriver.Stats{}, map[string]journaldriver.Stats{}
	for i, batch := range batches {
		name := strings.Join(batch, ", ")
		w := journaldriver.Stats{Writes: int64(len(batch)), Commits: 1}
		writes := make([]func() error, len(batch))
		for n, kind := range batch {
			if want[kind] > 0 {
				w.Syncs = 1
			}
			// Keys in the order of the writes, for a journal that orders
			// a batch's statements by key.
			k := journaldriver.Key{Backend: "journaltest", Thread: "batched", Turn: fmt.Sprintf("batch-%02d", i), Call: fmt.Sprint("write-", n)}
			if kind == SyncFinish || kind == SyncFinishUnsynced {
				claim(t, j, k, "w", live)
			}
			writes[n] = callWrite(ctx, j, kind, k)
		}
		wantStats[name] = w
		got[name] = batched(t, st, b, batch, writes)
	}
	if diff := cmp.Diff(wantStats, got); diff != "" {
		t.Errorf("what each batch of two writes added to Stats, beside the held write (-want +got):\n%s", diff)
	}
}

// batched makes writes in one batch, with b holding the writer while they
// queue in order (a submitted mark, which a journal makes first in its
// next batch, is made last), and returns what they added to st's Stats.
func batched(t *testing.T, st journaldriver.Stater, b Batching, kinds []string, writes []func() error) journaldriver.Stats {
	t.Helper()
	before := st.Stats()
	release := b.Hold(t)
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	queued := 0
	for n, write := range writes {
		if kinds[n] == SyncMarkSubmitted {
			continue
		}
		done := make(chan struct{})
		wg.Go(func() { defer close(done); errs[n] = write() })
		queued++
		for b.Queued() < queued {
			select {
			case <-done:
				release()
				t.Fatalf("%s returned before it was batched (err %v)", kinds[n], errs[n])
			default:
				// The write is made by a goroutine just started: let it run.
				runtime.Gosched()
			}
		}
	}
	for n, write := range writes {
		if kinds[n] == SyncMarkSubmitted {
			errs[n] = write()
		}
	}
	release()
	wg.Wait()
	for n, err := range errs {
		if err != nil {
			t.Fatalf("%s in %v: %v", kinds[n], kinds, err)
		}
	}
	after := st.Stats()
	// The held write: one write, in a commit of its own, not synced.
	return journaldriver.Stats{Writes: after.Writes - before.Writes - 1, Commits: after.Commits - before.Commits - 1, Syncs: after.Syncs - before.Syncs}
}
