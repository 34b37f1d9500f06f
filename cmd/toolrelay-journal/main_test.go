package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// TestCommands: runs, orphans, calls, show and prune on a SQLite journal
// holding a finished run, a run whose worker died (its call in doubt), a
// run whose worker lives, two paused runs with their approvals.
func TestCommands(t *testing.T) {
	ctx := t.Context()
	url := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
	store, err := journal.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	runs := store.(journaldriver.Runs)
	for _, r := range []journaldriver.Run{
		{Backend: "openai", Thread: "sess_done", State: journaldriver.RunFinished, Owner: "w1"},
		{Backend: "openai", Thread: "sess_dead", State: journaldriver.RunRunning, Owner: "w2", LeaseUntil: time.Now().Add(-time.Minute)},
		{Backend: "openai", Thread: "sess_paused", State: journaldriver.RunAwaiting, Owner: "w1"},
		{Backend: "openai", Thread: "sess_live", State: journaldriver.RunRunning, Owner: "w3", LeaseUntil: time.Now().Add(time.Hour)},
		{Backend: "openai", Thread: "sess_waits", State: journaldriver.RunAwaiting, Owner: "w1"},
	} {
		if err := runs.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ap := store.(journaldriver.Approvals)
	for _, key := range []journaldriver.Key{
		{Backend: "openai", Thread: "sess_paused", Turn: "turn_1", Call: "call_7"},
		{Backend: "openai", Thread: "sess_waits", Turn: "turn_1", Call: "call_8"},
	} {
		if _, _, err := ap.RequestApproval(ctx, journaldriver.Approval{Key: key, Tool: "refund", Arguments: []byte(`{}`), Why: "over 100", Requested: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	calls := []struct {
		key   journaldriver.Key
		owner string
		lease time.Duration
		done  bool
	}{
		{journaldriver.Key{Backend: "openai", Thread: "sess_done", Turn: "turn_1", Call: "call_3"}, "w1", time.Hour, true},
		{journaldriver.Key{Backend: "openai", Thread: "sess_dead", Turn: "turn_1", Call: "call_9"}, "w2", -time.Minute, false},
		{journaldriver.Key{Backend: "openai", Thread: "sess_paused", Turn: "turn_1", Call: "call_1"}, "w1", time.Hour, true},
	}
	for _, c := range calls {
		if _, _, err := store.Claim(ctx, c.key, "d", "i", c.owner, c.lease); err != nil {
			t.Fatal(err)
		}
		if c.done {
			if err := store.Finish(ctx, c.key, c.owner, journaldriver.Result{Outcome: core.OK}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := store.MarkSubmitted(ctx, []journaldriver.Key{calls[2].key}); err != nil {
		t.Fatal(err)
	}
	store.Close()

	cmd := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"-journal", url}, args...), &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"runs"}, []string{"sess_done", "sess_dead", "sess_paused", "sess_live", "sess_waits", "5 runs"}, nil},
		{[]string{"runs", "-state", "finished"}, []string{"sess_done", "1 runs"}, []string{"sess_dead"}},
		{[]string{"orphans"}, []string{"sess_dead", "w2", "1 runs"}, []string{"sess_done", "sess_paused", "sess_live"}},
		{[]string{"calls"}, []string{"call_3", "call_9", "call_1", "3 calls"}, nil},
		{[]string{"calls", "-state", "in_doubt"}, []string{"sess_dead", "call_9", "in_doubt", "w2", "1 calls"}, []string{"call_1", "call_3"}},
		{[]string{"calls", "-thread", "sess_done"}, []string{"call_3", "succeeded", "ok", "1 calls"}, []string{"call_9"}},
		{[]string{"calls", "-state", "submitted"}, []string{"call_1", "1 calls"}, []string{"call_3"}},
		{[]string{"calls", "-state", "awaiting_approval"}, []string{"sess_paused", "call_7", "sess_waits", "call_8", "awaiting_approval", "refund", "over 100", "2 calls"}, []string{"call_1", "call_3", "call_9"}},
		{[]string{"calls", "-state", "awaiting_approval", "-thread", "sess_paused"}, []string{"call_7", "1 calls"}, []string{"call_8"}},
		{[]string{"calls", "-state", "awaiting_approval", "-limit", "1"}, []string{"1 calls"}, nil},
		{[]string{"runs", "-state", "awaiting_approval"}, []string{"sess_paused", "sess_waits", "2 runs"}, []string{"sess_done"}},
		{[]string{"show", "-backend", "openai", "sess_paused"}, []string{"awaiting_approval", "call_1", "submitted", "1 calls", "call_7", "refund", "over 100", "pending", "1 approvals", "1 runs"},
			[]string{"sess_done", "sess_dead", "sess_waits", "call_8", "call_3"}},
		{[]string{"prune", "-older", "1ns"}, []string{"pruned"}, nil},
		{[]string{"runs"}, []string{"sess_dead", "sess_paused", "sess_live", "sess_waits", "4 runs"}, []string{"sess_done"}},
	} {
		out := cmd(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("%v: output has %q:\n%s", tc.args, n, out)
			}
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-journal", url, "show", "sess_paused"}, &out); err == nil || !strings.Contains(err.Error(), "-backend") {
		t.Errorf("show without -backend: %v, want an error asking for it", err)
	}
	if err := run(context.Background(), []string{"-journal", url, "calls", "-state", "lost"}, &out); err == nil || !strings.Contains(err.Error(), "in_doubt") {
		t.Errorf("calls -state lost: %v, want an error naming the states", err)
	}
	// prune without -older would prune everything that ended: refused.
	if err := run(context.Background(), []string{"-journal", url, "prune"}, &out); err == nil || !strings.Contains(err.Error(), "-older") {
		t.Errorf("prune without -older: %v, want an error asking how old", err)
	}
	if out := cmd("runs"); !strings.Contains(out, "4 runs") {
		t.Errorf("runs after a refused prune:\n%s", out)
	}
	if err := run(context.Background(), []string{"runs"}, &out); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("no journal: %v, want the usage", err)
	}
}

// TestArgumentsNotShown: an argument given where a command, a state, a
// number or a flag goes (a journal URL with its password, settings) is
// not shown by the error that refuses it.
func TestArgumentsNotShown(t *testing.T) {
	const secret = "PLANTED-secret"
	url := "sqlite://" + filepath.Join(t.TempDir(), "journal.db")
	dsn := "postgres://app:" + secret + "@db.example:5432/app"
	for _, args := range [][]string{
		{"-journal", url, dsn},
		{"-journal", url, "host=db password=" + secret},
		{"-journal", url, "runs", dsn},
		{"-journal", url, "calls", "-state", dsn},
		{"-journal", url, "runs", "-state", dsn},
		{"-journal", url, "runs", "-limit", dsn},
		{"-journal", url, "runs", "-" + dsn},
		{"-" + dsn, "runs"},
		{"-journal", url, "show", "-backend", dsn},
	} {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(out.String(), secret) {
			t.Errorf("%q: the secret is shown:\n%v\n%s", args, err, out.String())
		}
	}
}
