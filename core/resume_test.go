package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// spy records the submissions a backend receives.
type spy struct {
	*coretest.Backend
	submits [][]driver.ToolResult
}

func (s *spy) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	s.submits = append(s.submits, req.Results)
	return s.Backend.Submit(ctx, req)
}

// counter is a tool with side effects that counts its runs.
func counter(t *testing.T, opts *core.ToolOptions) (*core.Tool, *atomic.Int32) {
	var n atomic.Int32
	tool := mustTool(t)(core.NewTool("book", "Book a table.", func(_ context.Context, in struct {
		Table string `json:"table"`
	}) (string, error) {
		n.Add(1)
		return "booked " + in.Table, nil
	}, opts))
	return tool, &n
}

var bookScript = coretest.Simple("book", `{"table": "7"}`, "{{output \"book\"}}")

// TestResumeResendsKeptResult checks that after a failed submission, Resume
// sends the result the journal kept, with the same idempotency key, without
// running the handler again.
func TestResumeResendsKeptResult(t *testing.T) {
	tool, runs := counter(t, nil)
	tb, _ := core.NewToolbox(tool)
	lost := errors.New("connection reset")
	backend := &spy{Backend: coretest.NewBackend(bookScript, &coretest.BackendOptions{Fault: func(op string, n int) error {
		if op == "submit" && n == 2 {
			return lost // the first submission is lost
		}
		return nil
	}})}
	journal := journaldriver.NewMemory()
	r := core.NewRunner(backend, tb, &core.Options{Journal: journal, Logger: quiet})

	res, err := r.Run(t.Context(), "book table 7", nil)
	if !errors.Is(err, lost) {
		t.Fatalf("Run error = %v, want the lost submission", err)
	}
	// A new runner (a restarted process) sharing the journal resumes.
	var reused []core.Outcome
	r2 := core.NewRunner(backend, tb, &core.Options{Journal: journal, Logger: quiet, OnEvent: func(e core.Event) {
		if e.Kind == core.EventCallReused {
			reused = append(reused, e.Outcome)
		}
	}})
	res2, err := r2.Resume(t.Context(), res.Thread, nil)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res2.Text != "booked 7" || runs.Load() != 1 {
		t.Errorf("Resume = %q after %d runs, want %q after 1", res2.Text, runs.Load(), "booked 7")
	}
	if diff := cmp.Diff([]core.Outcome{core.OK}, reused); diff != "" {
		t.Errorf("reused events (-want +got):\n%s", diff)
	}
	if len(backend.submits) != 2 {
		t.Fatalf("%d submissions, want 2", len(backend.submits))
	}
	first, second := backend.submits[0][0], backend.submits[1][0]
	if first.IdempotencyKey == "" || first.IdempotencyKey != second.IdempotencyKey {
		t.Errorf("idempotency keys %q then %q, want the same non-empty key", first.IdempotencyKey, second.IdempotencyKey)
	}
	if diff := cmp.Diff(first.Output, second.Output); diff != "" {
		t.Errorf("resent output differs (-first +second):\n%s", diff)
	}
	key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
	e, ok, _ := journal.Get(t.Context(), key)
	if !ok || e.State != journaldriver.Submitted {
		t.Errorf("journal entry = %+v, want submitted", e)
	}
	// Resuming a finished thread returns its answer and runs nothing.
	res3, err := r2.Resume(t.Context(), res.Thread, nil)
	if err != nil || res3.Text != "booked 7" || runs.Load() != 1 {
		t.Errorf("Resume of a finished thread = %+v, %v after %d runs", res3, err, runs.Load())
	}
	// Resuming an unknown thread is NotFound.
	if _, err := r2.Resume(t.Context(), "thread_404", nil); !errors.Is(err, errcode.NotFound) {
		t.Errorf("Resume(unknown) error = %v, want NotFound", err)
	}
}

// startedEntry puts an entry for the first call of bookScript in j, started
// by a dead owner whose lease has expired: the call is in doubt.
func startedEntry(t *testing.T, j journaldriver.Journal, args string) {
	t.Helper()
	key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
	digest := core.ArgumentsDigest(json.RawMessage(args))
	if _, ok, err := j.Claim(t.Context(), key, digest, journaldriver.IdempotencyKey(key, digest), "dead-worker", -time.Second); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
}

