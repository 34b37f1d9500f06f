package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// envClient is a Temporal client whose queries reach the test
// environment's workflow (testWorkflowID; any other is not found), so
// that a Runner's client side runs against the workflow. Its other
// methods are not implemented.
type envClient struct {
	client.Client
	te *testsuite.TestWorkflowEnvironment
}

func (c envClient) QueryWorkflow(_ context.Context, workflowID, _ string, queryType string, args ...any) (converter.EncodedValue, error) {
	if workflowID != testWorkflowID {
		return nil, serviceerror.NewNotFound("workflow not found: " + workflowID)
	}
	return c.te.QueryWorkflow(queryType, args...)
}

// approvalSeen is what TestApprovalsQuery compares of an approval.
type approvalSeen struct {
	Key       journaldriver.Key
	Tool, Why string
	Arguments string
	Wait      time.Duration // Expires - Requested
	Decided   bool
	Approved  bool
	Actor     string
}

// TestApprovalsQuery: Runner.Approvals returns the approvals of the
// thread's current turn: the call awaiting a decision, keyed by the
// backend, the service's thread and turn and the call; then, decided,
// with its decision, also once the turn ended. A thread no workflow has
// is NotFound.
func TestApprovalsQuery(t *testing.T) {
	e := newEnv(t, refundScript("500"), LoopOptions{ApprovalTimeout: time.Hour})
	r := NewRunner(envClient{te: e.te}, nil)
	type seen struct {
		list []approvalSeen
		err  error
	}
	var asked, decided, ended, other seen
	look := func(at time.Duration, thread string, s *seen) {
		e.te.RegisterDelayedCallback(func() {
			list, err := r.Approvals(context.Background(), thread)
			s.err = err
			for _, a := range list {
				as := approvalSeen{Key: a.Key, Tool: a.Tool, Why: a.Why, Arguments: string(a.Arguments), Wait: a.Expires.Sub(a.Requested)}
				if d := a.Decision; d != nil {
					as.Decided, as.Approved, as.Actor = true, d.Approved, d.Actor
				}
				s.list = append(s.list, as)
			}
		}, at)
	}
	var run, decide, wait outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
	look(2*time.Second, testWorkflowID, &asked)
	look(2*time.Second, "another-thread", &other)
	e.update(3*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann"}})
	look(4*time.Second, testWorkflowID, &decided)
	e.update(5*time.Second, UpdateWait, &wait)
	look(6*time.Second, testWorkflowID, &ended)
	e.run()
	if run.err != nil || run.res == nil || len(run.res.Pending) != 1 || decide.err != nil || wait.err != nil || wait.res == nil || !wait.res.Done {
		t.Fatalf("run = %+v, %v; decide: %v; wait = %+v, %v; want a pause, then the answer", run.res, run.err, decide.err, wait.res, wait.err)
	}
	// The key is the service's: its thread and turn, as the turn reports
	// them (the workflow's id is the Runner's thread).
	p := journaldriver.Key{Backend: "coretest", Thread: run.res.Thread, Turn: run.res.ServiceTurn, Call: "call_refund"}
	if p.Thread == "" || p.Thread == testWorkflowID || p.Turn == "" {
		t.Fatalf("the paused turn is on the service's thread %q, turn %q; want the service's", p.Thread, p.Turn)
	}
	var args map[string]any
	if err := json.Unmarshal(run.res.Pending[0].Arguments, &args); err != nil || args["order"] != "A1" || args["amount"] != 500.0 {
		t.Fatalf("the paused turn's pending arguments %s (%v), want the refund's", run.res.Pending[0].Arguments, err)
	}
	want := approvalSeen{Key: p, Tool: "refund", Why: "over 100", Arguments: string(run.res.Pending[0].Arguments), Wait: time.Hour}
	for _, c := range []struct {
		name string
		s    seen
		want []approvalSeen
	}{
		{"awaiting", asked, []approvalSeen{want}},
		{"decided", decided, []approvalSeen{{Key: p, Tool: "refund", Why: "over 100", Arguments: want.Arguments, Wait: time.Hour, Decided: true, Approved: true, Actor: "ann"}}},
		{"the turn ended", ended, []approvalSeen{{Key: p, Tool: "refund", Why: "over 100", Arguments: want.Arguments, Wait: time.Hour, Decided: true, Approved: true, Actor: "ann"}}},
	} {
		if c.s.err != nil {
			t.Errorf("%s: Approvals: %v", c.name, c.s.err)
			continue
		}
		if diff := cmp.Diff(c.want, c.s.list); diff != "" {
			t.Errorf("%s: Approvals (-want +got):\n%s", c.name, diff)
		}
	}
	if errcode.Of(other.err) != errcode.NotFound || len(other.list) != 0 {
		t.Errorf("Approvals of a thread no workflow has = %+v, %v (code %v); want NotFound", other.list, other.err, errcode.Of(other.err))
	}
}

// TestCancelPaused: the cancel signal ends a turn paused on a call
// awaiting a decision, as core's Runner.Cancel abandons it: the turn ends
// Canceled (matching context.Canceled), the service's turn is canceled
// without the results of the step's calls, the undecided call never runs,
// and the thread takes the next turn's input.
func TestCancelPaused(t *testing.T) {
	script := refundScript("500")
	script.Turns = append(script.Turns, coretest.Turn{Steps: []coretest.Step{{Text: "fresh start"}}})
	e := newEnv(t, script, LoopOptions{ApprovalTimeout: time.Hour})
	var run, wait, next outcome
	e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
	e.te.RegisterDelayedCallback(func() { e.te.SignalWorkflow(SignalCancel, nil) }, 2*time.Second)
	e.update(3*time.Second, UpdateWait, &wait)
	e.update(4*time.Second, UpdateRun, &next, runRequest{Input: "start again"})
	e.run()
	if run.err != nil || run.res.Done || len(run.res.Pending) != 1 {
		t.Fatalf("run = %+v, %v; want a pause on the refund", run.res, run.err)
	}
	if wait.err != nil || !wait.res.Done || wait.res.Err == nil {
		t.Fatalf("wait after the cancel = %+v, %v; want the turn ended with an error", wait.res, wait.err)
	}
	if err := wait.res.Err.Err(); errcode.Of(err) != errcode.Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("turn error %v (code %v), want Canceled matching context.Canceled", err, errcode.Of(err))
	}
	var kinds []string
	for _, r := range e.backend.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "cancel", "input"}, kinds); diff != "" {
		t.Errorf("the service received (-want +got):\n%s", diff)
	}
	if n := e.refunds.Load(); n != 0 {
		t.Errorf("the undecided refund ran %d times, want 0", n)
	}
	if next.err != nil || next.res.Err != nil || next.res.Text != "fresh start" {
		t.Errorf("the next turn = %+v, %v; want its answer", next.res, next.err)
	}
}

