package temporal

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
)

// Register registers, on a worker, the thread workflow and the activities
// that run over r: its backend (opened by configuration as for core's
// Runner, through package adapter), its toolbox, middleware, limits and
// hooks. r's journal is not used: the workflow's history keeps the
// results. It registers the note workflow too (see [Runner.SetNote]), and
// the workflow of an agent tool's call, whose activities run over the
// agent tool's child runner (see package doc, Agent tools).
//
// Every worker of a task queue registers the same workflow; the workers
// of one queue share the backend's configuration, and each has its own
// runner.
func Register(w worker.Registry, r *core.Runner) {
	hooks := newRunHooks(r)
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, st State) error { return runThread(ctx, st, hooks) }, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterWorkflowWithOptions(Note, workflow.RegisterOptions{Name: NoteWorkflowName})
	a := &activities{r: r, hooks: r.Hooks(), id: NewThread()}
	w.RegisterActivityWithOptions(a.Start, activity.RegisterOptions{Name: activityStart})
	w.RegisterActivityWithOptions(a.Submit, activity.RegisterOptions{Name: activitySubmit})
	w.RegisterActivityWithOptions(a.Resume, activity.RegisterOptions{Name: activityResume})
	w.RegisterActivityWithOptions(a.Cancel, activity.RegisterOptions{Name: activityCancel})
	w.RegisterActivityWithOptions(a.Call, activity.RegisterOptions{Name: activityCall})
	agents := &agentRuns{r: r}
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, st agentState) (*turnResult, error) {
		return runAgent(ctx, st, agents.hooks(st.Agent))
	}, workflow.RegisterOptions{Name: AgentWorkflowName})
	w.RegisterActivityWithOptions(a.CancelAgent, activity.RegisterOptions{Name: activityCancelAgent})
}