// TestInDoubt checks what happens to a call found started but not
// finished, for each declaration a tool can make.
func TestInDoubt(t *testing.T) {
	tests := []struct {
		name     string
		opts     *core.ToolOptions
		wantRuns int32
		want     coretest.Delivered
		outcome  core.Outcome
	}{
		{"side effects, no verify: outcome unknown, not run", nil, 0,
			coretest.Delivered{Failed: true, Error: `the outcome of this call of "book" is unknown: it may or may not have taken effect, and it was not run again`}, core.InDoubt},
		{"idempotent: run again", &core.ToolOptions{Idempotent: true}, 1,
			coretest.Delivered{Output: "booked 7"}, core.OK},
		{"read-only: run again", &core.ToolOptions{ReadOnly: true}, 1,
			coretest.Delivered{Output: "booked 7"}, core.OK},
		{"verify finds the result", &core.ToolOptions{Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			return "booked 7 (verified)", true, nil
		}}, 0, coretest.Delivered{Output: "booked 7 (verified)"}, core.OK},
		{"verify finds it did not happen: run again", &core.ToolOptions{Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			return nil, false, nil
		}}, 1, coretest.Delivered{Output: "booked 7"}, core.OK},
		{"verify fails, idempotent: run again", &core.ToolOptions{Idempotent: true, Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			return nil, false, errors.New("ledger unreachable")
		}}, 1, coretest.Delivered{Output: "booked 7"}, core.OK},
		{"verify fails: outcome unknown", &core.ToolOptions{Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			return nil, false, errors.New("ledger unreachable")
		}}, 0, coretest.Delivered{Failed: true, Error: `the outcome of this call of "book" is unknown: it may or may not have taken effect, and it was not run again`}, core.InDoubt},
		{"verify panics: outcome unknown", &core.ToolOptions{Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			panic("ledger client bug")
		}}, 0, coretest.Delivered{Failed: true, Error: `the outcome of this call of "book" is unknown: it may or may not have taken effect, and it was not run again`}, core.InDoubt},
		{"verify finds a result past the output limit", &core.ToolOptions{Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
			return strings.Repeat("x", core.DefaultMaxOutputBytes+1), true, nil
		}}, 0, coretest.Delivered{Failed: true, Error: "output too large (4194305 bytes; the limit is 4194304)"}, core.TooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, runs := counter(t, tt.opts)
			journal := journaldriver.NewMemory()
			startedEntry(t, journal, `{"table": "7"}`)
			var doubts []core.Outcome
			r, b := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: journal, OnEvent: func(e core.Event) {
				if e.Kind == core.EventCallInDoubt {
					doubts = append(doubts, e.Outcome)
				}
			}})
			if _, err := r.Run(t.Context(), "book table 7", nil); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", runs.Load(), tt.wantRuns)
			}
			want := tt.want
			want.CallID, want.Name = "call_1", "book"
			if diff := cmp.Diff([]coretest.Delivered{want}, results(b.Received())); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]core.Outcome{tt.outcome}, doubts); diff != "" {
				t.Errorf("in-doubt events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInDoubtVerifyBounded checks that a Verify hook that ignores its
// context is bounded in time: past the tool's timeout it cannot tell, and
// the call is decided as if there were no hook; past the run's time limit
// the run ends, and the call stays in doubt for the next owner.
func TestInDoubtVerifyBounded(t *testing.T) {
	inDoubt := `the outcome of this call of "book" is unknown: it may or may not have taken effect, and it was not run again`
	tests := []struct {
		name    string
		tool    time.Duration // the tool's timeout
		run     time.Duration // the run's time limit
		want    time.Duration // how long the run takes
		code    errcode.Code  // the run's error code; Unknown for none
		sent    []coretest.Delivered
		started bool // the entry is left started
	}{
		{"past the tool's timeout", time.Minute, time.Hour, time.Minute, errcode.Unknown,
			[]coretest.Delivered{{CallID: "call_1", Name: "book", Failed: true, Error: inDoubt}}, false},
		{"past the run's time limit", time.Hour, time.Minute, time.Minute, errcode.DeadlineExceeded, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				defer close(release)
				tool, runs := counter(t, &core.ToolOptions{Timeout: tt.tool, Verify: func(ctx context.Context, c core.Call) (any, bool, error) {
					<-release
					return "booked 7", true, nil
				}})
				journal := journaldriver.NewMemory()
				startedEntry(t, journal, `{"table": "7"}`)
				r, b := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: journal, RunTimeout: tt.run})
				start := time.Now()
				_, err := r.Run(t.Context(), "book table 7", nil)
				if d := time.Since(start); d != tt.want {
					t.Errorf("the run took %v, want %v", d, tt.want)
				}
				if (tt.code == errcode.Unknown) != (err == nil) || (err != nil && errcode.Of(err) != tt.code) {
					t.Errorf("Run error = %v, want code %v", err, tt.code)
				}
				if runs.Load() != 0 {
					t.Errorf("handler ran %d times, want 0", runs.Load())
				}
				if diff := cmp.Diff(tt.sent, results(b.Received())); diff != "" {
					t.Errorf("delivered (-want +got):\n%s", diff)
				}
				key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
				if e, ok, err := journal.Get(t.Context(), key); err != nil || !ok || (e.State == journaldriver.Started) != tt.started {
					t.Errorf("journal entry = %+v, %v, %v; want it started: %v", e, ok, err, tt.started)
				}
			})
		})
	}
}

