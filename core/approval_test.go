package core_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // postgres: journals
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite: journals
)

type refundArgs struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// approvalEnv is a runner whose refund tool needs approval over 100, and
// whose lookup tool needs none, with counts of their runs.
type approvalEnv struct {
	runner  *core.Runner
	backend *coretest.Backend
	journal *journaldriver.Memory
	refunds atomic.Int32
	amounts chan int
	lookups atomic.Int32
}

func newApprovalEnv(t *testing.T, script *coretest.Script, opts *core.Options) *approvalEnv {
	t.Helper()
	e := &approvalEnv{journal: journaldriver.NewMemory(), amounts: make(chan int, 10)}
	refund := mustTool(t)(core.NewTool("refund", "Refund an order.", func(_ context.Context, in refundArgs) (string, error) {
		e.refunds.Add(1)
		e.amounts <- in.Amount
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) {
		return in.Amount > 100, "refunds over 100 need a person's approval"
	})}))
	lookup := mustTool(t)(core.NewTool("lookup", "Look up an order.", func(context.Context, struct{}) (string, error) {
		e.lookups.Add(1)
		return "order 7: 150", nil
	}, nil))
	tools, err := core.NewToolbox(refund, lookup)
	if err != nil {
		t.Fatal(err)
	}
	e.backend = coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})
	o := core.Options{Logger: quiet, Journal: e.journal}
	if opts != nil {
		o.ApprovalTimeout, o.Hooks, o.MaxOutputBytes, o.MaxArgumentBytes = opts.ApprovalTimeout, opts.Hooks, opts.MaxOutputBytes, opts.MaxArgumentBytes
	}
	e.runner = core.NewRunner(e.backend, tools, &o)
	t.Cleanup(func() { e.runner.Close() })
	return e
}

// refundScript: the model refunds order 7 (amount 150) and looks it up in
// one step, then answers with both outputs.
func refundScript(amount string) *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: []byte(`{"order":"7","amount":` + amount + `}`)}, {Name: "lookup", Arguments: []byte(`{}`)}}},
		{Text: `{{output "refund"}} / {{output "lookup"}}`},
	}}}}
}

// TestApprove: the run pauses on the call that needs approval after
// running the other, a resume before the decision changes nothing, and
// after the approval the call runs once and the step's results go
// together, in call order.
func TestApprove(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	res, err := e.runner.Run(t.Context(), "refund order 7", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || errcode.Of(err) != errcode.FailedPrecondition {
		t.Fatalf("Run = %v, want ErrAwaitingApproval (FailedPrecondition)", err)
	}
	if len(res.Pending) != 1 || res.Pending[0].Tool != "refund" || res.Pending[0].Why != "refunds over 100 need a person's approval" ||
		string(res.Pending[0].Arguments) != `{"amount":150,"order":"7"}` || res.Pending[0].Decision != nil {
		t.Fatalf("Pending = %+v, want the refund call, undecided, with its reason", res.Pending)
	}
	if e.refunds.Load() != 0 || e.lookups.Load() != 1 || len(results(e.backend.Received())) != 0 {
		t.Fatalf("refunds %d, lookups %d, results sent %d; want 0, 1, 0", e.refunds.Load(), e.lookups.Load(), len(results(e.backend.Received())))
	}
	// A resume before the decision is refused and changes nothing.
	if _, err := e.runner.Resume(t.Context(), res.Thread, nil); !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("Resume before the decision = %v, want ErrAwaitingApproval", err)
	}
	if e.refunds.Load() != 0 || e.lookups.Load() != 1 || len(results(e.backend.Received())) != 0 {
		t.Fatalf("after the refused resume: refunds %d, lookups %d, results %d", e.refunds.Load(), e.lookups.Load(), len(results(e.backend.Received())))
	}
	call := res.Pending[0].Key.Call
	if err := e.runner.Decide(t.Context(), res.Thread, "call_unknown", core.Decision{Approved: true}); errcode.Of(err) != errcode.NotFound {
		t.Errorf("Decide of an unknown call = %v, want NotFound", err)
	}
	if err := e.runner.Decide(t.Context(), res.Thread, call, core.Decision{Approved: true, Actor: "ada", Reason: "customer is right"}); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Decide(t.Context(), res.Thread, call, core.Decision{Approved: false}); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("a second decision = %v, want FailedPrecondition", err)
	}
	res, err = e.runner.Resume(t.Context(), res.Thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "refunded / order 7: 150" || e.refunds.Load() != 1 || e.lookups.Load() != 1 {
		t.Errorf("answer %q, refunds %d, lookups %d; want both outputs, each tool run once", res.Text, e.refunds.Load(), e.lookups.Load())
	}
	var got []string
	for _, d := range results(e.backend.Received()) {
		got = append(got, d.Name)
	}
	if diff := cmp.Diff([]string{"refund", "lookup"}, got); diff != "" {
		t.Errorf("results sent (-want +got):\n%s", diff)
	}
	list, err := e.runner.Approvals(t.Context(), res.Thread)
	if err != nil || len(list) != 1 || list[0].Decision == nil || list[0].Decision.Actor != "ada" || !list[0].Decision.Approved || list[0].Decision.At.IsZero() {
		t.Errorf("Approvals = %+v, %v; want the decision with its actor and time", list, err)
	}
}

