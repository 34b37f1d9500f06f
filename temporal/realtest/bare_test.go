package realtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The bare workflow: the floor the benchmarks compare the Temporal runner
// with, a workflow written directly on the SDK that runs, for each step,
// a no-op activity for the model step and one for each of its calls
// (concurrently), then one for the answer; as activities, or as local
// activities.
const (
	bareWorkflowName = "realtest.Bare"
	bareActivityName = "realtest.Noop"
)

// registerBare registers the bare workflow and its no-op activity.
func registerBare(w worker.Registry) {
	w.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: bareWorkflowName})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: bareActivityName})
}

func bareWorkflow(ctx workflow.Context, shape []int, local bool) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{ScheduleToCloseTimeout: time.Minute})
	run := func() workflow.Future {
		if local {
			return workflow.ExecuteLocalActivity(ctx, bareActivityName)
		}
		return workflow.ExecuteActivity(ctx, bareActivityName)
	}
	for _, calls := range shape {
		if err := run().Get(ctx, nil); err != nil {
			return err
		}
		fs := make([]workflow.Future, calls)
		for i := range fs {
			fs[i] = run()
		}
		for _, f := range fs {
			if err := f.Get(ctx, nil); err != nil {
				return err
			}
		}
	}
	return run().Get(ctx, nil)
}

var bareRuns atomic.Int64

// runBare runs the bare workflow of shape on queue to its end.
func runBare(ctx context.Context, c client.Client, queue string, shape []int, local bool) error {
	wf, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bare-%d", bareRuns.Add(1)), TaskQueue: queue}, bareWorkflowName, shape, local)
	if err != nil {
		return err
	}
	return wf.Get(ctx, nil)
}
