package core_test

import (
	"context"
	"errors"
	"strings"
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

// TestDefaultToolTimeout checks that a handler without a timeout of its own
// is bounded by DefaultToolTimeout: past it the call gets a failed result
// saying so, and the run goes on, whether the handler heeds its context or
// not.
func TestDefaultToolTimeout(t *testing.T) {
	for _, heeds := range []bool{true, false} {
		name := map[bool]string{true: "heeds its context", false: "ignores its context"}[heeds]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				defer close(release)
				slow := mustTool(t)(core.NewTool("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
					if heeds {
						<-ctx.Done()
						return "", ctx.Err()
					}
					<-release
					return "late", nil
				}, nil))
				r, b := newRunner(t, coretest.Simple("slow", `{}`, "{{result 0}}"), []*core.Tool{slow}, &core.Options{RunTimeout: time.Hour})
				start := time.Now()
				res, err := r.Run(t.Context(), "go", nil)
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != core.DefaultToolTimeout {
					t.Errorf("the run took %v, want %v", d, core.DefaultToolTimeout)
				}
				want := `tool "slow" timed out after 5m0s`
				got := results(b.Received())
				if res.Text != want || len(got) != 1 || !got[0].Failed || got[0].Error != want {
					t.Errorf("Run = %q, sent %+v; want the failure %q", res.Text, got, want)
				}
			})
		})
	}
}

// slowSubmit is a backend whose first Submit waits for its context to end
// and then fails with an error of its own, as a client whose connection
// is cut would.
type slowSubmit struct {
	*coretest.Backend
	slow *atomic.Bool
}

func (s slowSubmit) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	if s.slow.CompareAndSwap(true, false) {
		<-ctx.Done()
		return nil, errors.New("connection reset by peer")
	}
	return s.Backend.Submit(ctx, req)
}

// TestRunTimeout checks that a run past its time limit (DefaultRunTimeout,
// Options.RunTimeout or RunOptions.Timeout) ends with a DeadlineExceeded
// error that says so, whether it waits on a handler or on the service;
// that the service's turn is left waiting (not canceled); that the
// interrupted call is left to run again, a result kept is kept; and that
// a resume finishes the turn, each call run once.
func TestRunTimeout(t *testing.T) {
	tests := []struct {
		name     string
		opts     *core.Options
		run      *core.RunOptions
		ctx      time.Duration // the caller's own deadline, if any
		service  bool          // the service, not a handler, is slow
		want     time.Duration
		wantText string
	}{
		{"default, in a handler", nil, nil, 0, false, core.DefaultRunTimeout, "the run passed its time limit (30m0s)"},
		{"runner's, in a handler", &core.Options{RunTimeout: time.Minute}, nil, 0, false, time.Minute, "the run passed its time limit (1m0s)"},
		{"run's, in a handler", &core.Options{RunTimeout: time.Minute}, &core.RunOptions{Timeout: 10 * time.Second}, 0, false, 10 * time.Second, "the run passed its time limit (10s)"},
		{"runner's, in the service", &core.Options{RunTimeout: time.Minute}, nil, 0, true, time.Minute, "the run passed its time limit (1m0s): context deadline exceeded: connection reset by peer"},
		{"caller's, sooner", &core.Options{RunTimeout: time.Minute}, nil, 20 * time.Second, false, 20 * time.Second, "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var runs int
				block := mustTool(t)(core.NewTool("block", "", func(ctx context.Context, _ struct{}) (string, error) {
					runs++
					if tt.service || runs > 1 {
						return "done", nil
					}
					<-ctx.Done()
					return "", ctx.Err()
				}, &core.ToolOptions{Timeout: 2 * time.Hour}))
				tb, err := core.NewToolbox(block)
				if err != nil {
					t.Fatal(err)
				}
				inner := coretest.NewBackend(coretest.Simple("block", `{}`, "{{result 0}}"), nil)
				var b driver.Backend = inner
				if tt.service {
					slow := new(atomic.Bool)
					slow.Store(true)
					b = slowSubmit{inner, slow}
				}
				o := core.Options{Logger: quiet}
				if tt.opts != nil {
					o = *tt.opts
					o.Logger = quiet
				}
				j := journaldriver.NewMemory()
				o.Journal = j
				r := core.NewRunner(b, tb, &o)
				defer r.Close()
				ctx := t.Context()
				if tt.ctx > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctx)
					defer cancel()
				}
				start := time.Now()
				res, err := r.Run(ctx, "go", tt.run)
				if d := time.Since(start); d != tt.want {
					t.Errorf("the run took %v, want %v", d, tt.want)
				}
				if errcode.Of(err) != errcode.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("Run error = %v (code %v), want DeadlineExceeded saying %q", err, errcode.Of(err), tt.wantText)
				}
				if res == nil || res.Thread != "thread_1" {
					t.Fatalf("Result = %+v, want the thread to resume", res)
				}
				var kinds []string
				for _, rec := range inner.Received() {
					kinds = append(kinds, rec.Kind)
				}
				if diff := cmp.Diff([]string{"input"}, kinds); diff != "" {
					t.Errorf("backend received (-want +got):\n%s", diff)
				}
				key := journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: "call_1"}
				e, ok, err := j.Get(t.Context(), key)
				switch {
				case err != nil:
					t.Fatal(err)
				case tt.service && (!ok || e.State != journaldriver.Succeeded):
					t.Errorf("journal entry = %+v, %v; want the result kept, to send again", e, ok)
				case !tt.service && ok:
					t.Errorf("journal entry = %+v; want none: the interrupted call may run again", e)
				}
				res, err = r.Resume(t.Context(), res.Thread, nil)
				if err != nil || res.Text != "done" || runs != 2 && !tt.service || runs != 1 && tt.service {
					t.Errorf("Resume after the time limit = %+v, %v, after %d runs of the handler; want the answer, the interrupted call run again, a kept result sent", res, err, runs)
				}
			})
		})
	}
}
