package temporal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
)

// TestReplay replays the histories that the real-server tests recorded
// (testdata/*.json; go test -run TestRecord -record in ./realtest) on the
// workflow as it is now: a change to the loop that would break the
// workflows running on a server fails here. long-turn-unversioned.json
// was recorded before a run continued as new inside a turn (its turn
// passes MaxHistoryEvents in one run), continue-in-turn-N.json after;
// cancel-paused.json holds a turn paused on an approval that the cancel
// signal ended (GetVersion "cancel-paused"), then a turn approved;
// agent-approval.json and agent-approval-child.json a turn whose agent
// tool's child, a child workflow (GetVersion "agent-child"), paused on an
// approval the parent took; agent-pause-timer.json and its -child the same
// once the parent's time limit stopped in that pause (GetVersion
// "agent-pause-timer").
// Replaying runs no activity and calls no Run hook, so no hook is called
// again.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("%d recorded histories in testdata, want the 10 kept", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var runs runLog
			hooks := &runHooks{backend: "openai", run: runs.hook, ends: map[string]func(*core.Result, error){}}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(func(ctx workflow.Context, st State) error { return runThread(ctx, st, hooks) }, workflow.RegisterOptions{Name: WorkflowName})
			r.RegisterWorkflowWithOptions(func(ctx workflow.Context, st agentState) (*turnResult, error) { return runAgent(ctx, st, hooks) }, workflow.RegisterOptions{Name: AgentWorkflowName})
			h, err := readHistory(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(quiet), h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: originalExecution(h)}); err != nil {
				t.Errorf("replay: %v", err)
			}
			if got := runs.get(); len(got) != 0 {
				t.Errorf("the run hook was called on replay: %q", got)
			}
		})
	}
}

// readHistory reads a history recorded as JSON.
func readHistory(file string) (*historypb.History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return client.HistoryFromJSON(f, client.HistoryJSONOptions{})
}

// originalExecution returns the execution a history is replayed as: for a
// thread that started an agent's child workflow, its workflow id, of
// which the child's id is made (see thread.agentWorkflowID); the
// replayer's own otherwise.
func originalExecution(h *historypb.History) workflow.Execution {
	for _, e := range h.GetEvents() {
		if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			id := a.GetWorkflowId()
			for range 2 {
				id = id[:max(strings.LastIndex(id, "/"), 0)]
			}
			return workflow.Execution{ID: id, RunID: "replay"}
		}
	}
	return workflow.Execution{}
}
