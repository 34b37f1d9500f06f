package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// env is a test workflow environment running the thread workflow over a
// coretest backend playing a script, with the weather bot's tools and a
// refund that needs approval over 100.
type env struct {
	t       *testing.T
	te      *testsuite.TestWorkflowEnvironment
	backend *coretest.Backend
	runner  *core.Runner
	refunds atomic.Int32
	steps   atomic.Int32 // the step hook's calls
	calls   atomic.Int32 // the call hook's calls
	runs    runLog       // the run hook's calls
	start   State
}

type cityArgs struct {
	City string `json:"city"`
}

type refundArgs struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func newEnv(t *testing.T, script *coretest.Script, set LoopOptions, extra ...*core.Tool) *env {
	t.Helper()
	return newEnvOn(t, script, nil, set, extra...)
}

// newEnvOn is newEnv with the coretest backend seen through wrap, if set.
func newEnvOn(t *testing.T, script *coretest.Script, wrap func(*coretest.Backend) driver.Backend, set LoopOptions, extra ...*core.Tool) *env {
	t.Helper()
	e := &env{t: t}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet))
	e.te = s.NewTestWorkflowEnvironment()
	e.te.SetTestTimeout(30 * time.Second)
	weather := must(core.NewTool("get_weather", "weather of a city", func(_ context.Context, in cityArgs) (string, error) {
		return "sunny in " + in.City, nil
	}, &core.ToolOptions{ReadOnly: true}))
	refund := must(core.NewTool("refund", "refunds an order", func(_ context.Context, in refundArgs) (string, error) {
		e.refunds.Add(1)
		return "refunded " + in.Order, nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) { return in.Amount > 100, "over 100" })}))
	big := must(core.NewTool("big", "a large output", func(_ context.Context, in struct{ N int }) (string, error) {
		return strings.Repeat("x", in.N), nil
	}, nil))
	tb := must(core.NewToolbox(append([]*core.Tool{weather, refund, big}, extra...)...))
	e.backend = coretest.NewBackend(script, nil)
	hooks := &core.Hooks{
		Run: e.runs.hook,
		Step: func(ctx context.Context, _ *core.StepInfo) (context.Context, func(*driver.Step, error)) {
			e.steps.Add(1)
			return ctx, func(*driver.Step, error) {}
		},
		Call: func(ctx context.Context, _ *core.CallInfo) (context.Context, func(*core.CallEnd)) {
			e.calls.Add(1)
			return ctx, func(*core.CallEnd) {}
		},
	}
	var b driver.Backend = e.backend
	if wrap != nil {
		b = wrap(e.backend)
	}
	r := core.NewRunner(b, tb, &core.Options{Hooks: hooks, Logger: quiet})
	Register(e.te, r)
	e.runner = r
	set.Idle = time.Hour
	e.start = State{Settings: set}
	return e
}

// runLog records a Run hook's calls: "begin", with " resume" or the
// thread continued, and "end", with the answer or the error's code.
type runLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *runLog) hook(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
	l.add(fmt.Sprintf("begin %s thread=%q resume=%v", info.Backend, info.Thread, info.Resume))
	return ctx, func(res *core.Result, err error) {
		if err != nil {
			l.add(fmt.Sprintf("end error %v", errcode.Of(err)))
			return
		}
		l.add(fmt.Sprintf("end %q", res.Text))
	}
}

func (l *runLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *runLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// outcome is what an update returned.
type outcome struct {
	res *turnResult
	err error
}

// update sends an update at delay (of the workflow's clock) and keeps
// its outcome in o.
func (e *env) update(delay time.Duration, name string, o *outcome, args ...any) {
	e.te.RegisterDelayedCallback(func() {
		e.te.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { o.err = err },
			OnComplete: func(v any, err error) {
				o.err = err
				if v != nil {
					b, _ := json.Marshal(v)
					o.res = new(turnResult)
					json.Unmarshal(b, o.res)
				}
			},
		}, args...)
	}, delay)
}

// run executes the workflow to its idle end.
func (e *env) run() {
	e.t.Helper()
	e.te.ExecuteWorkflow(WorkflowName, e.start)
	if !e.te.IsWorkflowCompleted() {
		e.t.Fatal("the workflow did not complete")
	}
	if err := e.te.GetWorkflowError(); err != nil {
		e.t.Fatalf("workflow: %v", err)
	}
}

func weather() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}, {Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)}}},
		{Text: `{{output "get_weather"}}`},
	}}}}
}

