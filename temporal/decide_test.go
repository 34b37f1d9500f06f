package temporal

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestDecisionAfterItsTime: a decision that arrives once the approval's
// time passed, before its timer fired (here the timer is not even set:
// the workflow's clock stands at the approval's expiry), is refused by the
// decide update as core's Decide refuses it (FailedPrecondition, the time
// to decide passed) and records nothing; one in time is recorded. The
// approval expires a minute after the workflow starts, moved by expiry;
// the decision arrives at that minute.
func TestDecisionAfterItsTime(t *testing.T) {
	for _, c := range []struct {
		name   string
		expiry time.Duration // the approval's expiry past the decision's arrival
		want   errcode.Code  // 0: recorded
	}{
		{"at its time", 0, errcode.FailedPrecondition},
		{"past its time", -time.Second, errcode.FailedPrecondition},
		{"in time", time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, weather(), LoopOptions{})
			var recorded *core.Decision
			e.te.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				th := &thread{set: LoopOptions{}.withDefaults(), turn: &turn{}}
				if err := th.register(ctx); err != nil {
					return err
				}
				now := workflow.Now(ctx)
				a := &core.Approval{Tool: "refund", Requested: now, Expires: now.Add(time.Minute + c.expiry)}
				a.Key.Call = "call_refund"
				th.turn.pending = []*core.Approval{a}
				if _, err := workflow.AwaitWithTimeout(ctx, 2*time.Minute, func() bool { return a.Decision != nil }); err != nil {
					return err
				}
				recorded = a.Decision
				return nil
			}, workflow.RegisterOptions{Name: "decideAt"})
			var late outcome
			e.update(time.Minute, UpdateDecide, &late, decideRequest{CallID: "call_refund", Decision: core.Decision{Approved: true, Actor: "ann"}})
			e.te.ExecuteWorkflow("decideAt")
			if err := e.te.GetWorkflowError(); err != nil {
				t.Fatalf("workflow: %v", err)
			}
			err := clientError("decide", late.err)
			if c.want == 0 {
				if err != nil || recorded == nil || !recorded.Approved {
					t.Fatalf("decision in time: error %v, recorded %+v; want it recorded", err, recorded)
				}
				return
			}
			if err == nil || errcode.Of(err) != c.want || !strings.Contains(err.Error(), "the time to decide passed") {
				t.Errorf("late decision: error %v (code %v), want %v: the time to decide passed", err, errcode.Of(err), c.want)
			}
			if recorded != nil {
				t.Errorf("late decision recorded: %+v", recorded)
			}
		})
	}
}
