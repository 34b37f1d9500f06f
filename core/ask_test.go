package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// askEnv is a runner whose tool transfer asks two questions (Ask) before
// it transfers, answering with the decisions it got, in order.
type askEnv struct {
	runner    *core.Runner
	backend   *coretest.Backend
	runs      atomic.Int32 // the handler's runs
	transfers atomic.Int32 // the runs that got every decision
	mu        sync.Mutex
	asked     []core.Event // the approval requested events
	askErr    error        // Ask's last error
}

// askQuestions are the questions transfer asks, in order.
var askQuestions = []core.Question{
	{ID: "amount", Tool: "transfer_amount", Arguments: json.RawMessage(`{"amount":500}`), Why: "over 100"},
	{ID: "payee", Why: "a new payee"},
}

func newAskEnv(t *testing.T, opts *core.Options) *askEnv {
	t.Helper()
	e := &askEnv{}
	transfer := mustTool(t)(core.NewTool("transfer", "Transfer money.", func(ctx context.Context, _ struct{}) (string, error) {
		e.runs.Add(1)
		ds, err := core.Ask(ctx, askQuestions...)
		e.mu.Lock()
		e.askErr = err
		e.mu.Unlock()
		if err != nil {
			return "", fmt.Errorf("transfer: %w", err)
		}
		e.transfers.Add(1)
		var out []string
		for _, d := range ds {
			out = append(out, fmt.Sprintf("%t(%s)", d.Approved, d.Reason))
		}
		return strings.Join(out, " "), nil
	}, nil))
	var o core.Options
	if opts != nil {
		o = *opts
	}
	o.OnEvent = func(ev core.Event) {
		if ev.Kind == core.EventApprovalRequested {
			e.mu.Lock()
			e.asked = append(e.asked, ev)
			e.mu.Unlock()
		}
	}
	e.runner, e.backend = newRunner(t, coretest.Simple("transfer", `{}`, `done: {{output "transfer"}}`), []*core.Tool{transfer}, &o)
	return e
}

// pendingView is what a test compares of an approval.
type pendingView struct {
	Call, Tool, Arguments, Why string
	Decided                    bool
}

func viewApprovals(list []core.Approval) []pendingView {
	var out []pendingView
	for _, a := range list {
		out = append(out, pendingView{Call: a.Key.Call, Tool: a.Tool, Arguments: string(a.Arguments), Why: a.Why, Decided: a.Decision != nil})
	}
	return out
}