// TestTurn runs the weather bot's turn: both calls run, their results go
// back in call order, the answer quotes them; each step and call reaches
// the runner's hooks once.
func TestTurn(t *testing.T) {
	e := newEnv(t, weather(), LoopOptions{})
	var o outcome
	e.update(time.Second, UpdateRun, &o, runRequest{Input: "weather?"})
	e.run()
	if o.err != nil {
		t.Fatalf("run: %v", o.err)
	}
	if !o.res.Done || o.res.Err != nil || o.res.Steps != 1 || o.res.Thread == "" {
		t.Fatalf("turn = %+v, want done in one step on a thread", o.res)
	}
	var outs []string
	for _, c := range o.res.Calls {
		outs = append(outs, c.Output.Text)
	}
	if diff := cmp.Diff([]string{"sunny in Paris", "sunny in Rome"}, outs); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if !strings.Contains(o.res.Text, "sunny in") {
		t.Errorf("answer %q does not quote the output", o.res.Text)
	}
	if s, c := e.steps.Load(), e.calls.Load(); s != 2 || c != 2 {
		t.Errorf("hooks saw %d steps and %d calls, want 2 and 2", s, c)
	}
	want := []string{`begin coretest thread="" resume=false`, fmt.Sprintf("end %q", o.res.Text)}
	if diff := cmp.Diff(want, e.runs.get()); diff != "" {
		t.Errorf("run hook (-want +got):\n%s", diff)
	}
}

func refundScript(amount string) *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{
			{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			{Name: "refund", Arguments: json.RawMessage(`{"order":"A1","amount":` + amount + `}`), ID: "call_refund"},
		}},
		{Text: `{{output "refund"}}`},
	}}}}
}

// TestApproval: a refund over 100 pauses the turn after the step's other
// call ran; the decide update's validator refuses an unknown call,
// arguments that are not JSON and (after the decision) a second one,
// recording nothing; the approved refund runs once with the edited
// arguments.
func TestApproval(t *testing.T) {
	e := newEnv(t, refundScript("500"), LoopOptions{})
	var run, wait, unknown, notJSON, decide, second outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
	e.update(2*time.Second, UpdateDecide, &unknown, decideRequest{CallID: "nope", Decision: core.Decision{Approved: true}})
	e.update(3*time.Second, UpdateDecide, &notJSON, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Arguments: json.RawMessage(`[1,2]`)}})
	e.update(4*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann", Arguments: json.RawMessage(`{"order":"A1-edited","amount":500}`)}})
	e.update(5*time.Second, UpdateDecide, &second, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: false}})
	e.update(6*time.Second, UpdateWait, &wait)
	e.run()
	if run.err != nil || run.res.Done || len(run.res.Pending) != 1 || run.res.Pending[0].Key.Call != "call_refund" || run.res.Pending[0].Why != "over 100" {
		t.Fatalf("run = %+v, %v; want a pause on call_refund", run.res, run.err)
	}
	if len(run.res.Calls) != 0 {
		t.Errorf("paused turn lists results %+v, want none sent yet", run.res.Calls)
	}
	for _, c := range []struct {
		name string
		o    outcome
		code errcode.Code
	}{{"unknown call", unknown, errcode.NotFound}, {"not JSON", notJSON, errcode.InvalidArgument}, {"second decision", second, errcode.FailedPrecondition}} {
		if got := errcode.Of(clientError("decide", c.o.err)); c.o.err == nil || got != c.code {
			t.Errorf("%s: decide error %v (code %v), want code %v", c.name, c.o.err, got, c.code)
		}
	}
	if decide.err != nil {
		t.Fatalf("decide: %v", decide.err)
	}
	if wait.err != nil || !wait.res.Done || wait.res.Text != "refunded A1-edited" {
		t.Fatalf("wait = %+v, %v; want the answer quoting the edited refund", wait.res, wait.err)
	}
	if n := e.refunds.Load(); n != 1 {
		t.Errorf("refund ran %d times, want 1", n)
	}
	// As core's runner: the run that pauses ends, and the turn going on
	// once decided is a resume of the thread.
	want := []string{`begin coretest thread="" resume=false`, "end error FailedPrecondition",
		fmt.Sprintf("begin coretest thread=%q resume=true", testWorkflowID), `end "refunded A1-edited"`}
	if diff := cmp.Diff(want, e.runs.get()); diff != "" {
		t.Errorf("run hook (-want +got):\n%s", diff)
	}
}

