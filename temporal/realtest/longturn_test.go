package realtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/temporal"
)

// TestLongTurn (issue 46, item 9): one turn of 750 calls (five steps of
// 150) makes a history well past the server's limit (historyCountError,
// lowered): the workflow continues as new inside the turn when the server
// suggests it, each run within the limit, the turn going on in the new
// run; the streamed turn ends with its answer, each call run once and
// reported at most once, and the thread's next turn runs. Before, the
// server ended the workflow at its limit: the answer was lost and the
// next turn failed.
func TestLongTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server's long turn")
	}
	const steps, perStep = 5, 150
	var ran atomic.Int64
	charge, err := core.NewTool("charge", "Charges.", func(_ context.Context, in struct{ N int }) (int, error) {
		ran.Add(1)
		return in.N, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(charge)
	if err != nil {
		t.Fatal(err)
	}
	var turn coretest.Turn
	for s := range steps {
		var st coretest.Step
		for c := range perStep {
			st.Calls = append(st.Calls, coretest.Call{Name: "charge", Arguments: json.RawMessage(fmt.Sprintf(`{"N":%d}`, s*perStep+c))})
		}
		turn.Steps = append(turn.Steps, st)
	}
	turn.Steps = append(turn.Steps, coretest.Step{Text: "charged them all"})
	script := &coretest.Script{Turns: []coretest.Turn{turn, {Steps: []coretest.Step{{Text: "and the next"}}}}}
	c := dial(t)
	queue := newQueue(t)
	startWorker(t, c, queue, core.NewRunner(coretest.NewBackend(script, nil), tools, &core.Options{Logger: quiet}))
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Idle: time.Minute}})
	thread := temporal.NewThread()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st := r.Stream(ctx, "charge them all", &core.RunOptions{Thread: thread})
	finished := map[string]int{} // call id: EventCallFinished
	var runID string             // the first run's
	for ev, err := range st.Events() {
		if err != nil {
			break // st.Result has it
		}
		if runID == "" {
			runID = c.GetWorkflow(ctx, thread, "").GetRunID()
		}
		if ev.Kind == core.EventCallFinished {
			finished[ev.Call.ID]++
		}
	}
	res, err := st.Result()
	d, derr := c.DescribeWorkflowExecution(t.Context(), thread, runID)
	if derr != nil {
		t.Fatal(derr)
	}
	info := d.GetWorkflowExecutionInfo()
	if err != nil {
		t.Fatalf("the long turn: %v; its first run ended %v after %d events", err, info.GetStatus(), info.GetHistoryLength())
	}
	if res.Text != "charged them all" || res.Steps != steps || res.ToolCalls != steps*perStep {
		t.Errorf("the long turn = %q after %d steps and %d calls, want its answer after %d and %d", res.Text, res.Steps, res.ToolCalls, steps, steps*perStep)
	}
	if n := ran.Load(); n != steps*perStep {
		t.Errorf("%d calls ran, want %d, each once", n, steps*perStep)
	}
	for id, n := range finished {
		if n != 1 {
			t.Errorf("call %s reported finished %d times, want once", id, n)
		}
	}
	last := c.GetWorkflow(ctx, thread, "").GetRunID()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW || info.GetHistoryLength() >= historyCountError || last == runID {
		t.Errorf("the first run ended %v with %d events (the limit is %d), the last run %s; want it continued as new, within the limit", info.GetStatus(), info.GetHistoryLength(), historyCountError, last)
	}
	next, err := r.Run(ctx, "and then?", &core.RunOptions{Thread: thread})
	if err != nil || next.Text != "and the next" {
		t.Fatalf("the next turn = %+v, %v; want its answer", next, err)
	}
	t.Logf("%d calls, %d reported finished to the stream's reader; the first run continued as new after %d events", ran.Load(), len(finished), info.GetHistoryLength())
}
