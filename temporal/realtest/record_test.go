package realtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/temporal"
)

var record = flag.Bool("record", false, "record the histories of the replay test (../testdata) anew")

// TestRecord records, with -record, the histories that the temporal
// module's TestReplay replays: a streamed turn of the weather bot (three
// steps, a side-effecting call), and a turn paused on an approval,
// decided, and a second turn on the thread; each workflow then ends idle.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("records only with -record (go test -run TestRecord -record)")
	}
	dir := t.TempDir()
	srv := openaitest.NewServer(&coretest.Script{Turns: []coretest.Turn{weatherScript.Turns[0], weatherScript.Turns[0]}}, nil)
	t.Cleanup(srv.Close)
	for _, approval := range []bool{false, true} {
		r := recordLoop(t, srv, filepath.Join(dir, "effects.log"), approval, &temporal.Options{Loop: temporal.LoopOptions{Idle: time.Second}})
		c := r.Client()
		name := "weather-stream"
		var thread string
		if !approval {
			st := r.Stream(t.Context(), "weather?", nil)
			res, err := st.Result()
			if err != nil || res.Text != weatherAnswer {
				t.Fatalf("stream: %+v, %v", res, err)
			}
			thread = res.Thread
		} else {
			name = "approval-two-turns"
			res, err := r.Run(t.Context(), "weather?", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("run: %v", err)
			}
			thread = res.Thread
			if err := r.Decide(t.Context(), thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "recorder"}); err != nil {
				t.Fatal(err)
			}
			if res, err = r.Resume(t.Context(), thread, nil); err != nil || res.Text != weatherAnswer {
				t.Fatalf("resume: %+v, %v", res, err)
			}
			res, err = r.Run(t.Context(), "again?", &core.RunOptions{Thread: thread})
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("second run: %v", err)
			}
			if err := r.Decide(t.Context(), thread, res.Pending[0].Key.Call, core.Decision{Reason: "not today", Actor: "recorder"}); err != nil {
				t.Fatal(err)
			}
			if _, err = r.Resume(t.Context(), thread, nil); err != nil {
				t.Fatal(err)
			}
		}
		// The workflow ends once idle.
		if err := c.GetWorkflow(t.Context(), thread, "").Get(t.Context(), nil); err != nil {
			t.Fatalf("workflow: %v", err)
		}
		writeHistory(t, c, thread, filepath.Join("..", "testdata", name+".json"))
	}
}

// writeHistory writes a workflow's history as JSON, as the replayer reads
// it.
func writeHistory(t *testing.T, c client.Client, id, file string) {
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d events", file, len(h.Events))
}

// TestRecordContinueInTurn records, with -record, the runs of a workflow
// that continues as new inside a turn (MaxHistoryEvents lowered: the
// weather bot's streamed turn passes it after a step), each run's history
// a file (testdata/continue-in-turn-N.json), for TestReplay: the run that
// carries the turn, and those that go on with it.
func TestRecordContinueInTurn(t *testing.T) {
	if !*record {
		t.Skip("records only with -record (go test -run TestRecord -record)")
	}
	srv := openaitest.NewServer(weatherScript, nil)
	t.Cleanup(srv.Close)
	r := recordLoop(t, srv, filepath.Join(t.TempDir(), "effects.log"), false, &temporal.Options{Loop: temporal.LoopOptions{Idle: time.Second, MaxHistoryEvents: 25}})
	c := r.Client()
	thread := temporal.NewThread()
	first := ""
	st := r.Stream(t.Context(), "weather?", &core.RunOptions{Thread: thread, Held: func() { first = c.GetWorkflow(t.Context(), thread, "").GetRunID() }})
	if res, err := st.Result(); err != nil || res.Text != weatherAnswer {
		t.Fatalf("stream: %+v, %v", res, err)
	}
	if err := c.GetWorkflow(t.Context(), thread, "").Get(t.Context(), nil); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	// The chain of runs, from the first.
	run := first
	for n := 1; run != ""; n++ {
		next := writeRun(t, c, thread, run, filepath.Join("..", "testdata", fmt.Sprintf("continue-in-turn-%d.json", n)))
		if n == 1 && next == "" {
			t.Fatal("the turn did not continue as new")
		}
		run = next
	}
}

