package realtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/temporal"
)

// cost is what a turn puts in its workflow's history.
type cost struct {
	// Tasks counts the workflow tasks completed; Events, the events.
	Tasks, Events int
}

func (a cost) minus(b cost) cost { return cost{a.Tasks - b.Tasks, a.Events - b.Events} }

// over reports whether a is more than b in tasks or events.
func (a cost) over(b cost) bool { return a.Tasks > b.Tasks || a.Events > b.Events }

// costs are a step's and a call's.
type costs struct{ Step, ReadCall, EffectCall cost }

func (a costs) over(b costs) bool {
	return a.Step.over(b.Step) || a.ReadCall.over(b.ReadCall) || a.EffectCall.over(b.EffectCall)
}

// perStep is the most a step of one call, a read-only call, and a call
// that takes effect (neither idempotent nor read-only) add to a turn's
// history, in each mode (see BENCHMARKS.md, T1): the figures a change
// must not grow. With activities, a second call's activity completes in
// its step's workflow task or in one of its own (3 events more): its
// figure is the larger.
var perStep = map[string]costs{
	"activities": {Step: cost{Tasks: 2, Events: 12}, ReadCall: cost{Tasks: 1, Events: 6}, EffectCall: cost{Tasks: 1, Events: 6}},
	"local":      {Step: cost{Tasks: 0, Events: 3}, ReadCall: cost{Tasks: 0, Events: 1}, EffectCall: cost{Tasks: 0, Events: 2}},
}

// TestHistoryPerStep counts the workflow tasks and history events of turns
// of one and two steps of one call, and of one step of two calls (read
// only, or one taking effect), in each mode; the differences are a step's
// and a call's cost, which must not pass perStep's.
func TestHistoryPerStep(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server's histories")
	}
	echo, err := core.NewTool("echo", "Echoes.", func(_ context.Context, in struct{ N int }) (int, error) { return in.N, nil }, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	effect, err := core.NewTool("effect", "Takes effect.", func(_ context.Context, in struct{ N int }) (int, error) { return in.N, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(echo, effect)
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, n int) coretest.Call {
		return coretest.Call{Name: name, Arguments: json.RawMessage(fmt.Sprintf(`{"N":%d}`, n))}
	}
	turn := func(steps ...coretest.Step) *coretest.Script {
		return &coretest.Script{Turns: []coretest.Turn{{Steps: append(steps, coretest.Step{Text: "done"})}}}
	}
	scripts := map[string]*coretest.Script{
		"one":    turn(coretest.Step{Calls: []coretest.Call{call("echo", 1)}}),
		"two":    turn(coretest.Step{Calls: []coretest.Call{call("echo", 1)}}, coretest.Step{Calls: []coretest.Call{call("echo", 2)}}),
		"read":   turn(coretest.Step{Calls: []coretest.Call{call("echo", 1), call("echo", 2)}}),
		"effect": turn(coretest.Step{Calls: []coretest.Call{call("echo", 1), call("effect", 2)}}),
	}
	c := dial(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			got := map[string]cost{}
			for name, script := range scripts {
				queue := newQueue(t)
				w := startWorker(t, c, queue, core.NewRunner(coretest.NewBackend(script, nil), tools, &core.Options{Logger: quiet, ToolTimeout: localToolTimeout}))
				r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: localSettings(temporal.LoopOptions{Idle: time.Minute}, m.local)})
				res, err := r.Run(t.Context(), "go", nil)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.Text != "done" {
					t.Fatalf("%s answered %q", name, res.Text)
				}
				got[name] = historyCost(t, c, res.Thread)
				w.Stop()
			}
			want := perStep[m.name]
			measured := costs{
				Step:       got["two"].minus(got["one"]),
				ReadCall:   got["read"].minus(got["one"]),
				EffectCall: got["effect"].minus(got["one"]),
			}
			t.Logf("turn of one step of one call: %+v; a step: %+v; a read-only call: %+v; a call taking effect: %+v", got["one"], measured.Step, measured.ReadCall, measured.EffectCall)
			if measured.over(want) {
				t.Errorf("a step's or a call's history grew (-most +got):\n%s", cmp.Diff(want, measured))
			}
		})
	}
}

// historyCost counts the workflow tasks and events of the workflow's
// history, once no workflow task is pending (the one a claim signal asks
// for may follow the turn's end).
func historyCost(t *testing.T, c client.Client, id string) cost {
	t.Helper()
	for i := 0; ; i++ {
		d, err := c.DescribeWorkflowExecution(t.Context(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.PendingWorkflowTask == nil {
			break
		}
		if i == 500 {
			t.Fatalf("workflow %s: a workflow task still pending after %d looks", id, i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n cost
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n.Events++
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			n.Tasks++
		}
	}
	return n
}
