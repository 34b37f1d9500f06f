package temporal

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolrelay/toolrelay/core"
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
	e := newEnv(t, refundScript("500"), Settings{ApprovalTimeout: time.Hour})
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
