package a2atools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// parentOf returns a runner on the in-memory backend whose model calls
// tool (its only tool) with message, then answers "parent: " and the
// call's result; its journal is the tool's notes, or not (notes).
func parentOf(t *testing.T, cardURL, message string, notes bool) *core.Runner {
	t.Helper()
	j := journaldriver.NewMemory()
	opts := &a2atools.ToolOptions{PollInterval: 10 * time.Millisecond}
	if notes {
		opts.Notes = j
	}
	tool, err := a2atools.NewTool(t.Context(), cardURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"message": message})
	script := coretest.Simple(tool.Name(), string(args), `parent: {{output "`+tool.Name()+`"}}`)
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	r := core.NewRunner(coretest.NewBackend(script, &coretest.BackendOptions{Name: "parent", Tools: tb}), tb, &core.Options{Logger: quiet, Journal: j})
	t.Cleanup(func() { r.Close() })
	return r
}

// approvalView is what the tests compare of an approval.
type approvalView struct {
	Call, Tool, Arguments, Why string
}

func viewOf(list []core.Approval) []approvalView {
	var out []approvalView
	for _, a := range list {
		out = append(out, approvalView{Call: a.Key.Call, Tool: a.Tool, Arguments: string(a.Arguments), Why: a.Why})
	}
	return out
}

