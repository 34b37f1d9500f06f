package core_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// hookLog records what hooks see, and checks that each piece's context
// comes from its parent's.
type hookLog struct {
	mu      sync.Mutex
	lines   []string
	origins []string
	writes  map[string]int
	orphans []string
}

func (l *hookLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *hookLog) hooks(origin string) *core.Hooks {
	return &core.Hooks{
		Run: func(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
			l.mu.Lock()
			l.origins = append(l.origins, info.Origin)
			l.mu.Unlock()
			if !info.Resume {
				info.Origin = origin
			}
			l.add(fmt.Sprintf("run resume=%v", info.Resume))
			return context.WithValue(ctx, ctxKey("run"), true), func(res *core.Result, err error) {
				l.add(fmt.Sprintf("run end awaiting=%v", errors.Is(err, core.ErrAwaitingApproval)))
			}
		},
		Step: func(ctx context.Context, info *core.StepInfo) (context.Context, func(*driver.Step, error)) {
			if ctx.Value(ctxKey("run")) == nil {
				l.mu.Lock()
				l.orphans = append(l.orphans, "step "+info.Op)
				l.mu.Unlock()
			}
			l.add(fmt.Sprintf("step %s results=%d", info.Op, info.Results))
			return ctx, func(next *driver.Step, err error) { l.add(fmt.Sprintf("step end calls=%d", len(next.Calls))) }
		},
		Call: func(ctx context.Context, info *core.CallInfo) (context.Context, func(*core.CallEnd)) {
			if ctx.Value(ctxKey("run")) == nil {
				l.mu.Lock()
				l.orphans = append(l.orphans, "call "+info.Call.Name)
				l.mu.Unlock()
			}
			return context.WithValue(ctx, ctxKey("call"), info.Call.Name), func(e *core.CallEnd) {
				l.add(fmt.Sprintf("call %s step=%d outcome=%v reused=%v paused=%v", info.Call.Name, info.Step, e.Result.Outcome, e.Reused, e.Paused))
			}
		},
		JournalWrite: func(ctx context.Context, op string, d time.Duration, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.writes == nil {
				l.writes = map[string]int{}
			}
			if d >= 0 && err == nil {
				l.writes[op]++
			}
		},
	}
}

// TestHooks: the hooks see a run, its steps and its calls, in order, each
// in its parent's context, the handler in its call's; a run paused for
// approval and resumed: the resume gets the Origin the first run's hook
// set, the call that ran before the pause is reused, and the journal
// writes are reported.
func TestHooks(t *testing.T) {
	var l hookLog
	e := newApprovalEnv(t, refundScript("150"), &core.Options{Hooks: l.hooks("trace-1")})
	res, err := e.runner.Run(t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("Run = %v, want a pause", err)
	}
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runner.Resume(t.Context(), res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	// Calls of one step run concurrently: sort each step's call lines.
	got := sortRuns(l.lines)
	want := []string{
		"run resume=false", "step start results=0", "step end calls=2",
		"call lookup step=1 outcome=ok reused=false paused=false", "call refund step=1 outcome=ok reused=false paused=true",
		"run end awaiting=true",
		"run resume=true", "step resume results=0", "step end calls=2",
		"call lookup step=1 outcome=ok reused=true paused=false", "call refund step=1 outcome=ok reused=false paused=false",
		"step submit results=2", "step end calls=0",
		"run end awaiting=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "trace-1"}, l.origins); diff != "" {
		t.Errorf("origins the Run hook got (-want +got):\n%s", diff)
	}
	if len(l.orphans) > 0 {
		t.Errorf("pieces outside their run's context: %v", l.orphans)
	}
	if l.writes["claim"] == 0 || l.writes["finish"] == 0 || l.writes["submitted"] != 1 {
		t.Errorf("journal writes %v, want claims, finishes and one submitted", l.writes)
	}
}

// sortRuns sorts the runs of consecutive "call" lines.
func sortRuns(lines []string) []string {
	out := append([]string(nil), lines...)
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && strings.HasPrefix(out[j], "call ") {
			j++
		}
		sort.Strings(out[i:j])
		i = max(j, i+1)
	}
	return out
}

// failingWrites is a journal whose writes of one kind fail with errDown:
// op names them as the JournalWrite hook does ("claim", "finish",
// "submitted").
type failingWrites struct {
	*journaldriver.Memory
	op string
}

func (j failingWrites) Claim(ctx context.Context, key journaldriver.Key, digest, idem, owner string, lease time.Duration) (journaldriver.Entry, bool, error) {
	if j.op == "claim" {
		return journaldriver.Entry{}, false, errDown
	}
	return j.Memory.Claim(ctx, key, digest, idem, owner, lease)
}

func (j failingWrites) ClaimFenced(ctx context.Context, req journaldriver.ClaimRequest) (journaldriver.Entry, bool, error) {
	if j.op == "claim" {
		return journaldriver.Entry{}, false, errDown
	}
	return j.Memory.ClaimFenced(ctx, req)
}

func (j failingWrites) Finish(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	if j.op == "finish" {
		return errDown
	}
	return j.Memory.Finish(ctx, key, owner, r)
}

func (j failingWrites) MarkSubmitted(ctx context.Context, keys []journaldriver.Key) error {
	if j.op == "submitted" {
		return errDown
	}
	return j.Memory.MarkSubmitted(ctx, keys)
}

// TestJournalWriteHookErrors (issue 46, item 14): the JournalWrite hook
// gets the error of a write that failed, with the write's name, so that a
// program (package telemetry) can tell failed writes from slow ones; the
// run fails with the same error.
func TestJournalWriteHookErrors(t *testing.T) {
	for _, op := range []string{"claim", "finish", "submitted"} {
		t.Run(op, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []error // of the writes named op
			)
			hooks := &core.Hooks{JournalWrite: func(_ context.Context, name string, _ time.Duration, err error) {
				if name == op {
					mu.Lock()
					got = append(got, err)
					mu.Unlock()
				}
			}}
			book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) { return "booked", nil }, nil))
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{{Name: "book", Arguments: []byte(`{}`)}}},
				{Text: `{{output "book"}}`},
			}}}}
			r, _ := newRunner(t, script, []*core.Tool{book}, &core.Options{Journal: failingWrites{journaldriver.NewMemory(), op}, Hooks: hooks})
			if _, err := r.Run(t.Context(), "book", nil); !errors.Is(err, errDown) {
				t.Fatalf("Run = %v, want the failed %s's error", err, op)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || !errors.Is(got[0], errDown) {
				t.Errorf("the JournalWrite hook saw the %s writes end with %v; want one, with the journal's error (%v)", op, got, errDown)
			}
		})
	}
}
