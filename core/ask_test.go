package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