// TestToolAsksServedRunner: a remote agent served by NewHandler whose run
// pauses for approval (its task input-required) pauses the run of the
// tool's call: the parent's approvals list the child's, keyed by the
// parent's call; the parent's decision reaches the child, on the same
// task, when the parent resumes: approved, the child's refund runs once;
// denied, it never runs, and both go on.
func TestToolAsksServedRunner(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noStream    bool
		d           core.Decision
		wantText    string
		wantRefunds int64
	}{
		{name: "approve/stream", d: core.Decision{Approved: true, Actor: "ann"}, wantText: "parent: Done: refunded 7.", wantRefunds: 1},
		{name: "approve/send", noStream: true, d: core.Decision{Approved: true, Actor: "ann"}, wantText: "parent: Done: refunded 7.", wantRefunds: 1},
		{name: "deny", d: core.Decision{Reason: "too much", Actor: "ann"}, wantText: "parent: Done: a person denied this call: too much.", wantRefunds: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := newAgent(t, refundScript)
			j := journaldriver.NewMemory()
			tool, err := a2atools.NewTool(t.Context(), child.URL, &a2atools.ToolOptions{
				Headers: map[string]string{"X-User": "ana"}, NoStream: tc.noStream, Notes: j, PollInterval: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			tb, err := core.NewToolbox(tool)
			if err != nil {
				t.Fatal(err)
			}
			script := coretest.Simple("shop", `{"message": "refund order 7"}`, `parent: {{output "shop"}}`)
			var asked []string
			parent := core.NewRunner(coretest.NewBackend(script, &coretest.BackendOptions{Name: "parent", Tools: tb}), tb, &core.Options{
				Logger: quiet, Journal: j,
				OnEvent: func(ev core.Event) {
					if ev.Kind == core.EventApprovalRequested {
						asked = append(asked, ev.Call.ID)
					}
				},
			})
			t.Cleanup(func() { parent.Close() })

			res, err := parent.Run(t.Context(), "refund order 7", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("parent's Run = %+v, %v; want ErrAwaitingApproval", res, err)
			}
			childPending, err := child.r.Approvals(t.Context(), child.b.Received()[0].Thread)
			if err != nil || len(childPending) != 1 {
				t.Fatalf("child's approvals = %+v, %v; want its refund", childPending, err)
			}
			want := []approvalView{{Call: "call_1/" + childPending[0].Key.Call, Tool: "refund", Arguments: `{"order":"7"}`, Why: "money goes out"}}
			if diff := cmp.Diff(want, viewOf(res.Pending)); diff != "" {
				t.Errorf("parent's Pending (-want +got):\n%s", diff)
			}
			list, err := parent.Approvals(t.Context(), res.Thread)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, viewOf(list)); diff != "" {
				t.Errorf("parent's Approvals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{want[0].Call}, asked); diff != "" {
				t.Errorf("approval requested events (-want +got):\n%s", diff)
			}
			if err := parent.Decide(t.Context(), res.Thread, want[0].Call, tc.d); err != nil {
				t.Fatal(err)
			}
			res, err = parent.Resume(t.Context(), res.Thread, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.wantText {
				t.Errorf("parent's answer = %q, want %q", res.Text, tc.wantText)
			}
			if got := child.refunds.Load(); got != tc.wantRefunds {
				t.Errorf("child's refunds = %d, want %d", got, tc.wantRefunds)
			}
			inputs := 0
			for _, r := range child.b.Received() {
				if r.Kind == "input" {
					inputs++
				}
			}
			if inputs != 1 {
				t.Errorf("child's turns = %d, want 1 (the same task)", inputs)
			}
		})
	}
}

// TestToolAsksAgent: an agent that is not a runner of this package, whose
// task asks a question (input-required), pauses the run with one
// approval, its Why the agent's question; the decision is sent on the
// same task as "approve" or "deny: " and the reason.
func TestToolAsksAgent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		d        core.Decision
		wantText string
	}{
		{name: "approve", d: core.Decision{Approved: true}, wantText: "parent: refunded order approve"},
		{name: "deny", d: core.Decision{Reason: "wrong order"}, wantText: "parent: refunded order deny: wrong order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ra := newRemoteAgent(t, true, nil)
			parent := parentOf(t, ra.URL, "ask", true)
			res, err := parent.Run(t.Context(), "go", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
				t.Fatalf("parent's Run = %+v, %v; want one approval pending", res, err)
			}
			got := viewOf(res.Pending)[0]
			if !strings.HasPrefix(got.Call, "call_1/input") || got.Tool != "Refund Desk" || got.Why != "Which order?" {
				t.Errorf("approval = %+v, want call_1/input…, the agent's name and its question", got)
			}
			if err := parent.Decide(t.Context(), res.Thread, got.Call, tc.d); err != nil {
				t.Fatal(err)
			}
			if res, err = parent.Resume(t.Context(), res.Thread, nil); err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.wantText {
				t.Errorf("parent's answer = %q, want %q", res.Text, tc.wantText)
			}
			if diff := cmp.Diff([]string{"ask", strings.TrimPrefix(tc.wantText, "parent: refunded order ")}, ra.texts()); diff != "" {
				t.Errorf("the agent received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToolAsksNoOne: where no one can be asked — a call of Runner.Call,
// or a tool without notes — an agent's question is a failed call telling
// the model, as before.
func TestToolAsksNoOne(t *testing.T) {
	ra := newRemoteAgent(t, false, nil)
	const want = `needs more input before it goes on: Which order?`
	t.Run("Runner.Call", func(t *testing.T) {
		j := journaldriver.NewMemory()
		tool, err := a2atools.NewTool(t.Context(), ra.URL, &a2atools.ToolOptions{Notes: j, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if out, failed := callTool(t, runnerOf(t, tool, j), "c1", `{"message": "ask"}`, false); !failed || !strings.Contains(out, want) {
			t.Errorf("= %q (failed %v), want the question for the model", out, failed)
		}
	})
	t.Run("no notes", func(t *testing.T) {
		parent := parentOf(t, ra.URL, "ask", false)
		res, err := parent.Run(t.Context(), "go", nil)
		if err != nil || !strings.Contains(res.Text, want) {
			t.Errorf("parent's Run = %+v, %v; want the question for the model", res, err)
		}
	})
}

// TestToolAsksCancel: Runner.Cancel of a run paused on a remote agent's
// task cancels the task (tasks/cancel): a runner served by NewHandler
// abandons its turn, its refund never made.
func TestToolAsksCancel(t *testing.T) {
	child := newAgent(t, refundScript)
	j := journaldriver.NewMemory()
	tool, err := a2atools.NewTool(t.Context(), child.URL, &a2atools.ToolOptions{
		Headers: map[string]string{"X-User": "ana"}, Notes: j, PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	script := coretest.Simple("shop", `{"message": "refund order 7"}`, `parent: {{output "shop"}}`)
	parent := core.NewRunner(coretest.NewBackend(script, &coretest.BackendOptions{Name: "parent", Tools: tb}), tb, &core.Options{Logger: quiet, Journal: j})
	t.Cleanup(func() { parent.Close() })
	res, err := parent.Run(t.Context(), "refund order 7", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("parent's Run = %+v, %v; want ErrAwaitingApproval", res, err)
	}
	if err := parent.Cancel(t.Context(), res.Thread); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range child.b.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "cancel"}, kinds); diff != "" {
		t.Errorf("the child's service received (-want +got):\n%s", diff)
	}
	if n := child.refunds.Load(); n != 0 {
		t.Errorf("child's refunds = %d, want 0", n)
	}
}
