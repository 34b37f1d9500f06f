package journaltest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// approvalCases are the rules of [journaldriver.Approvals], checked for journals
// that implement it.
var approvalCases = []optionalCase[journaldriver.Approvals]{
	{
		name:        "ApprovalRequest",
		explanation: "RequestApproval stores a pending approval once: a second request for the key returns the first, unchanged; GetApproval and ListApprovals return it.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			a := approval("a", time.Now())
			got, created, err := j.RequestApproval(t.Context(), a)
			if err != nil || !created {
				t.Fatalf("RequestApproval = %v, %v; want created", created, err)
			}
			checkApproval(t, "RequestApproval", a, got)
			again := a
			again.Why = "another reason"
			got, created, err = j.RequestApproval(t.Context(), again)
			if err != nil || created {
				t.Fatalf("a second RequestApproval = %v, %v; want not created", created, err)
			}
			checkApproval(t, "the second RequestApproval", a, got)
			got, ok, err := j.GetApproval(t.Context(), a.Key)
			if err != nil || !ok {
				t.Fatalf("GetApproval = %v, %v", ok, err)
			}
			checkApproval(t, "GetApproval", a, got)
			if _, ok, err := j.GetApproval(t.Context(), key("none")); ok || err != nil {
				t.Errorf("GetApproval of an unknown key = %v, %v; want none", ok, err)
			}
		},
	},
	{
		name:        "ApprovalDecideOnce",
		explanation: "DecideApproval records a decision (approval, reason, edited arguments, actor, time) once: a second decision is refused with ErrDecided and the first stays; an unknown key gives ErrNoApproval.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			a := approval("a", time.Now())
			if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
				t.Fatal(err)
			}
			d := journaldriver.Decision{Approved: true, Reason: "fine", Arguments: []byte(`{"amount":90}`), Actor: "ada", At: time.Now()}
			got, err := j.DecideApproval(t.Context(), a.Key, d)
			if err != nil {
				t.Fatal(err)
			}
			a.Decision = &d
			checkApproval(t, "DecideApproval", a, got)
			if _, err := j.DecideApproval(t.Context(), a.Key, journaldriver.Decision{Reason: "no", Actor: "bob", At: time.Now()}); !errors.Is(err, journaldriver.ErrDecided) {
				t.Errorf("a second decision: %v, want ErrDecided", err)
			}
			got, _, _ = j.GetApproval(t.Context(), a.Key)
			checkApproval(t, "GetApproval after a refused decision", a, got)
			if _, err := j.DecideApproval(t.Context(), key("none"), d); !errors.Is(err, journaldriver.ErrNoApproval) {
				t.Errorf("DecideApproval of an unknown key: %v, want ErrNoApproval", err)
			}
		},
	},
	{
		// Guards the copy a journal keeps of a decision: a Memory that
		// kept the caller's slice changed its record when the caller
		// reused its buffer.
		name:        "ApprovalDecisionKept",
		explanation: "DecideApproval keeps the decision's edited arguments as they were when it was called: the caller may reuse its buffer afterwards.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			a := approval("a", time.Now())
			if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
				t.Fatal(err)
			}
			buf := []byte(`{"amount":90}`)
			d := journaldriver.Decision{Approved: true, Arguments: buf, Actor: "ada", At: time.Now()}
			if _, err := j.DecideApproval(t.Context(), a.Key, d); err != nil {
				t.Fatal(err)
			}
			copy(buf, `{"amount":10}`)
			got, ok, err := j.GetApproval(t.Context(), a.Key)
			if err != nil || !ok || got.Decision == nil {
				t.Fatalf("GetApproval = %+v, %v, %v; want the decision", got, ok, err)
			}
			if diff := cmp.Diff(`{"amount":90}`, string(got.Decision.Arguments)); diff != "" {
				t.Errorf("decided arguments changed with the caller's buffer (-want +got):\n%s", diff)
			}
		},
	},
	{
		name:        "ApprovalDecideRace",
		explanation: "Of several deciders racing for one approval, exactly one decision is recorded; the others get ErrDecided.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			a := approval("a", time.Now())
			if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
				t.Fatal(err)
			}
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				wins []string
			)
			for _, actor := range []string{"a", "b", "c", "d"} {
				wg.Go(func() {
					_, err := j.DecideApproval(t.Context(), a.Key, journaldriver.Decision{Approved: true, Actor: actor, At: time.Now()})
					switch {
					case err == nil:
						mu.Lock()
						wins = append(wins, actor)
						mu.Unlock()
					case !errors.Is(err, journaldriver.ErrDecided):
						t.Errorf("DecideApproval by %s: %v", actor, err)
					}
				})
			}
			wg.Wait()
			got, _, _ := j.GetApproval(t.Context(), a.Key)
			if len(wins) != 1 || got.Decision == nil || got.Decision.Actor != wins[0] {
				t.Errorf("winners %v, stored decision %+v; want exactly one, stored", wins, got.Decision)
			}
		},
	},
	{
		name:        "ApprovalPrune",
		explanation: "Prune deletes the approvals decided before its time, and keeps the pending ones and those decided later.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			now := time.Now()
			old, recent, pending := approval("old", now), approval("recent", now), approval("pending", now)
			for _, a := range []journaldriver.Approval{old, recent, pending} {
				if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
					t.Fatal(err)
				}
			}
			for k, at := range map[journaldriver.Key]time.Time{old.Key: now.Add(-2 * time.Hour), recent.Key: now} {
				if _, err := j.DecideApproval(t.Context(), k, journaldriver.Decision{Approved: true, At: at}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := j.(journaldriver.Journal).Prune(t.Context(), now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			for k, want := range map[journaldriver.Key]bool{old.Key: false, recent.Key: true, pending.Key: true} {
				if _, ok, err := j.GetApproval(t.Context(), k); ok != want || err != nil {
					t.Errorf("approval %s after Prune: present %v (%v), want %v", k.Call, ok, err, want)
				}
			}
		},
	},
	{
		name:        "ApprovalList",
		explanation: "ListApprovals returns the approvals of one thread of one backend, oldest first.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			t0 := time.Now().Add(-time.Hour)
			second, first := approval("b", t0.Add(time.Minute)), approval("a", t0)
			other := approval("c", t0)
			other.Key.Thread = "thread-2"
			for _, a := range []journaldriver.Approval{second, first, other} {
				if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
					t.Fatal(err)
				}
			}
			got, err := j.ListApprovals(t.Context(), "journaltest", "thread-1")
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, a := range got {
				calls = append(calls, a.Key.Call)
			}
			if diff := cmp.Diff([]string{"a", "b"}, calls); diff != "" {
				t.Errorf("ListApprovals (-want +got):\n%s", diff)
			}
		},
	},
	{
		name:        "ApprovalExpired",
		explanation: "ExpiredApprovals returns the undecided approvals of one backend, on every thread, whose expiry is at or before its time, earliest expiry first, at most limit; decided ones, unexpired ones, ones that never expire and other backends' are left out.",
		f: func(t *testing.T, j journaldriver.Approvals) {
			now := time.Now()
			mk := func(call, thread string, expires time.Time) journaldriver.Approval {
				a := approval(call, now.Add(-48*time.Hour))
				a.Key.Thread, a.Expires = thread, expires
				return a
			}
			late := mk("late", "thread-1", now.Add(-time.Minute))
			early := mk("early", "thread-2", now.Add(-time.Hour))
			decided := mk("decided", "thread-1", now.Add(-time.Hour))
			future := mk("future", "thread-1", now.Add(time.Hour))
			never := mk("never", "thread-1", time.Time{})
			other := mk("other", "thread-1", now.Add(-time.Hour))
			other.Key.Backend = "another"
			for _, a := range []journaldriver.Approval{late, early, decided, future, never, other} {
				if _, _, err := j.RequestApproval(t.Context(), a); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := j.DecideApproval(t.Context(), decided.Key, journaldriver.Decision{Actor: "ada", At: now}); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				limit int
				want  []string
			}{{10, []string{"early", "late"}}, {1, []string{"early"}}, {0, nil}} {
				got, err := j.ExpiredApprovals(t.Context(), "journaltest", now, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				var calls []string
				for _, a := range got {
					calls = append(calls, a.Key.Call)
				}
				if diff := cmp.Diff(tc.want, calls); diff != "" {
					t.Errorf("ExpiredApprovals(limit %d) (-want +got):\n%s", tc.limit, diff)
				}
			}
		},
	},
}

// approval returns a pending approval of call requested at t, expiring a
// day later.
func approval(call string, t time.Time) journaldriver.Approval {
	return journaldriver.Approval{Key: key(call), Tool: "refund", Arguments: []byte(`{"amount":150}`), Why: "over 100",
		Requested: t, Expires: t.Add(24 * time.Hour)}
}

// checkApproval compares approvals, times within slack.
func checkApproval(t *testing.T, what string, want, got journaldriver.Approval) {
	t.Helper()
	if diff := cmp.Diff(want, got, nearTimes); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// nearTimes equates times within slack (a store may round them).
var nearTimes = cmp.Comparer(func(a, b time.Time) bool { d := a.Sub(b); return d < slack && d > -slack })