// TestAsk: a handler's questions pause the run (ErrAwaitingApproval), are
// the run's approvals, listed and decided as a call's are (edits
// refused), and the resumed call gets the decisions, in the order asked.
func TestAsk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		decisions map[string]core.Decision // by question
		wantText  string
	}{
		{
			name:      "approved",
			decisions: map[string]core.Decision{"amount": {Approved: true}, "payee": {Approved: true, Reason: "known"}},
			wantText:  "done: true() true(known)",
		},
		{
			name:      "one denied",
			decisions: map[string]core.Decision{"payee": {Reason: "unknown payee"}, "amount": {Approved: true}},
			wantText:  "done: true() false(unknown payee)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAskEnv(t, nil)
			res, err := e.runner.Run(t.Context(), "pay", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) || errcode.Of(err) != errcode.FailedPrecondition {
				t.Fatalf("Run error = %v, want ErrAwaitingApproval (FailedPrecondition)", err)
			}
			if !errors.Is(e.askErr, core.ErrAwaitingApproval) || errcode.Of(e.askErr) != errcode.FailedPrecondition {
				t.Errorf("Ask's error = %v, want ErrAwaitingApproval (FailedPrecondition)", e.askErr)
			}
			want := []pendingView{
				{Call: "call_1/amount", Tool: "transfer_amount", Arguments: `{"amount":500}`, Why: "over 100"},
				{Call: "call_1/payee", Tool: "transfer", Why: "a new payee"},
			}
			if diff := cmp.Diff(want, viewApprovals(res.Pending)); diff != "" {
				t.Fatalf("Pending (-want +got):\n%s", diff)
			}
			list, err := e.runner.Approvals(t.Context(), res.Thread)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, viewApprovals(list)); diff != "" {
				t.Errorf("Approvals (-want +got):\n%s", diff)
			}
			var events []string
			for _, ev := range e.asked {
				events = append(events, fmt.Sprintf("%s %s %s", ev.Call.ID, ev.Call.Name, ev.Text))
			}
			if diff := cmp.Diff([]string{"call_1/amount transfer_amount over 100", "call_1/payee transfer a new payee"}, events); diff != "" {
				t.Errorf("approval requested events (-want +got):\n%s", diff)
			}
			if err := e.runner.Decide(t.Context(), res.Thread, "call_1/amount", core.Decision{Approved: true, Arguments: []byte(`{"amount":1}`)}); errcode.Of(err) != errcode.InvalidArgument {
				t.Errorf("Decide with edited arguments = %v, want InvalidArgument", err)
			}
			if err := e.runner.Decide(t.Context(), res.Thread, "call_1/amount", tc.decisions["amount"]); err != nil {
				t.Fatal(err)
			}
			if _, err := e.runner.Resume(t.Context(), res.Thread, nil); !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Resume with a question undecided = %v, want ErrAwaitingApproval", err)
			}
			if err := e.runner.Decide(t.Context(), res.Thread, "call_1/payee", tc.decisions["payee"]); err != nil {
				t.Fatal(err)
			}
			res, err = e.runner.Resume(t.Context(), res.Thread, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.wantText {
				t.Errorf("Text = %q, want %q", res.Text, tc.wantText)
			}
			if runs, done, asked := e.runs.Load(), e.transfers.Load(), len(e.asked); runs != 2 || done != 1 || asked != 2 {
				t.Errorf("handler runs %d, with decisions %d, approvals requested %d; want 2, 1, 2", runs, done, asked)
			}
		})
	}
}

// TestAskExpired: a question left undecided past its time is decided as
// denied, "no decision in time", when the resumed call asks again.
func TestAskExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAskEnv(t, &core.Options{ApprovalTimeout: time.Minute})
		res, err := e.runner.Run(t.Context(), "pay", nil)
		if !errors.Is(err, core.ErrAwaitingApproval) {
			t.Fatalf("Run error = %v, want ErrAwaitingApproval", err)
		}
		if err := e.runner.Decide(t.Context(), res.Thread, "call_1/amount", core.Decision{Approved: true}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		res, err = e.runner.Resume(t.Context(), res.Thread, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "done: true() false(no decision in time)"; res.Text != want {
			t.Errorf("Text = %q, want %q", res.Text, want)
		}
		list, err := e.runner.Approvals(t.Context(), res.Thread)
		if err != nil || len(list) != 2 || list[1].Decision == nil || list[1].Decision.Actor != "toolrelay" {
			t.Errorf("Approvals = %+v, %v; want the expired question decided by toolrelay", list, err)
		}
	})
}

