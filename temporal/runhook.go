package temporal

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
)

// maxOpenRuns bounds the runs a worker remembers as begun and not ended:
// a run whose turn ends on another worker (this one's cache lost the
// workflow) is never ended here.
const maxOpenRuns = 10000

// runHooks calls a worker's Run hook (core.Hooks.Run) for the turns its
// workflows run: once when a turn begins (and when it goes on after a
// pause for approval, as a resume), and its end once when it ends (or
// pauses). Workflow code calls it only when it is not replaying, and the
// end functions are kept by the worker, not the workflow: a workflow
// evicted from the worker's cache and replayed neither begins a run again
// nor loses its end.
type runHooks struct {
	backend string
	run     func(context.Context, *core.RunInfo) (context.Context, func(*core.Result, error))

	mu   sync.Mutex
	ends map[string]func(*core.Result, error)
}

// newRunHooks returns the run hooks of r, or nil when it has no Run hook.
func newRunHooks(r *core.Runner) *runHooks {
	h := r.Hooks()
	if h == nil || h.Run == nil {
		return nil
	}
	return &runHooks{backend: r.Backend().Name(), run: h.Run, ends: map[string]func(*core.Result, error){}}
}

// runKey names the current part of the thread's current turn.
func (t *thread) runKey(ctx workflow.Context) string {
	return fmt.Sprintf("%s/%d/%d", workflow.GetInfo(ctx).WorkflowExecution.ID, t.st.Turns, t.runPart)
}

// beginRun calls the Run hook as the turn begins, or (resume) goes on
// after a pause.
func (t *thread) beginRun(ctx workflow.Context, resume bool) {
	h := t.hooks
	if h == nil || workflow.IsReplaying(ctx) {
		return
	}
	key := t.runKey(ctx)
	h.mu.Lock()
	_, begun := h.ends[key]
	h.mu.Unlock()
	if begun {
		return // a workflow task run again on this worker
	}
	info := &core.RunInfo{Backend: h.backend, Resume: resume}
	if t.st.Turns > 1 || resume {
		info.Thread = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	_, end := h.run(context.Background(), info)
	if end == nil {
		end = func(*core.Result, error) {}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ends) >= maxOpenRuns {
		for k := range h.ends {
			delete(h.ends, k) // any one: its end is lost
			break
		}
	}
	h.ends[key] = end
}

// endRun calls the end function of the run beginRun began, with the
// turn's outcome (paused, or done) as Runner.Run returns it.
func (t *thread) endRun(ctx workflow.Context, tr *turnResult) {
	key := t.runKey(ctx)
	t.runPart++ // replaying too: the keys are the workflow's
	h := t.hooks
	if h == nil || workflow.IsReplaying(ctx) {
		return
	}
	h.mu.Lock()
	end, ok := h.ends[key]
	delete(h.ends, key)
	h.mu.Unlock()
	if !ok {
		return // begun on another worker, or before this one's cache lost the workflow
	}
	cp := *tr
	cp.Calls, cp.Pending = slices.Clone(tr.Calls), slices.Clone(tr.Pending)
	end(result(workflow.GetInfo(ctx).WorkflowExecution.ID, &cp))
}