// writeRun writes the history of one run of a workflow as JSON (see
// writeHistory), and returns the run that continued it as new, if any.
func writeRun(t *testing.T, c client.Client, id, run, file string) (next string) {
	it := c.GetWorkflowHistory(t.Context(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			next = a.GetNewExecutionRunId()
		}
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d events", file, len(h.Events))
	return next
}

// TestRecordCancelPaused records, with -record, the history of a turn
// paused on an approval and canceled (the cancel signal ends the pause,
// behind GetVersion "cancel-paused"), then a second turn on the thread,
// approved and answered (testdata/cancel-paused.json), for TestReplay.
func TestRecordCancelPaused(t *testing.T) {
	if !*record {
		t.Skip("records only with -record (go test -run TestRecord -record)")
	}
	srv := openaitest.NewServer(&coretest.Script{Turns: []coretest.Turn{weatherScript.Turns[0], weatherScript.Turns[0]}}, nil)
	t.Cleanup(srv.Close)
	r := recordLoop(t, srv, filepath.Join(t.TempDir(), "effects.log"), true, &temporal.Options{Loop: temporal.LoopOptions{Idle: time.Second}})
	c := r.Client()
	res, err := r.Run(t.Context(), "weather?", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("run: %v", err)
	}
	thread := res.Thread
	if err := r.Cancel(t.Context(), thread); err != nil {
		t.Fatalf("cancel of the paused turn: %v", err)
	}
	res, err = r.Run(t.Context(), "again?", &core.RunOptions{Thread: thread})
	if !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("second run: %v", err)
	}
	if err := r.Decide(t.Context(), thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "recorder"}); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Resume(t.Context(), thread, nil); err != nil || res.Text != weatherAnswer {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if err := c.GetWorkflow(t.Context(), thread, "").Get(t.Context(), nil); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	writeHistory(t, c, thread, filepath.Join("..", "testdata", "cancel-paused.json"))
}

// recordLoop returns, for a TestRecord test, a Temporal runner with opts
// on a queue of its own, whose worker (in this process) runs the weather
// tools (effects logged to effects; the refund needing approval if
// approval) over the sessions backend on srv.
func recordLoop(t *testing.T, srv *openaitest.Server, effects string, approval bool, opts *temporal.Options) *temporal.Runner {
	t.Helper()
	tools, err := weatherTools(effects, 0, approval)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openai.Open(t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	opts.TaskQueue = newQueue(t)
	startWorker(t, c, opts.TaskQueue, core.NewRunner(b, tools, &core.Options{Logger: quiet}))
	return temporal.NewRunner(c, opts)
}

// TestRecordAgent records, with -record, the histories of a turn whose
// agent tool's child (a child workflow, GetVersion "agent-child") paused
// on its refund's approval, which the parent took (its time limit
// stopped, GetVersion "agent-pause-timer"), decided and handed to the
// child: the parent's (testdata/agent-pause-timer.json) and the child's
// (testdata/agent-pause-timer-child.json), for TestReplay. (The
// agent-approval pair was recorded so before the parent's time limit
// stopped.)
func TestRecordAgent(t *testing.T) {
	if !*record {
		t.Skip("records only with -record (go test -run TestRecord -record)")
	}
	childSrv := openaitest.NewServer(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":50}`)}}},
		{Text: `child: {{output "refund"}}`},
	}}}}, nil)
	t.Cleanup(childSrv.Close)
	parentSrv := openaitest.NewServer(coretest.Simple("ask_refunds", `{"input":"refund order 7"}`, `parent: {{output "ask_refunds"}}`), nil)
	t.Cleanup(parentSrv.Close)
	refund, err := core.NewTool("refund", "Refund an order.", func(context.Context, struct {
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}) (string, error) {
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("every refund")})
	if err != nil {
		t.Fatal(err)
	}
	childTools, err := core.NewToolbox(refund)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := openai.Open(t.Context(), childTools, &openai.Options{BaseURL: childSrv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	child := core.NewRunner(cb, childTools, &core.Options{Logger: quiet})
	t.Cleanup(func() { child.Close() })
	agent, err := core.NewAgentTool("ask_refunds", "Ask the refund agent.", child, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(agent)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := openai.Open(t.Context(), tools, &openai.Options{BaseURL: parentSrv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	queue := newQueue(t)
	startWorker(t, c, queue, core.NewRunner(pb, tools, &core.Options{Logger: quiet}))
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Idle: time.Second}})
	// TestReplay replays the parent with its id, which the child's is
	// made of (see originalExecution).
	res, err := r.Run(t.Context(), "go", &core.RunOptions{Thread: "agent-pause-timer"})
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("run: %+v, %v; want a pause on the child's refund", res, err)
	}
	thread, callID := res.Thread, res.Pending[0].Key.Call
	if err := r.Decide(t.Context(), thread, callID, core.Decision{Approved: true, Actor: "recorder"}); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Resume(t.Context(), thread, nil); err != nil || res.Text != "parent: child: refunded" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if err := c.GetWorkflow(t.Context(), thread, "").Get(t.Context(), nil); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	parentCall, _, _ := strings.Cut(callID, "/")
	writeHistory(t, c, thread, filepath.Join("..", "testdata", thread+".json"))
	writeHistory(t, c, thread+"/1/"+parentCall, filepath.Join("..", "testdata", thread+"-child.json"))
}
