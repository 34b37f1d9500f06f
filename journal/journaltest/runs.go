package journaltest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// runCases are the rules of [journaldriver.Runs], checked for journals that
// implement it.
var runCases = []optionalCase[journaldriver.Runs]{
	{
		name:        "RunPutList",
		explanation: "PutRun records a run, and updates it when it exists (keeping when it was created); ListRuns returns the runs of a backend (or all), in a state (or any), oldest first, at most limit.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			lease := time.Now().Add(time.Hour)
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "t1", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: lease, Options: `{"max_steps":3}`},
				{Backend: "journaltest", Thread: "t2", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: lease},
				{Backend: "other", Thread: "t3", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: lease},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond) // distinct creation times
			}
			if err := j.PutRun(ctx, journaldriver.Run{Backend: "journaltest", Thread: "t1", State: journaldriver.RunFailed, Owner: "a", Error: "boom"}); err != nil {
				t.Fatal(err)
			}
			threads := func(rs []journaldriver.Run) []string {
				var out []string
				for _, r := range rs {
					out = append(out, r.Thread)
				}
				return out
			}
			for _, tc := range []struct {
				backend string
				state   journaldriver.RunState
				limit   int
				want    []string
			}{
				{"journaltest", "", 10, []string{"t1", "t2"}},
				{"", "", 10, []string{"t1", "t2", "t3"}},
				{"", "", 2, []string{"t1", "t2"}},
				{"journaltest", journaldriver.RunRunning, 10, []string{"t2"}},
				{"journaltest", journaldriver.RunFailed, 10, []string{"t1"}},
			} {
				got, err := j.ListRuns(ctx, tc.backend, tc.state, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, threads(got)); diff != "" {
					t.Errorf("ListRuns(%q, %q, %d) (-want +got):\n%s", tc.backend, tc.state, tc.limit, diff)
				}
			}
			failed, _ := j.ListRuns(ctx, "journaltest", journaldriver.RunFailed, 1)
			if len(failed) != 1 || failed[0].Error != "boom" || failed[0].Created.IsZero() || failed[0].Updated.Before(failed[0].Created) {
				t.Errorf("the updated run = %+v, want its error and its creation time kept", failed)
			}
		},
	},
	{
		name: "RunPutHeld",
		explanation: "PutRun does not take a run running under another owner's lease (ErrLeaseLost, nothing changed); " +
			"it updates one of the same owner, one whose lease ended, or one that is not running.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			put := func(thread string, state journaldriver.RunState, owner string, lease time.Time) error {
				return j.PutRun(ctx, journaldriver.Run{Backend: "journaltest", Thread: thread, State: state, Owner: owner, LeaseUntil: lease, Options: owner})
			}
			held, ended := time.Now().Add(time.Hour), time.Now().Add(-time.Second)
			for _, r := range []struct {
				thread string
				state  journaldriver.RunState
				lease  time.Time
			}{{"held", journaldriver.RunRunning, held}, {"expired", journaldriver.RunRunning, ended}, {"paused", journaldriver.RunAwaiting, time.Time{}}, {"over", journaldriver.RunFinished, time.Time{}}} {
				if err := put(r.thread, r.state, "a", r.lease); err != nil {
					t.Fatal(err)
				}
			}
			if err := put("held", journaldriver.RunRunning, "b", held); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("PutRun of a run held by another owner = %v, want ErrLeaseLost", err)
			}
			if err := put("held", journaldriver.RunRunning, "a", held); err != nil {
				t.Errorf("PutRun by the owner that holds the run: %v", err)
			}
			for _, thread := range []string{"expired", "paused", "over"} {
				if err := put(thread, journaldriver.RunRunning, "b", held); err != nil {
					t.Errorf("PutRun of run %s by another owner: %v, want it taken", thread, err)
				}
			}
			got, err := j.ListRuns(ctx, "journaltest", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			owners := map[string]string{}
			for _, r := range got {
				owners[r.Thread] = r.Owner + "/" + r.Options
			}
			if diff := cmp.Diff(map[string]string{"held": "a/a", "expired": "b/b", "paused": "b/b", "over": "b/b"}, owners); diff != "" {
				t.Errorf("owners after PutRun (-want +got):\n%s", diff)
			}
		},
	},
	{
		name:        "RunMove",
		explanation: "MoveRun moves the owner's running run to another thread, with new options, keeping its state, owner and lease; another owner's move, or a move of an ended run, returns ErrLeaseLost and changes nothing.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			lease := time.Now().Add(time.Hour)
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "start-1", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: lease, Options: `{"input":"hi"}`},
				{Backend: "journaltest", Thread: "start-2", State: journaldriver.RunFailed, Owner: "a"},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct{ from, owner string }{{"start-1", "b"}, {"start-2", "a"}, {"start-9", "a"}} {
				if err := j.MoveRun(ctx, "journaltest", tc.from, "thread-x", tc.owner, "{}"); !errors.Is(err, journaldriver.ErrLeaseLost) {
					t.Errorf("MoveRun(%s) by %s = %v, want ErrLeaseLost", tc.from, tc.owner, err)
				}
			}
			if err := j.MoveRun(ctx, "journaltest", "start-1", "thread-1", "a", `{"max_steps":3}`); err != nil {
				t.Fatalf("MoveRun by its owner: %v", err)
			}
			got, err := j.ListRuns(ctx, "journaltest", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []journaldriver.Run{
				{Backend: "journaltest", Thread: "start-2", State: journaldriver.RunFailed, Owner: "a"},
				{Backend: "journaltest", Thread: "thread-1", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: lease, Options: `{"max_steps":3}`},
			}
			opts := cmp.Options{equateTimes, cmpopts.IgnoreFields(journaldriver.Run{}, "Created", "Updated", "LeaseUntil"), cmpopts.SortSlices(func(a, b journaldriver.Run) bool { return a.Thread < b.Thread })}
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("runs after MoveRun (-want +got):\n%s", diff)
			}
			for _, r := range got {
				if r.Thread == "thread-1" {
					within(t, "moved run's LeaseUntil", r.LeaseUntil, lease, lease)
				}
			}
		},
	},
	{
		name:        "RunRenewClaim",
		explanation: "RenewRun extends the owner's lease, and fails with ErrLeaseLost for another owner or a run not running; ClaimRuns takes only running runs whose lease expired, oldest lease first, at most limit, giving them to the claimer with a new lease; EndRun by the former owner is refused with ErrLeaseLost, by the owner recorded.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			past := time.Now().Add(-time.Minute)
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "expired-late", State: journaldriver.RunRunning, Owner: "dead", LeaseUntil: past.Add(30 * time.Second)},
				{Backend: "journaltest", Thread: "expired-early", State: journaldriver.RunRunning, Owner: "dead", LeaseUntil: past},
				{Backend: "journaltest", Thread: "alive", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: time.Now().Add(time.Hour)},
				{Backend: "journaltest", Thread: "paused", State: journaldriver.RunAwaiting, Owner: "dead", LeaseUntil: past},
				{Backend: "other", Thread: "elsewhere", State: journaldriver.RunRunning, Owner: "dead", LeaseUntil: past},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.RenewRun(ctx, "journaltest", "alive", "a", time.Hour); err != nil {
				t.Errorf("RenewRun by the owner: %v", err)
			}
			if err := j.RenewRun(ctx, "journaltest", "alive", "b", time.Hour); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("RenewRun by another owner: %v, want ErrLeaseLost", err)
			}
			if err := j.RenewRun(ctx, "journaltest", "paused", "dead", time.Hour); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("RenewRun of a paused run: %v, want ErrLeaseLost", err)
			}
			got, err := j.ClaimRuns(ctx, "journaltest", "b", time.Hour, 1)
			if err != nil || len(got) != 1 || got[0].Thread != "expired-early" || got[0].Owner != "b" || !got[0].LeaseUntil.After(time.Now()) {
				t.Fatalf("ClaimRuns(limit 1) = %+v, %v; want expired-early, now b's", got, err)
			}
			got, err = j.ClaimRuns(ctx, "journaltest", "c", time.Hour, 10)
			if err != nil || len(got) != 1 || got[0].Thread != "expired-late" {
				t.Fatalf("ClaimRuns = %+v, %v; want expired-late only", got, err)
			}
			if got, _ := j.ClaimRuns(ctx, "journaltest", "d", time.Hour, 10); len(got) != 0 {
				t.Errorf("a third ClaimRuns = %+v, want nothing left", got)
			}
			if err := j.RenewRun(ctx, "journaltest", "expired-early", "b", time.Hour); err != nil {
				t.Errorf("RenewRun by the claimer: %v", err)
			}
			if err := j.EndRun(ctx, "journaltest", "expired-early", "dead", journaldriver.RunFailed, "late"); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Errorf("EndRun by the former owner: %v, want ErrLeaseLost", err)
			}
			if err := j.EndRun(ctx, "journaltest", "expired-early", "b", journaldriver.RunFinished, ""); err != nil {
				t.Errorf("EndRun by the owner: %v", err)
			}
			done, _ := j.ListRuns(ctx, "journaltest", journaldriver.RunFinished, 10)
			if len(done) != 1 || done[0].Thread != "expired-early" || done[0].Owner != "b" {
				t.Errorf("finished runs %+v, want expired-early, b's", done)
			}
		},
	},
	{
		name:        "RunLetGo",
		explanation: "RenewRun with a lease of 0 ends the owner's lease at once, the run left running: another owner's PutRun, refused while the lease lasted, takes it, and ClaimRuns hands it out, without waiting (a decision lets a run go this way, so that a resume elsewhere goes on at once).",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			for _, thread := range []string{"resumed", "taken"} {
				if err := j.PutRun(ctx, journaldriver.Run{Backend: "journaltest", Thread: thread, State: journaldriver.RunRunning, Owner: "decider", LeaseUntil: time.Now().Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
			resume := journaldriver.Run{Backend: "journaltest", Thread: "resumed", State: journaldriver.RunRunning, Owner: "resumer", LeaseUntil: time.Now().Add(time.Hour)}
			if err := j.PutRun(ctx, resume); !errors.Is(err, journaldriver.ErrLeaseLost) {
				t.Fatalf("PutRun under the decider's live lease = %v, want ErrLeaseLost", err)
			}
			for _, thread := range []string{"resumed", "taken"} {
				if err := j.RenewRun(ctx, "journaltest", thread, "decider", 0); err != nil {
					t.Fatalf("RenewRun(%s, 0) by the owner: %v", thread, err)
				}
			}
			if err := j.PutRun(ctx, resume); err != nil {
				t.Errorf("PutRun once the decider let the run go = %v, want it taken", err)
			}
			got, err := j.ClaimRuns(ctx, "journaltest", "taker", live, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Thread != "taken" || got[0].Owner != "taker" || got[0].State != journaldriver.RunRunning {
				t.Errorf("ClaimRuns once the decider let the runs go = %+v, want taken (resumed is the resumer's, under a live lease)", got)
			}
		},
	},
	{
		name:        "RunClaimRace",
		explanation: "Of several owners claiming expired runs at once, each run goes to exactly one, and once claimed (its lease live) to no other: a journal that hands a live run to a second owner fails at once, naming the run, rather than looping until the test's deadline.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			const runs = 20
			for i := range runs {
				if err := j.PutRun(ctx, journaldriver.Run{Backend: "journaltest", Thread: "t" + string(rune('a'+i)), State: journaldriver.RunRunning, Owner: "dead", LeaseUntil: time.Now().Add(-time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				got    = map[string]string{}
				stolen []string
			)
			for _, owner := range []string{"a", "b", "c", "d"} {
				wg.Go(func() {
					// Each claim that finds runs takes at least one: no
					// owner needs more rounds than there are runs, even
					// with a journal that hands out live runs.
					for range runs + 1 {
						rs, err := j.ClaimRuns(ctx, "journaltest", owner, time.Hour, 3)
						if err != nil {
							t.Errorf("ClaimRuns by %s: %v", owner, err)
							return
						}
						if len(rs) == 0 {
							return
						}
						mu.Lock()
						for _, r := range rs {
							switch prev, dup := got[r.Thread]; {
							case dup && prev == owner:
								stolen = append(stolen, fmt.Sprintf("run %s claimed again by %s, its lease live", r.Thread, owner))
							case dup:
								stolen = append(stolen, fmt.Sprintf("run %s held by %s and %s at once: %s's claim took it under %s's live lease", r.Thread, prev, owner, owner, prev))
							}
							got[r.Thread] = owner
						}
						done := len(stolen) > 0
						mu.Unlock()
						if done {
							return
						}
					}
				})
			}
			wg.Wait()
			if len(stolen) > 0 {
				t.Fatalf("a run whose lease was live was claimed again (%d times), the first: %s", len(stolen), stolen[0])
			}
			if len(got) != runs {
				t.Errorf("%d runs claimed, want %d", len(got), runs)
			}
			list, err := j.ListRuns(ctx, "journaltest", journaldriver.RunRunning, runs+1)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list {
				if got[r.Thread] != r.Owner {
					t.Errorf("run %s is recorded as %s's, claimed by %s", r.Thread, r.Owner, got[r.Thread])
				}
			}
		},
	},
	{
		name:        "RunPrune",
		explanation: "Prune deletes the ended runs last updated before its time, and keeps running and paused ones.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "done", State: journaldriver.RunFinished},
				{Backend: "journaltest", Thread: "running", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: time.Now().Add(time.Hour)},
				{Backend: "journaltest", Thread: "paused", State: journaldriver.RunAwaiting},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := j.(journaldriver.Journal).Prune(ctx, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			left, err := j.ListRuns(ctx, "journaltest", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			var threads []string
			for _, r := range left {
				threads = append(threads, r.Thread)
			}
			if diff := cmp.Diff([]string{"running", "paused"}, threads); diff != "" {
				t.Errorf("runs after Prune (-want +got):\n%s", diff)
			}
		},
	},
	{
		name:        "RunWake",
		explanation: "WakeRun moves a run awaiting approval to running under the given owner with a lease of the given length, so that ClaimRuns hands it out once that lease expires; it leaves a running, ended or unknown run as it is, and reports whether it changed one.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			later := time.Now().Add(time.Hour)
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "paused", State: journaldriver.RunAwaiting, Owner: "pauser"},
				{Backend: "journaltest", Thread: "running", State: journaldriver.RunRunning, Owner: "worker", LeaseUntil: later},
				{Backend: "journaltest", Thread: "done", State: journaldriver.RunFinished, Owner: "worker"},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			for thread, want := range map[string]bool{"paused": true, "running": false, "done": false, "unknown": false} {
				if woke, err := j.WakeRun(ctx, "journaltest", thread, "decider", expired); err != nil || woke != want {
					t.Errorf("WakeRun(%s) = %v, %v; want %v, nil", thread, woke, err, want)
				}
			}
			if woke, err := j.WakeRun(ctx, "journaltest", "paused", "other", live); err != nil || woke {
				t.Errorf("a second WakeRun = %v, %v; want false (running already), nil", woke, err)
			}
			got, err := j.ClaimRuns(ctx, "journaltest", "taker", live, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Thread != "paused" || got[0].State != journaldriver.RunRunning || got[0].Owner != "taker" {
				t.Errorf("ClaimRuns after the wake = %+v, want the woken run, running, now the taker's", got)
			}
			runs, err := j.ListRuns(ctx, "journaltest", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]string{}
			for _, r := range runs {
				states[r.Thread] = string(r.State) + "/" + r.Owner
			}
			want := map[string]string{"paused": "running/taker", "running": "running/worker", "done": "finished/worker"}
			if diff := cmp.Diff(want, states); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
		},
	},
	{
		name: "PruneKeepsLiveRuns",
		explanation: "Prune never deletes what a run that is not over may still need, however old: of a thread whose run is running or awaiting approval, the results, submitted or not, and (in a journal that keeps approvals, or notes) the decided approvals and the notes stay; " +
			"the results, decided approvals and notes of threads whose run ended or that have no run go; pending approvals always stay.",
		f: func(t *testing.T, j journaldriver.Runs) {
			ctx := t.Context()
			jj := j.(journaldriver.Journal)
			ap, approvals := j.(journaldriver.Approvals)
			notes, hasNotes := j.(journaldriver.Notes)
			liveRuns := map[string]bool{"running": true, "paused": true, "failed": false, "unrecorded": false}
			for _, r := range []journaldriver.Run{
				{Backend: "journaltest", Thread: "running", State: journaldriver.RunRunning, Owner: "a", LeaseUntil: time.Now().Add(time.Hour)},
				{Backend: "journaltest", Thread: "paused", State: journaldriver.RunAwaiting},
				{Backend: "journaltest", Thread: "failed", State: journaldriver.RunFailed, Error: "the backend failed"},
			} {
				if err := j.PutRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			threadKey := func(thread, call string) journaldriver.Key {
				return journaldriver.Key{Backend: "journaltest", Thread: thread, Turn: "turn-1", Call: call}
			}
			for thread := range liveRuns {
				kept, sent := threadKey(thread, "kept"), threadKey(thread, "sent")
				for _, k := range []journaldriver.Key{kept, sent} {
					claim(t, jj, k, "owner-a", live)
					finish(t, jj, k, "owner-a", textResult("charged"))
				}
				markSubmitted(t, jj, sent)
				if hasNotes {
					if err := notes.SetNote(ctx, "journaltest", thread, "totals", "3 steps"); err != nil {
						t.Fatal(err)
					}
				}
				if !approvals {
					continue
				}
				for _, call := range []string{"decided", "pending"} {
					a := approval(call, time.Now().Add(-2*time.Hour))
					a.Key = threadKey(thread, call)
					if _, _, err := ap.RequestApproval(ctx, a); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := ap.DecideApproval(ctx, threadKey(thread, "decided"), journaldriver.Decision{Approved: true, At: time.Now().Add(-2 * time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
			n, err := jj.Prune(ctx, time.Now().Add(time.Hour))
			if err != nil || n != 4 {
				t.Errorf("Prune = %d, %v; want 4 (every result of the runs that are over, none of the live ones), nil", n, err)
			}
			for thread, isLive := range liveRuns {
				if _, ok := get(t, jj, threadKey(thread, "kept")); ok != isLive {
					t.Errorf("thread %s: the result not submitted present %v after Prune, want %v", thread, ok, isLive)
				}
				if _, ok := get(t, jj, threadKey(thread, "sent")); ok != isLive {
					t.Errorf("thread %s: the submitted result present %v after Prune, want %v", thread, ok, isLive)
				}
				if hasNotes {
					if _, ok, err := notes.Note(ctx, "journaltest", thread, "totals"); ok != isLive || err != nil {
						t.Errorf("thread %s: its note present %v (%v) after Prune, want %v", thread, ok, err, isLive)
					}
				}
				if !approvals {
					continue
				}
				for call, want := range map[string]bool{"decided": isLive, "pending": true} {
					if _, ok, err := ap.GetApproval(ctx, threadKey(thread, call)); ok != want || err != nil {
						t.Errorf("thread %s: the %s approval present %v (%v) after Prune, want %v", thread, call, ok, err, want)
					}
				}
			}
		},
	},
}