// TestJournalConflict checks that a call kept with other arguments under the
// same key is refused, not run.
func TestJournalConflict(t *testing.T) {
	tool, runs := counter(t, nil)
	journal := journaldriver.NewMemory()
	startedEntry(t, journal, `{"table": "8"}`)
	r, b := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: journal})
	_, err := r.Run(t.Context(), "book table 7", nil)
	if !errors.Is(err, errcode.FailedPrecondition) || !strings.Contains(err.Error(), "other arguments") {
		t.Fatalf("Run error = %v, want FailedPrecondition about other arguments", err)
	}
	if runs.Load() != 0 || len(results(b.Received())) != 0 {
		t.Errorf("ran %d and sent %d results, want none", runs.Load(), len(results(b.Received())))
	}
}

// TestWaitsForOtherOwner checks that a call another worker is running (its
// lease alive) is waited for, and its result sent, without running it here.
func TestWaitsForOtherOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tool, runs := counter(t, nil)
		journal := journaldriver.NewMemory()
		key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
		digest := core.ArgumentsDigest(json.RawMessage(`{"table":"7"}`))
		if _, ok, _ := journal.Claim(t.Context(), key, digest, journaldriver.IdempotencyKey(key, digest), "other", time.Minute); !ok {
			t.Fatal("claim failed")
		}
		go func() {
			time.Sleep(3 * time.Second)
			journal.Finish(context.Background(), key, "other", journaldriver.Result{Output: core.Output{Text: "booked 7 elsewhere"}})
		}()
		r, b := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: journal})
		start := time.Now()
		res, err := r.Run(t.Context(), "book table 7", nil)
		if err != nil || res.Text != "booked 7 elsewhere" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if runs.Load() != 0 {
			t.Errorf("handler ran %d times here, want 0", runs.Load())
		}
		if d := time.Since(start); d < 3*time.Second || d > 5*time.Second {
			t.Errorf("waited %v for the other worker, want about 3s", d)
		}
		if got := results(b.Received()); len(got) != 1 || got[0].Output != "booked 7 elsewhere" {
			t.Errorf("delivered %+v", got)
		}
	})
}

// TestInterruptedCallRunsAgain checks that a handler that gave up because
// its run was canceled leaves no result behind, so a resume runs it.
func TestInterruptedCallRunsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 1)
		tool := mustTool(t)(core.NewTool("book", "", func(ctx context.Context, in struct {
			Table string `json:"table"`
		}) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}, nil))
		journal := journaldriver.NewMemory()
		r, _ := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: journal})
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-started; cancel() }()
		res, err := r.Run(ctx, "book", nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run error = %v, want canceled", err)
		}
		// The run returns at once; the handler's goroutine then releases
		// its claim.
		synctest.Wait()
		key := journaldriver.Key{Backend: "coretest", Thread: res.Thread, Turn: "turn_1", Call: "call_1"}
		if e, ok, _ := journal.Get(t.Context(), key); ok {
			t.Errorf("journal kept %+v for an interrupted call", e)
		}
	})
}

