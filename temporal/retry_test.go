package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

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
			e := newEnv(t, script, Settings{}, charge)
			// The worker's Call activity, dying on its first attempt after
			// the handler ran and before the activity completed.
			a := &activities{r: e.runner, hooks: e.runner.Hooks()}
			var attempts []int32
			e.te.RegisterActivityWithOptions(func(ctx context.Context, req *callRequest) (*driver.ToolResult, error) {
				attempt := activity.GetInfo(ctx).Attempt
				attempts = append(attempts, attempt)
				tr, err := a.Call(ctx, req)
				if attempt == 1 && err == nil {
					return nil, errors.New("the worker died before the activity completed")
				}
				return tr, err
			}, activity.RegisterOptions{Name: activityCall, DisableAlreadyRegisteredCheck: true})
			var run outcome
			e.update(time.Second, UpdateRun, &run, RunRequest{Input: "charge 4242"})
			e.run()
			if run.err != nil || run.res.Err != nil || len(run.res.Calls) != 1 {
				t.Fatalf("run = %+v, %v; want a turn with one result", run.res, run.err)
			}
			if diff := cmp.Diff([]int32{1, 2}, attempts); diff != "" {
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