// TestDeny: a denied call runs nothing; the model reads the denial and its
// reason, flagged failed.
func TestDeny(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	res, _ := e.runner.Run(t.Context(), "refund order 7", nil)
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Reason: "over the limit", Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.runner.Resume(t.Context(), res.Thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := results(e.backend.Received())[0]
	if !d.Failed || !strings.Contains(d.Error, "a person denied this call: over the limit") || e.refunds.Load() != 0 {
		t.Errorf("result %+v (refunds %d), want a failed result stating the denial and its reason, and no refund", d, e.refunds.Load())
	}
	if res.Calls[0].Outcome != core.Denied {
		t.Errorf("outcome %v, want denied", res.Calls[0].Outcome)
	}
}

// TestApproveEdited: an approval may edit the arguments the handler gets;
// a call under the threshold needs none.
func TestApproveEdited(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	res, _ := e.runner.Run(t.Context(), "refund", nil)
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Arguments: []byte(`{"order":"7","amount":{`)}); errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("Decide with edited arguments that are not JSON = %v, want InvalidArgument", err)
	}
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Arguments: []byte(`{"order":"7","amount":90}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runner.Resume(t.Context(), res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	if got := <-e.amounts; got != 90 {
		t.Errorf("the handler got amount %d, want the edited 90", got)
	}

	small := newApprovalEnv(t, refundScript("20"), nil)
	if _, err := small.runner.Run(t.Context(), "refund", nil); err != nil || small.refunds.Load() != 1 {
		t.Errorf("a refund of 20: %v, refunds %d; want it run without approval", err, small.refunds.Load())
	}
}

// TestApprovalExpires: a call undecided past its time is denied ("no
// decision in time") at the next resume, and can no longer be decided.
func TestApprovalExpires(t *testing.T) {
	const timeout = 300 * time.Millisecond // a run under -race takes far less
	e := newApprovalEnv(t, refundScript("150"), &core.Options{ApprovalTimeout: timeout})
	res, err := e.runner.Run(t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("Run = %v (%d pending), want a pause on the refund", err, len(res.Pending))
	}
	time.Sleep(time.Until(res.Pending[0].Expires) + time.Millisecond)
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("Decide after the time = %v, want FailedPrecondition", err)
	}
	if _, err := e.runner.Resume(t.Context(), res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	if d := results(e.backend.Received())[0]; !d.Failed || !strings.Contains(d.Error, "no decision in time") || e.refunds.Load() != 0 {
		t.Errorf("result %+v, want the call denied for want of a decision", d)
	}
}

// TestApprovalOtherRunner: a second runner sharing the journal (as another
// process would) decides and resumes the paused run.
func TestApprovalOtherRunner(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	res, _ := e.runner.Run(t.Context(), "refund", nil)
	other := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: e.journal})
	list, err := other.Approvals(t.Context(), res.Thread)
	if err != nil || len(list) != 1 {
		t.Fatalf("Approvals from the other runner = %+v, %v", list, err)
	}
	if err := other.Decide(t.Context(), res.Thread, list[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if res, err = other.Resume(t.Context(), res.Thread, nil); err != nil || res.Text != "refunded / order 7: 150" {
		t.Fatalf("Resume on the other runner = %+v, %v", res, err)
	}
	if e.refunds.Load() != 1 || e.lookups.Load() != 1 {
		t.Errorf("refunds %d, lookups %d; want each once", e.refunds.Load(), e.lookups.Load())
	}
}

// noApprovals is a journal that keeps no approvals.
type noApprovals struct{ journaldriver.Journal }

// TestApprovalNeedsJournal: a tool that needs approval on a journal that
// keeps none fails the run with FailedPrecondition, without running it.
func TestApprovalNeedsJournal(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	r := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: noApprovals{journaldriver.NewMemory()}})
	defer r.Close()
	_, err := r.Run(t.Context(), "refund", nil)
	if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "keeps no approvals") || e.refunds.Load() != 0 {
		t.Errorf("Run = %v (refunds %d), want FailedPrecondition saying the journal keeps no approvals", err, e.refunds.Load())
	}
}

// TestApprovalDurable: a run paused for approval in one process is decided
// and resumed in another, sharing a durable journal: here a second runner
// over a journal opened anew on the same SQLite file, or PostgreSQL table,
// after the first was closed.
func TestApprovalDurable(t *testing.T) {
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "journal.db")}
	if u := os.Getenv("TOOLRELAY_TEST_POSTGRES"); u != "" {
		urls["postgres"] = pgtest.FreshTable(t, u, "approvals")
	} else {
		t.Log("TOOLRELAY_TEST_POSTGRES is not set: PostgreSQL is not tried")
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			e := newApprovalEnv(t, refundScript("150"), nil)
			first, err := journal.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			r1 := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: first})
			res, err := r1.Run(t.Context(), "refund", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
			}
			first.Close()

			second, err := journal.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			r2 := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: second})
			list, err := r2.Approvals(t.Context(), res.Thread)
			if err != nil || len(list) != 1 || list[0].Decision != nil {
				t.Fatalf("Approvals in the second process = %+v, %v; want the pending refund", list, err)
			}
			if err := r2.Decide(t.Context(), res.Thread, list[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
				t.Fatal(err)
			}
			if res, err = r2.Resume(t.Context(), res.Thread, nil); err != nil || res.Text != "refunded / order 7: 150" {
				t.Fatalf("Resume in the second process = %+v, %v", res, err)
			}
			if e.refunds.Load() != 1 || e.lookups.Load() != 1 {
				t.Errorf("refunds %d, lookups %d; want each once (the lookup's result kept in the journal)", e.refunds.Load(), e.lookups.Load())
			}
		})
	}
}

// TestApprovalStream: a streamed run that pauses reports the approval
// requested, and its events end without an error; Result reports the
// pause, once (ErrAwaitingApproval); the resume, streamed too, reports the
// approved call run and the answer.
func TestApprovalStream(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	var kinds []string
	st := e.runner.Stream(t.Context(), "refund", nil)
	var (
		last error
		errs int
	)
	for ev, err := range st.Events() {
		kinds = append(kinds, ev.Kind.String())
		if err != nil {
			last = err
			errs++
		}
	}
	res, err := st.Result()
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("stream ended with %v, %d pending; want ErrAwaitingApproval and the refund", err, len(res.Pending))
	}
	if errs != 0 {
		t.Errorf("the events yielded %d errors (the last %v); want none: a pause is reported once, by Result", errs, last)
	}
	if !slices.Contains(kinds, "approval_requested") || kinds[len(kinds)-1] != "run_finished" {
		t.Errorf("events %v: want approval_requested, and run_finished last", kinds)
	}
	if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	st = e.runner.ResumeStream(t.Context(), res.Thread, nil)
	for piece := range st.Text() {
		text.WriteString(piece)
	}
	if _, err := st.Result(); err != nil || text.String() != "refunded / order 7: 150" || e.refunds.Load() != 1 {
		t.Errorf("resumed stream: %q, %v, refunds %d; want the answer and one refund", text.String(), err, e.refunds.Load())
	}
}

// TestPruneDuringApproval (issue 30, item 1): a step whose lookup ran (its
// result journaled, not sent) pauses for the refund's approval; the
// journal is pruned past every age while the run waits, before and after
// the decision. The resume must send the lookup's kept result (not run it
// again) and run the approved refund, on every store.
func TestPruneDuringApproval(t *testing.T) {
	stores := map[string]func(t *testing.T) journaldriver.Journal{
		"memory": func(*testing.T) journaldriver.Journal { return journaldriver.NewMemory() },
		"sqlite": func(t *testing.T) journaldriver.Journal {
			return openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "journal.db"))
		},
	}
	if u := os.Getenv("TOOLRELAY_TEST_POSTGRES"); u != "" {
		stores["postgres"] = func(t *testing.T) journaldriver.Journal { return openStore(t, pgtest.FreshTable(t, u, "prune")) }
	} else {
		t.Log("TOOLRELAY_TEST_POSTGRES is not set: PostgreSQL is not tried")
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			e := newApprovalEnv(t, refundScript("150"), nil)
			j := open(t)
			r := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: j})
			defer r.Close()
			res, err := r.Run(t.Context(), "refund", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
			}
			prune := func(when string) {
				if _, err := j.Prune(t.Context(), time.Now().Add(time.Hour)); err != nil {
					t.Fatalf("Prune %s: %v", when, err)
				}
			}
			prune("while the approval is pending")
			if err := r.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
				t.Fatal(err)
			}
			prune("once the call is decided, before the resume")
			if res, err = r.Resume(t.Context(), res.Thread, nil); err != nil || res.Text != "refunded / order 7: 150" {
				t.Fatalf("Resume = %+v, %v; want the answer", res, err)
			}
			if e.refunds.Load() != 1 || e.lookups.Load() != 1 {
				t.Errorf("refunds %d, lookups %d; want each once (the lookup's unsent result and the decision kept through the prunes)", e.refunds.Load(), e.lookups.Load())
			}
		})
	}
}

// openStore opens the journal at u for the test.
func openStore(t *testing.T, u string) journaldriver.Journal {
	t.Helper()
	j, err := journal.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// TestDecideValidatesEdits: Decide refuses edited arguments that the
// tool's schema or the runner's limits refuse (InvalidArgument), records
// nothing, and a valid decision is taken after.
func TestDecideValidatesEdits(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string // in the error
	}{
		{"not JSON", `{"order":"7","amount":{`, "not valid JSON"},
		{"wrong type", `{"order":7,"amount":90}`, "order: "},
		{"missing field", `{"order":"7"}`, `"amount"`},
		{"extra property", `{"order":"7","amount":90,"note":"x"}`, "note"},
		{"null", `null`, "a JSON object"},
		{"a JSON string", `"{\"order\":\"7\",\"amount\":90}"`, "a JSON object"},
		{"array", `[1]`, "a JSON object"},
		{"number out of range", `{"order":"7","amount":1e400}`, "amount: number 1e400 is out of range"},
		{"past the argument limit", `{"order":"7","amount":90,"pad":"` + strings.Repeat("x", 200) + `"}`, "too large (234 bytes; the limit is 200)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newApprovalEnv(t, refundScript("150"), &core.Options{MaxArgumentBytes: 200})
			res, err := e.runner.Run(t.Context(), "refund", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want a pause", err)
			}
			call := res.Pending[0].Key.Call
			err = e.runner.Decide(t.Context(), res.Thread, call, core.Decision{Approved: true, Arguments: []byte(tt.args)})
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decide = %v, want InvalidArgument saying %q", err, tt.want)
			}
			list, err := e.runner.Approvals(t.Context(), res.Thread)
			if err != nil || len(list) != 1 || list[0].Decision != nil {
				t.Fatalf("Approvals = %+v, %v; want the call still undecided", list, err)
			}
			if err := e.runner.Decide(t.Context(), res.Thread, call, core.Decision{Approved: true, Arguments: []byte(`{"order":"7","amount":90}`)}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.runner.Resume(t.Context(), res.Thread, nil); err != nil {
				t.Fatal(err)
			}
			if got := <-e.amounts; got != 90 {
				t.Errorf("the handler got amount %d, want the edited 90", got)
			}
		})
	}
	t.Run("reason past the output limit", func(t *testing.T) {
		e := newApprovalEnv(t, refundScript("150"), &core.Options{MaxOutputBytes: 100})
		res, _ := e.runner.Run(t.Context(), "refund", nil)
		err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Reason: strings.Repeat("r", 101)})
		if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "reason too large (101 bytes; the limit is 100)") {
			t.Errorf("Decide = %v, want InvalidArgument saying the reason is too large", err)
		}
	})
}

// diesAfterDecision is the journal of a worker that stops right after it
// recorded a decision: every read of the approvals after the decision
// fails.
type diesAfterDecision struct {
	*journaldriver.Memory
	decided atomic.Bool
}

func (j *diesAfterDecision) DecideApproval(ctx context.Context, key journaldriver.Key, d journaldriver.Decision) (journaldriver.Approval, error) {
	a, err := j.Memory.DecideApproval(ctx, key, d)
	j.decided.Store(true)
	return a, err
}

func (j *diesAfterDecision) ListApprovals(ctx context.Context, backend, thread string) ([]journaldriver.Approval, error) {
	if j.decided.Load() {
		return nil, errors.New("the worker stopped")
	}
	return j.Memory.ListApprovals(ctx, backend, thread)
}

// TestDecidedRunTakenOver (issue 30, item 2): the worker that decides the
// last pending call of a paused run stops before it resumes the run (it
// never calls Resume, or it dies right after recording the decision):
// another worker's TakeOver finds the run (at once once the decider let
// it go, else once the decider's lease passed) and finishes it, each call
// run once.
func TestDecidedRunTakenOver(t *testing.T) {
	for _, how := range []string{"never resumes", "dies after the decision"} {
		t.Run(how, func(t *testing.T) {
			e := newApprovalEnv(t, refundScript("150"), nil)
			res, err := e.runner.Run(t.Context(), "refund", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
			}
			const lease = 100 * time.Millisecond
			var dj journaldriver.Journal = e.journal
			if how == "dies after the decision" {
				dj = &diesAfterDecision{Memory: e.journal}
			}
			decider := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: dj, Owner: "decider", Lease: lease})
			err = decider.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "ops"})
			if how == "never resumes" && err != nil {
				t.Fatal(err)
			}
			decider.Close()
			taker := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: e.journal, Owner: "taker", Lease: time.Minute})
			defer taker.Close()
			var got []*core.Result
			for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if got, err = taker.TakeOver(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != 1 || got[0].Text != "refunded / order 7: 150" {
				t.Fatalf("TakeOver = %+v, want the decided run finished", got)
			}
			if e.refunds.Load() != 1 || e.lookups.Load() != 1 {
				t.Errorf("refunds %d, lookups %d; want each once", e.refunds.Load(), e.lookups.Load())
			}
		})
	}
}

// TestApprovalAlways: ApprovalAlways asks for every call, with its reason,
// and Always, its deprecated name, is the same rule.
func TestApprovalAlways(t *testing.T) {
	for name, rule := range map[string]core.ApprovalRule{"ApprovalAlways": core.ApprovalAlways("every refund"), "Always": core.Always("every refund")} {
		need, why, err := rule(context.Background(), core.Call{Name: "refund"}, nil)
		if !need || why != "every refund" || err != nil {
			t.Errorf("%s: need %v, why %q, err %v; want true, \"every refund\", nil", name, need, why, err)
		}
	}
}

// TestDecideOtherThread: deciding, on one thread, the id of a call that
// awaits approval on another thread is refused (NotFound), and decides
// nothing on either.
func TestDecideOtherThread(t *testing.T) {
	e := newApprovalEnv(t, refundScript("150"), nil)
	var runs []*core.Result
	for range 2 {
		res, err := e.runner.Run(t.Context(), "refund order 7", nil)
		if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
			t.Fatalf("Run = %+v, %v; want one call awaiting approval", res, err)
		}
		runs = append(runs, res)
	}
	a, b := runs[0], runs[1]
	if a.Thread == b.Thread || a.Pending[0].Key.Call == b.Pending[0].Key.Call {
		t.Fatalf("threads %s and %s, calls %s and %s: want two of each", a.Thread, b.Thread, a.Pending[0].Key.Call, b.Pending[0].Key.Call)
	}
	if err := e.runner.Decide(t.Context(), a.Thread, b.Pending[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); errcode.Of(err) != errcode.NotFound {
		t.Errorf("Decide of another thread's call = %v, want NotFound", err)
	}
	for _, res := range runs {
		list, err := e.runner.Approvals(t.Context(), res.Thread)
		if err != nil {
			t.Fatal(err)
		}
		for _, ap := range list {
			if ap.Decision != nil {
				t.Errorf("thread %s: call %s decided: %+v", res.Thread, ap.Key.Call, ap.Decision)
			}
		}
	}
	if _, err := e.runner.Resume(t.Context(), b.Thread, nil); !errors.Is(err, core.ErrAwaitingApproval) {
		t.Errorf("Resume of the other thread = %v, want it still awaiting approval", err)
	}
	if n := e.refunds.Load(); n != 0 {
		t.Errorf("refunded %d times, want none", n)
	}
}