// keeper is the coretest backend as a driver.Keeper, recording the threads
// it is asked to keep and those it is asked to resume.
type keeper struct {
	*coretest.Backend
	mu      sync.Mutex
	kept    []string
	resumed []string
}

func (k *keeper) KeepThread(thread string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, thread)
}

func (k *keeper) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	k.mu.Lock()
	k.resumed = append(k.resumed, thread)
	k.mu.Unlock()
	return k.Backend.Resume(ctx, thread)
}

// TestPauseKeepsThread: a step whose calls await a decision asks the
// worker's backend to keep the thread (driver.Keeper), as core's Runner
// does when a run pauses, and a step without one does not; the submit
// after the pause reads the thread first (a resume: the backend takes
// over what another process made) only on a worker other than the one
// whose step paused. The results go once either way.
func TestPauseKeepsThread(t *testing.T) {
	for _, c := range []struct {
		name        string
		amount      string // the refund's: over 100 needs a decision
		start, sub  string // the worker ids of the Start and Submit activities
		wantKept    []string
		wantResumed []string
	}{
		{"no pause", "50", "w1", "w1", nil, nil},
		{"pause, same worker", "500", "w1", "w1", []string{"thread_1"}, nil},
		{"pause, another worker", "500", "w1", "w2", []string{"thread_1"}, []string{"thread_1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var k *keeper
			e := newEnvOn(t, refundScript(c.amount), func(b *coretest.Backend) driver.Backend { k = &keeper{Backend: b}; return k }, LoopOptions{})
			start := &activities{r: e.runner, hooks: e.runner.Hooks(), id: c.start}
			sub := &activities{r: e.runner, hooks: e.runner.Hooks(), id: c.sub}
			e.te.RegisterActivityWithOptions(start.Start, activity.RegisterOptions{Name: activityStart, DisableAlreadyRegisteredCheck: true})
			e.te.RegisterActivityWithOptions(sub.Submit, activity.RegisterOptions{Name: activitySubmit, DisableAlreadyRegisteredCheck: true})
			var run, decide, wait outcome
			e.update(time.Second, UpdateRun, &run, runRequest{Input: "refund A1"})
			e.update(2*time.Second, UpdateDecide, &decide, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann"}})
			e.update(3*time.Second, UpdateWait, &wait)
			e.run()
			if wait.err != nil || !wait.res.Done || wait.res.Text != "refunded A1" {
				t.Fatalf("wait = %+v, %v; want the refund's answer", wait.res, wait.err)
			}
			if diff := cmp.Diff(c.wantKept, k.kept); diff != "" {
				t.Errorf("threads kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantResumed, k.resumed); diff != "" {
				t.Errorf("threads read before the submit (-want +got):\n%s", diff)
			}
			var kinds []string
			for _, r := range e.backend.Received() {
				kinds = append(kinds, r.Kind)
			}
			if diff := cmp.Diff([]string{"input", "results"}, kinds); diff != "" {
				t.Errorf("the service received (-want +got):\n%s", diff)
			}
		})
	}
}

// failingClient answers each query with the next of its errors, then
// with NotFound, counting the queries.
type failingClient struct {
	client.Client
	errs  []error
	asked int
}

func (c *failingClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	c.asked++
	if c.asked <= len(c.errs) {
		return nil, c.errs[c.asked-1]
	}
	return nil, serviceerror.NewNotFound("workflow not found")
}

// TestApprovalsAskedAgain: Runner.Approvals asks again a query that the
// server canceled (not the caller: as when the worker that ran the
// workflow has just stopped and another takes it over) or that no worker
// answered in time, at most maxQueries times; it does not ask again one
// the caller canceled, or a refusal.
func TestApprovalsAskedAgain(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	var always []error
	for range maxQueries + 5 {
		always = append(always, serviceerror.NewCanceled("context canceled"))
	}
	for _, c := range []struct {
		name  string
		ctx   context.Context
		errs  []error
		asked int
		code  errcode.Code
	}{
		{"found nowhere", context.Background(), nil, 1, errcode.NotFound},
		{"canceled by the server twice", context.Background(), []error{serviceerror.NewCanceled("context canceled"), serviceerror.NewCanceled("context canceled")}, 3, errcode.NotFound},
		{"unanswered in time", context.Background(), []error{serviceerror.NewDeadlineExceeded("context deadline exceeded")}, 2, errcode.NotFound},
		{"canceled by the server always", context.Background(), always, maxQueries, errcode.Unknown},
		{"canceled by the caller", canceled, []error{context.Canceled}, 1, errcode.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := &failingClient{errs: c.errs}
			_, err := NewRunner(fc, nil).Approvals(c.ctx, "thread")
			if fc.asked != c.asked || errcode.Of(err) != c.code {
				t.Errorf("Approvals asked %d times, error %v (code %v); want %d times, code %v", fc.asked, err, errcode.Of(err), c.asked, c.code)
			}
		})
	}
}