// TestAskCannot: where no one can be asked (outside a step's call, a call
// of Runner.Call, a journal without approvals), and for questions that
// cannot be asked, Ask fails at once, not pausing anything.
func TestAskCannot(t *testing.T) {
	call := core.Call{Thread: "t", Turn: "u", ID: "c", Name: "transfer", Arguments: []byte(`{}`)}
	for _, tc := range []struct {
		name string
		ask  func(t *testing.T) error
		code errcode.Code
		says string
	}{
		{name: "outside a runner", code: errcode.FailedPrecondition, says: "no one can be asked", ask: func(t *testing.T) error {
			_, err := core.Ask(t.Context(), core.Question{ID: "q"})
			return err
		}},
		{name: "Runner.Call", code: errcode.FailedPrecondition, says: "no one can be asked", ask: func(t *testing.T) error {
			e := newAskEnv(t, nil)
			tr, err := e.runner.Call(t.Context(), &core.CallRequest{Call: call, Step: 1})
			if err != nil || !tr.Failed {
				t.Errorf("Call = %+v, %v; want a failed result", tr, err)
			}
			return e.askErr
		}},
		{name: "journaled Runner.Call", code: errcode.FailedPrecondition, says: "no one can be asked", ask: func(t *testing.T) error {
			e := newAskEnv(t, nil)
			tr, err := e.runner.Call(t.Context(), &core.CallRequest{Call: call, Step: 1, Journaled: true})
			if err != nil || !tr.Failed {
				t.Errorf("Call = %+v, %v; want a failed result", tr, err)
			}
			return e.askErr
		}},
		{name: "journal without approvals", code: errcode.FailedPrecondition, says: "keeps no approvals", ask: func(t *testing.T) error {
			e := newAskEnv(t, &core.Options{Journal: noApprovals{journaldriver.NewMemory()}})
			res, err := e.runner.Run(t.Context(), "pay", nil)
			if err != nil || !strings.HasPrefix(res.Text, "done: tool \"transfer\" failed") {
				t.Errorf("Run = %+v, %v; want the call failed", res, err)
			}
			return e.askErr
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ask(t)
			if errcode.Of(err) != tc.code || errors.Is(err, core.ErrAwaitingApproval) || !strings.Contains(fmt.Sprint(err), tc.says) {
				t.Errorf("Ask = %v, want code %v saying %q, not ErrAwaitingApproval", err, tc.code, tc.says)
			}
		})
	}
}

// TestAskQuestions: questions that cannot be asked are refused
// (InvalidArgument), nothing recorded.
func TestAskQuestions(t *testing.T) {
	for _, tc := range []struct {
		name string
		qs   []core.Question
		says string
	}{
		{name: "none", says: "no question"},
		{name: "no id", qs: []core.Question{{Why: "x"}}, says: "without an ID"},
		{name: "an id twice", qs: []core.Question{{ID: "a"}, {ID: "a"}}, says: `"a" asked twice`},
		{name: "arguments not JSON", qs: []core.Question{{ID: "a", Arguments: []byte(`{`)}}, says: "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var askErr error
			tool := mustTool(t)(core.NewTool("transfer", "Transfer money.", func(ctx context.Context, _ struct{}) (string, error) {
				_, askErr = core.Ask(ctx, tc.qs...)
				return "", askErr
			}, nil))
			r, _ := newRunner(t, coretest.Simple("transfer", `{}`, `done`), []*core.Tool{tool}, nil)
			res, err := r.Run(t.Context(), "pay", nil)
			if err != nil {
				t.Fatal(err)
			}
			if errcode.Of(askErr) != errcode.InvalidArgument || !strings.Contains(fmt.Sprint(askErr), tc.says) {
				t.Errorf("Ask = %v, want InvalidArgument saying %q", askErr, tc.says)
			}
			if list, err := r.Approvals(t.Context(), res.Thread); err != nil || len(list) != 0 {
				t.Errorf("Approvals = %+v, %v; want none", list, err)
			}
		})
	}
}