// TestOwnJournalForgets checks that the journal a runner makes for itself
// forgets a run's calls once the run has its answer (it would otherwise
// grow with every run), keeps them while the turn may be resumed, and that
// a journal given to the runner keeps them.
func TestOwnJournalForgets(t *testing.T) {
	key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
	lost := errors.New("connection reset")
	tests := []struct {
		name    string
		journal journaldriver.Journal // nil: the runner's own
		fail    bool                  // the submission fails, so the run has no answer
		want    bool                  // the call's entry is still there after the run
	}{
		{name: "own journal, answered", want: false},
		{name: "own journal, failed mid-turn", fail: true, want: true},
		{name: "journal given", journal: journaldriver.NewMemory(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, runs := counter(t, nil)
			tb, _ := core.NewToolbox(tool)
			backend := coretest.NewBackend(bookScript, &coretest.BackendOptions{Fault: func(op string, n int) error {
				if tt.fail && op == "submit" && n == 2 {
					return lost
				}
				return nil
			}})
			r := core.NewRunner(backend, tb, &core.Options{Journal: tt.journal, Logger: quiet})
			res, err := r.Run(t.Context(), "book table 7", nil)
			if tt.fail != (err != nil) {
				t.Fatalf("Run error = %v", err)
			}
			_, ok, err := r.Journal().Get(t.Context(), key)
			if err != nil || ok != tt.want {
				t.Errorf("journal holds the call: %v (%v), want %v", ok, err, tt.want)
			}
			if !tt.fail {
				return
			}
			// The entry kept serves the resume: the call does not run again.
			res, err = r.Resume(t.Context(), res.Thread, nil)
			if err != nil || res.Text != "booked 7" || runs.Load() != 1 {
				t.Fatalf("Resume = %+v, %v after %d runs, want booked 7 after 1", res, err, runs.Load())
			}
			if _, ok, _ := r.Journal().Get(t.Context(), key); ok {
				t.Error("the journal still holds the call after the resumed run's answer")
			}
		})
	}
}

// writeLog is a memory journal that can write without a sync
// (journaldriver.Unsynced), and logs which of its claim and finish methods the
// runner calls.
type writeLog struct {
	*journaldriver.Memory
	mu    sync.Mutex
	calls []string
}

func (j *writeLog) log(name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, name)
}

func (j *writeLog) Claim(ctx context.Context, key journaldriver.Key, digest, idem, owner string, lease time.Duration) (journaldriver.Entry, bool, error) {
	j.log("Claim")
	return j.Memory.Claim(ctx, key, digest, idem, owner, lease)
}

func (j *writeLog) ClaimUnsynced(ctx context.Context, key journaldriver.Key, digest, idem, owner string, lease time.Duration) (journaldriver.Entry, bool, error) {
	j.log("ClaimUnsynced")
	return j.Memory.Claim(ctx, key, digest, idem, owner, lease)
}

// ClaimFenced is the claim of a call of a recorded run: logged as Claim or
// ClaimUnsynced, by its durability.
func (j *writeLog) ClaimFenced(ctx context.Context, req journaldriver.ClaimRequest) (journaldriver.Entry, bool, error) {
	if req.Unsynced {
		j.log("ClaimUnsynced")
	} else {
		j.log("Claim")
	}
	return j.Memory.ClaimFenced(ctx, req)
}

func (j *writeLog) Finish(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	j.log("Finish")
	return j.Memory.Finish(ctx, key, owner, r)
}

func (j *writeLog) FinishUnsynced(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	j.log("FinishUnsynced")
	return j.Memory.Finish(ctx, key, owner, r)
}