// TestApprovalExpires: a call undecided past ApprovalTimeout is denied by
// the workflow's timer, and the model is told.
func TestApprovalExpires(t *testing.T) {
	e := newEnv(t, refundScript("500"), LoopOptions{ApprovalTimeout: time.Minute})
	var run, wait outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
	e.update(2*time.Minute, UpdateWait, &wait)
	e.run()
	if wait.err != nil || !wait.res.Done {
		t.Fatalf("wait = %+v, %v", wait.res, wait.err)
	}
	if !strings.Contains(wait.res.Text, "no decision in time") || e.refunds.Load() != 0 {
		t.Errorf("answer %q with %d refunds, want a denial for no decision in time and none", wait.res.Text, e.refunds.Load())
	}
}

// TestMaxSteps: a model that keeps calling ends the turn with
// ErrMaxSteps, and its turn is canceled on the service.
func TestMaxSteps(t *testing.T) {
	step := coretest.Step{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}
	e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, step, step, {Text: "never"}}}}}, LoopOptions{MaxSteps: 2})
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "loop"})
	e.run()
	if run.err != nil || run.res.Err == nil {
		t.Fatalf("run = %+v, %v; want a failed turn", run.res, run.err)
	}
	if err := run.res.Err.Err(); !errors.Is(err, core.ErrMaxSteps) || errcode.Of(err) != errcode.ResourceExhausted {
		t.Errorf("turn error %v, want ErrMaxSteps with ResourceExhausted", err)
	}
	var kinds []string
	for _, r := range e.backend.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "results", "results", "cancel"}, kinds); diff != "" {
		t.Errorf("the service received (-want +got):\n%s", diff)
	}
}

// TestPayloadLimit: an output that would pass what the history keeps is
// sent as a failed result saying so, and the turn goes on.
func TestPayloadLimit(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "big", Arguments: json.RawMessage(`{"N":5000}`)}, {Name: "big", Arguments: json.RawMessage(`{"N":10}`)}}},
		{Text: "done"},
	}}}}
	e := newEnv(t, script, LoopOptions{MaxPayloadBytes: 4000})
	var run outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "big"})
	e.run()
	if run.err != nil || run.res.Err != nil {
		t.Fatalf("run = %+v, %v", run.res, run.err)
	}
	got := run.res.Calls
	if len(got) != 2 || got[0].Outcome != core.TooLarge || !strings.Contains(got[0].Error, "too large for the workflow's history (5000 bytes; the limit is 4000)") || got[1].Output.Text != "xxxxxxxxxx" {
		t.Errorf("results %+v, want the first refused as too large and the second kept", got)
	}
}

// TestInputLimit: an input longer than what the history keeps
// (MaxPayloadBytes) ends the turn with InvalidArgument before anything is
// sent; one at the limit runs.
func TestInputLimit(t *testing.T) {
	for _, tc := range []struct {
		n        int
		wantCode string // "" for a turn answered
	}{{4000, ""}, {4001, "InvalidArgument"}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "ok"}}}}}, LoopOptions{MaxPayloadBytes: 4000})
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: strings.Repeat("x", tc.n)})
			e.run()
			if run.err != nil {
				t.Fatalf("run: %v", run.err)
			}
			got := ""
			if run.res.Err != nil {
				got = run.res.Err.Code
			}
			sent := len(e.backend.Received())
			if got != tc.wantCode || (tc.wantCode != "") != (sent == 0) {
				t.Errorf("turn error %+v with %d requests received; want code %q, and nothing sent if refused", run.res.Err, sent, tc.wantCode)
			}
		})
	}
}