// TestAskStream: a streamed run's reader gets the approval requested
// events of the questions, whether the call runs alone in its step or
// beside another (whose events go through the step's async view).
func TestAskStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls int
	}{
		{name: "alone", calls: 1},
		{name: "beside another", calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step := coretest.Step{}
			for range tc.calls {
				step.Calls = append(step.Calls, coretest.Call{Name: "transfer", Arguments: []byte(`{}`)})
			}
			script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, {Text: "done"}}}}}
			transfer := mustTool(t)(core.NewTool("transfer", "Transfer money.", func(ctx context.Context, _ struct{}) (string, error) {
				if _, err := core.Ask(ctx, askQuestions...); err != nil {
					return "", err
				}
				return "sent", nil
			}, nil))
			r, _ := newRunner(t, script, []*core.Tool{transfer}, nil)
			st := r.Stream(t.Context(), "pay", nil)
			var asked []string
			for ev := range st.Events() {
				if ev.Kind == core.EventApprovalRequested {
					asked = append(asked, ev.Call.ID)
				}
			}
			res, err := st.Result()
			if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 2*tc.calls {
				t.Fatalf("Result = %+v, %v; want a pause on %d questions", res, err, 2*tc.calls)
			}
			var want []string
			for _, a := range res.Pending {
				want = append(want, a.Key.Call)
			}
			slices.Sort(asked)
			if diff := cmp.Diff(want, asked); diff != "" {
				t.Errorf("approval requested events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAskInChild: a question asked by a handler of an agent tool's child
// pauses the parent too, its approval keyed by the parent's call and the
// child's; the parent's decision reaches the child's handler.
func TestAskInChild(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("150"))
	e.refund = func(ctx context.Context, _ refundArgs) (string, error) {
		ds, err := core.Ask(ctx, core.Question{ID: "sure", Why: "a refund over 100"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("refunded, approved %t", ds[0].Approved), nil
	}
	e.open()
	res, err := e.parent.Run(t.Context(), "go", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("parent's Run = %+v, %v; want one question pending", res, err)
	}
	id := res.Pending[0].Key.Call
	if want := "call_1/call_1/sure"; id != want || res.Pending[0].Why != "a refund over 100" {
		t.Errorf("Pending = %+v, want %s asking about the refund", res.Pending, want)
	}
	if err := e.parent.Decide(t.Context(), res.Thread, id, core.Decision{Approved: true}); err != nil {
		t.Fatal(err)
	}
	if res, err = e.parent.Resume(t.Context(), res.Thread, nil); err != nil {
		t.Fatal(err)
	}
	if want := "parent: child: refunded, approved true"; res.Text != want {
		t.Errorf("Text = %q, want %q", res.Text, want)
	}
	if n := e.refunds.Load(); n != 2 || e.inputs() != 1 {
		t.Errorf("child's handler runs %d, child turns %d; want 2 (asked, then decided) and 1", n, e.inputs())
	}
}

// TestAskDurable: questions kept by a durable journal are listed, decided
// and answered by a second process, after the first was closed; a
// question without arguments included.
func TestAskDurable(t *testing.T) {
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(t.TempDir(), "journal.db")}
	if u := os.Getenv("TOOLRELAY_TEST_POSTGRES"); u != "" {
		urls["postgres"] = pgtest.FreshTable(t, u, "ask")
	} else {
		t.Log("TOOLRELAY_TEST_POSTGRES is not set: PostgreSQL is not tried")
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			first, err := journal.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			e := newAskEnv(t, &core.Options{Journal: first})
			res, err := e.runner.Run(t.Context(), "pay", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 2 {
				t.Fatalf("Run = %+v, %v; want a pause on two questions", res, err)
			}
			e.runner.Close()
			first.Close()

			second, err := journal.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			r2 := core.NewRunner(e.backend, e.runner.Toolbox(), &core.Options{Logger: quiet, Journal: second})
			defer r2.Close()
			list, err := r2.Approvals(t.Context(), res.Thread)
			if err != nil || len(list) != 2 {
				t.Fatalf("Approvals in the second process = %+v, %v; want both questions", list, err)
			}
			for _, a := range list {
				if err := r2.Decide(t.Context(), res.Thread, a.Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
					t.Fatal(err)
				}
			}
			if res, err = r2.Resume(t.Context(), res.Thread, nil); err != nil || res.Text != "done: true() true()" {
				t.Fatalf("Resume in the second process = %+v, %v; want both approved", res, err)
			}
		})
	}
}
