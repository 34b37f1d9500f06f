package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

// dieOnce registers, as the worker's activity name, do dying on its
// first attempt for the requests of which selected: after do ran
// (delivered: its effect done, its answer lost) or before, as a worker
// dying before the activity completed. It returns the attempts made of
// the selected requests.
func dieOnce[Req, Res any](e *env, name string, delivered bool, selected func(Req) bool, do func(context.Context, Req) (Res, error)) *[]int32 {
	var attempts []int32
	e.te.RegisterActivityWithOptions(func(ctx context.Context, req Req) (Res, error) {
		if !selected(req) {
			return do(ctx, req)
		}
		attempt := activity.GetInfo(ctx).Attempt
		attempts = append(attempts, attempt)
		if attempt == 1 {
			var none Res
			if delivered {
				if _, err := do(ctx, req); err != nil {
					return none, err
				}
			}
			return none, errors.New("the worker died before the activity completed")
		}
		return do(ctx, req)
	}, activity.RegisterOptions{Name: name, DisableAlreadyRegisteredCheck: true})
	return &attempts
}

// TestCallRetried: the Call activity's first attempt runs the handler
// (the effect happens) and then its worker dies before the activity
// completes; the retried attempt must not run a non-idempotent handler
// again but decide the call as core's Resume does: Verify's answer, a
// rerun of a read-only tool, or a failed result whose outcome is InDoubt.
func TestCallRetried(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    *core.ToolOptions
		runs    int32 // times the handler ran
		outcome core.Outcome
		output  string // the result's text, or a part of its error
	}{
		{"side effect, no verify: in doubt", nil, 1, core.InDoubt, "is unknown"},
		{"side effect, verify finds it", &core.ToolOptions{Verify: func(context.Context, core.Call) (any, bool, error) { return "charged (verified)", true, nil }}, 1, core.OK, "charged (verified)"},
		{"read-only: runs again", &core.ToolOptions{ReadOnly: true}, 2, core.OK, "charged 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int32
			charge := must(core.NewTool("charge", "charges a card", func(_ context.Context, in struct{ Card string }) (string, error) {
				return "charged " + string(rune('0'+runs.Add(1))), nil
			}, c.opts))
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{{Name: "charge", Arguments: json.RawMessage(`{"Card":"4242"}`)}}},
				{Text: `{{output "charge"}}`},
			}}}}
			e := newEnv(t, script, LoopOptions{}, charge)
			// The worker's Call activity, dying on its first attempt after
			// the handler ran and before the activity completed.
			a := &activities{r: e.runner, hooks: e.runner.Hooks()}
			attempts := dieOnce(e, activityCall, true, func(*callRequest) bool { return true }, a.Call)
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "charge 4242"})
			e.run()
			if run.err != nil || run.res.Err != nil || len(run.res.Calls) != 1 {
				t.Fatalf("run = %+v, %v; want a turn with one result", run.res, run.err)
			}
			if diff := cmp.Diff([]int32{1, 2}, *attempts); diff != "" {
				t.Fatalf("attempts of the Call activity (-want +got):\n%s", diff)
			}
			if n := runs.Load(); n != c.runs {
				t.Errorf("the handler ran %d times, want %d", n, c.runs)
			}
			got := run.res.Calls[0]
			if got.Outcome != c.outcome || !strings.Contains(got.Output.Text+got.Error, c.output) {
				t.Errorf("result %+v, want outcome %v with %q", got, c.outcome, c.output)
			}
		})
	}
}

// resends wraps a backend, recording each submit's results' Resend flags.
type resends struct {
	*coretest.Backend
	mu    sync.Mutex
	flags [][]bool
}

func (b *resends) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	var f []bool
	for _, r := range req.Results {
		f = append(f, r.Resend)
	}
	b.mu.Lock()
	b.flags = append(b.flags, f)
	b.mu.Unlock()
	return b.Backend.Submit(ctx, req)
}

// TestSubmitRetried: the Submit activity's first attempt fails, its
// results taken by the service (the answer lost) or never sent; the
// retried attempt asks the service first. Taken: the turn went on, to a
// step of other calls, which is the answer, and nothing is sent again.
// Never sent: the step's calls still wait, and the results go, marked as
// resent (so that "no such pending call" counts as delivered).
func TestSubmitRetried(t *testing.T) {
	for _, c := range []struct {
		name      string
		delivered bool   // the first attempt's results reached the service
		want      []bool // the Resend flags of each submit of the first step's results, then the second's
	}{
		{"answer lost", true, []bool{false, false}},
		{"request lost", false, []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`), ID: "call_1"}}},
				{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`), ID: "call_2"}}},
				{Text: `{{output "get_weather"}}`},
			}}}}
			var b *resends
			e := newEnvOn(t, script, func(cb *coretest.Backend) driver.Backend { b = &resends{Backend: cb}; return b }, LoopOptions{})
			a := &activities{r: e.runner, hooks: e.runner.Hooks()}
			first := func(req *stepRequest) bool { return req.Step.Calls[0].ID == "call_1" }
			attempts := dieOnce(e, activitySubmit, c.delivered, first, a.Submit)
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather"})
			e.run()
			if run.err != nil || run.res.Err != nil || run.res.Text != "sunny in Rome" {
				t.Fatalf("run = %+v, %v; want the turn answered", run.res, run.err)
			}
			if diff := cmp.Diff([]int32{1, 2}, *attempts); diff != "" {
				t.Fatalf("attempts of the first step's submit (-want +got):\n%s", diff)
			}
			var got []bool
			for _, f := range b.flags {
				got = append(got, f...)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Resend flags of the results submitted (-want +got):\n%s", diff)
			}
			if n := len(b.Received()); n != 3 {
				t.Errorf("the service received %d requests (%+v), want 3: the input and each step's results once", n, b.Received())
			}
		})
	}
}

// TestStartRetried: the Start activity of a thread's second turn fails on
// its first attempt, its input taken by the service (the answer lost) or
// never sent, before any heartbeat; the retried attempt asks the service
// first: taken, the turn it began is the answer, and the input is not
// sent again; never sent, it is sent.
func TestStartRetried(t *testing.T) {
	for _, c := range []struct {
		name      string
		delivered bool
	}{{"answer lost", true}, {"request lost", false}} {
		t.Run(c.name, func(t *testing.T) {
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "one"}}}, {Steps: []coretest.Step{{Text: "two"}}}}}
			e := newEnv(t, script, LoopOptions{})
			a := &activities{r: e.runner, hooks: e.runner.Hooks()}
			second := func(req *stepRequest) bool { return req.Input == "2" }
			attempts := dieOnce(e, activityStart, c.delivered, second, a.Start)
			var one, two outcome
			e.update(time.Second, UpdateRun, &one, runRequest{Input: "1"})
			e.update(2*time.Second, UpdateRun, &two, runRequest{Input: "2"})
			e.run()
			if one.err != nil || two.err != nil || one.res.Text != "one" || two.res.Err != nil || two.res.Text != "two" {
				t.Fatalf("turns %+v (%v), %+v (%v); want one then two", one.res, one.err, two.res, two.err)
			}
			if diff := cmp.Diff([]int32{1, 2}, *attempts); diff != "" {
				t.Fatalf("attempts of the second turn's start (-want +got):\n%s", diff)
			}
			var inputs []string
			for _, r := range e.backend.Received() {
				if r.Kind == "input" {
					inputs = append(inputs, r.Input)
				}
			}
			if diff := cmp.Diff([]string{"1", "2"}, inputs); diff != "" {
				t.Errorf("inputs the service received (-want +got):\n%s", diff)
			}
		})
	}
}