// TestUnsyncedWrites checks that the calls of a tool that may run twice
// (idempotent or read-only) are claimed and finished without a sync, on a
// journal that can, and that every other call waits for the disk.
func TestUnsyncedWrites(t *testing.T) {
	synced, unsynced := []string{"Claim", "Finish"}, []string{"ClaimUnsynced", "FinishUnsynced"}
	tests := []struct {
		name  string
		opts  *core.ToolOptions
		doubt bool // the call is found in doubt (TakeOver is not logged)
		want  []string
	}{
		{"side effects", nil, false, synced},
		{"idempotent", &core.ToolOptions{Idempotent: true}, false, unsynced},
		{"read-only", &core.ToolOptions{ReadOnly: true}, false, unsynced},
		{"side effects with verify", &core.ToolOptions{Verify: func(context.Context, core.Call) (any, bool, error) { return nil, false, nil }}, false, synced},
		{"idempotent, in doubt", &core.ToolOptions{Idempotent: true}, true, []string{"ClaimUnsynced", "FinishUnsynced"}},
		{"side effects, in doubt", nil, true, []string{"Claim", "Finish"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, runs := counter(t, tt.opts)
			j := &writeLog{Memory: journaldriver.NewMemory()}
			if tt.doubt {
				startedEntry(t, j.Memory, `{"table": "7"}`)
			}
			r, _ := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: j})
			if _, err := r.Run(t.Context(), "book table 7", nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, j.calls); diff != "" {
				t.Errorf("journal writes (-want +got):\n%s", diff)
			}
			if want := int32(1); !tt.doubt && runs.Load() != want {
				t.Errorf("handler ran %d times, want %d", runs.Load(), want)
			}
		})
	}

	// A journal that cannot write without a sync gets the synced writes.
	tool, _ := counter(t, &core.ToolOptions{Idempotent: true})
	j := journaldriver.NewMemory()
	r, _ := newRunner(t, bookScript, []*core.Tool{tool}, &core.Options{Journal: j})
	if res, err := r.Run(t.Context(), "book table 7", nil); err != nil || res.Text != "booked 7" {
		t.Fatalf("Run on a journal without unsynced writes = %+v, %v", res, err)
	}
}

// resultless is a journal (a third party's, or a store reading a damaged
// row) that returns finished entries without their result.
type resultless struct{ *journaldriver.Memory }

func (j resultless) Claim(ctx context.Context, key journaldriver.Key, digest, idem, owner string, lease time.Duration) (journaldriver.Entry, bool, error) {
	e, created, err := j.Memory.Claim(ctx, key, digest, idem, owner, lease)
	e.Result = nil
	return e, created, err
}

func (j resultless) ClaimFenced(ctx context.Context, req journaldriver.ClaimRequest) (journaldriver.Entry, bool, error) {
	e, created, err := j.Memory.ClaimFenced(ctx, req)
	e.Result = nil
	return e, created, err
}

// TestFinishedEntryWithoutResult (issue 30, item 7): a finished entry that
// holds no result is a damaged one: the run ends with a DataLoss error
// naming the call, without a panic, without running the handler again,
// and without sending anything for the call.
func TestFinishedEntryWithoutResult(t *testing.T) {
	tool, runs := counter(t, nil)
	tb, _ := core.NewToolbox(tool)
	backend := coretest.NewBackend(bookScript, &coretest.BackendOptions{Fault: func(op string, n int) error {
		if op == "submit" {
			return errors.New("connection reset") // the result is journaled, not sent
		}
		return nil
	}})
	j := journaldriver.NewMemory()
	r := core.NewRunner(backend, tb, &core.Options{Journal: j, Logger: quiet})
	res, err := r.Run(t.Context(), "book table 7", nil)
	if err == nil || runs.Load() != 1 {
		t.Fatalf("Run = %v after %d runs, want the lost submission after 1", err, runs.Load())
	}
	r2 := core.NewRunner(backend, tb, &core.Options{Journal: resultless{j}, Logger: quiet})
	defer r2.Close()
	_, err = r2.Resume(t.Context(), res.Thread, nil)
	if errcode.Of(err) != errcode.DataLoss || !strings.Contains(err.Error(), "call_1") {
		t.Errorf("Resume over an entry without its result = %v (%v), want DataLoss naming the call", err, errcode.Of(err))
	}
	if runs.Load() != 1 {
		t.Errorf("the handler ran %d times, want once", runs.Load())
	}
}