// TestIdempotencyKeysPerTurn: the key a call's result carries (the
// Idempotency-Key of the request that sends it, on OpenAI sessions) is
// the call's own: two turns of a thread whose calls have the same id at
// the same step get two keys, or the service would take the second
// turn's results for a replay of the first's.
func TestIdempotencyKeysPerTurn(t *testing.T) {
	turn := coretest.Turn{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`), ID: "call_same"}}},
		{Text: "done"},
	}}
	e := newEnv(t, &coretest.Script{Turns: []coretest.Turn{turn, turn}}, LoopOptions{})
	var one, two outcome
	e.update(time.Second, UpdateRun, &one, runRequest{Input: "1"})
	e.update(2*time.Second, UpdateRun, &two, runRequest{Input: "2"})
	e.run()
	if one.err != nil || two.err != nil || len(one.res.Calls) != 1 || len(two.res.Calls) != 1 {
		t.Fatalf("turns %+v (%v), %+v (%v); want one call each", one.res, one.err, two.res, two.err)
	}
	k1, k2 := one.res.Calls[0].IdempotencyKey, two.res.Calls[0].IdempotencyKey
	if k1 == "" || k1 == k2 {
		t.Errorf("idempotency keys %q and %q, want two", k1, k2)
	}
}

// TestSecondTurn: a second run on the thread continues the service's
// thread (a run while a turn runs is refused: TestBusy).
func TestSecondTurn(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "one"}}}, {Steps: []coretest.Step{{Text: "two"}}}}}
	e := newEnv(t, script, LoopOptions{})
	var one, two outcome
	e.update(time.Second, UpdateRun, &one, runRequest{Input: "1"})
	e.update(2*time.Second, UpdateRun, &two, runRequest{Input: "2"})
	e.run()
	if one.err != nil || two.err != nil || one.res.Text != "one" || two.res.Text != "two" || one.res.Thread != two.res.Thread || two.res.Turn != 2 {
		t.Fatalf("turns %+v (%v), %+v (%v); want one then two on one thread", one.res, one.err, two.res, two.err)
	}
}

// testWorkflowID is the workflow id of the test environment's workflow.
const testWorkflowID = "default-test-workflow-id"

// TestBusy: a second turn asked for while a turn runs on the thread, paused
// on a call awaiting a decision or in the middle of a call, is refused at
// once with an error matching core.ErrThreadBusy (FailedPrecondition);
// the running turn goes on to its answer, its input the only one sent.
func TestBusy(t *testing.T) {
	for _, c := range []struct {
		name   string
		amount string // of the refund: over 100 pauses the turn
		slow   bool   // the calls take a minute of the workflow's clock
	}{
		{"paused", "500", false},
		{"in a call", "50", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, refundScript(c.amount), LoopOptions{})
			if c.slow {
				a := &activities{r: e.runner, hooks: e.runner.Hooks()}
				e.te.OnActivity(activityCall, mock.Anything, mock.Anything).After(time.Minute).Return(a.Call)
			}
			var run, second, decide, wait outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
			e.update(2*time.Second, UpdateRun, &second, runRequest{Input: "and another"})
			if !c.slow {
				e.update(3*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true}})
			}
			e.update(2*time.Minute, UpdateWait, &wait)
			e.run()
			err := clientError("run", second.err)
			if !errors.Is(err, core.ErrThreadBusy) || errcode.Of(err) != errcode.FailedPrecondition || second.res != nil {
				t.Errorf("second run while a turn runs = %+v, %v (code %v); want refused, matching ErrThreadBusy, FailedPrecondition", second.res, err, errcode.Of(err))
			}
			if decide.err != nil || wait.err != nil || wait.res == nil || wait.res.Turn != 1 || wait.res.Text != "refunded A1" {
				t.Fatalf("decide: %v; wait = %+v, %v; want the first turn's answer", decide.err, wait.res, wait.err)
			}
			var inputs []string
			for _, r := range e.backend.Received() {
				if r.Kind == "input" {
					inputs = append(inputs, r.Input)
				}
			}
			if diff := cmp.Diff([]string{"refund A1"}, inputs); diff != "" {
				t.Errorf("inputs the service received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConcurrency: the calls of a step run at most Concurrency at once,
// and that many do. Each call takes a second of the workflow's clock,
// which moves only once every call started is waiting: the calls started
// and not finished are counted by the environment's listeners, in the
// workflow's own loop.
func TestConcurrency(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var calls []coretest.Call
			for _, city := range []string{"Oslo", "Rome", "Paris", "Lima", "Quito"} {
				calls = append(calls, coretest.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"` + city + `"}`)})
			}
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Calls: calls}, {Text: "done"}}}}}
			e := newEnv(t, script, LoopOptions{Concurrency: n})
			a := &activities{r: e.runner, hooks: e.runner.Hooks()}
			e.te.OnActivity(activityCall, mock.Anything, mock.Anything).After(time.Second).Return(a.Call)
			var open, most, ran int
			e.te.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == activityCall {
					open++
					most = max(most, open)
				}
			})
			e.te.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
				if info.ActivityType.Name == activityCall {
					open--
					ran++
				}
			})
			var run outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "weather of five cities"})
			e.run()
			if run.err != nil || run.res == nil || run.res.Err != nil || len(run.res.Calls) != 5 {
				t.Fatalf("run = %+v, %v; want the answer after five calls", run.res, run.err)
			}
			if most != n || ran != 5 {
				t.Errorf("%d calls ran, at most %d at once; want 5, at most %d (Concurrency)", ran, most, n)
			}
		})
	}
}
