package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

// childSecret is in the child's answer: the page sees it only as the
// output of the parent's call of the agent tool.
const childSecret = "CHILD-SECRET"

// agentServer is a handler over a parent runner whose one tool, ask_desk,
// is an agent tool over a child runner with the tools of the tests; each
// step of the parent reports the usage of 2 tokens (1 in, 1 out), each of
// the child's 110 (100 in, 10 out).
func newAgentServer(t *testing.T, child *coretest.Script) *testServer {
	t.Helper()
	fx := &effects{}
	childTools := testTools(t, fx)
	childB := coretest.Metered{
		Backend: coretest.NewBackend(child, &coretest.BackendOptions{Name: "child", Tools: childTools, DeltaSize: 4}),
		Usage:   driver.Usage{InputTokens: 100, OutputTokens: 10, TotalTokens: 110},
	}
	childR := core.NewRunner(childB, childTools, &core.Options{Logger: quiet})
	t.Cleanup(func() { childR.Close() })
	desk, err := core.NewAgentTool("ask_desk", "Ask the desk.", childR, nil)
	if err != nil {
		t.Fatal(err)
	}
	parentTools, err := core.NewToolbox(desk)
	if err != nil {
		t.Fatal(err)
	}
	parent := coretest.Simple("ask_desk", `{"input":"refund order 7"}`, "parent done")
	parentB := coretest.NewBackend(parent, &coretest.BackendOptions{Name: "parent", Tools: parentTools, DeltaSize: 4})
	r := core.NewRunner(coretest.Metered{Backend: parentB, Usage: driver.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}}, parentTools, &core.Options{Logger: quiet})
	return serve(t, r, parentB, fx, nil)
}

// shownParts returns what the chunks of an SSE transcript show of the
// calls (the tool and call of each input, the approval and call of each
// approval request, the call of each output), and the usage of its
// finish chunk.
func shownParts(t *testing.T, sse string) ([]string, usage) {
	t.Helper()
	var parts []string
	var u usage
	for _, c := range chunks(sse) {
		var v struct {
			Type, ToolName, ToolCallID, ApprovalID string
			MessageMetadata                        *metadata
		}
		if err := json.Unmarshal([]byte(c), &v); err != nil {
			continue // [DONE]
		}
		switch v.Type {
		case "tool-input-start":
			parts = append(parts, "input "+v.ToolName+" "+v.ToolCallID)
		case "tool-approval-request":
			parts = append(parts, "approval "+v.ApprovalID+" "+v.ToolCallID)
		case "tool-output-available", "tool-output-error", "tool-output-denied":
			parts = append(parts, "output "+v.ToolCallID)
		case "finish":
			if v.MessageMetadata != nil {
				u = v.MessageMetadata.Usage
			}
		}
	}
	return parts, u
}

// TestAgentToolChild: the events of an agent tool's child run, relayed
// into the parent's stream, are not shown as the parent's: the message's
// text is the parent's answer only (the child's answer is the output of
// the parent's call), its calls are the parent's, the child's approval is
// asked once, under the parent's id for it (which the page's answer
// decides), and the usage is the parent's run's, the child's counted
// once, in it.
func TestAgentToolChild(t *testing.T) {
	t.Run("answer", func(t *testing.T) {
		s := newAgentServer(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)}}},
			{Text: childSecret + ": {{output \"lookup_order\"}}"},
		}}}})
		sse := readAll(t, s.post(t, "ann", userMessage("c1", "order 7?")))
		s.h.turns.Wait()
		if got := texts(sse); got != "parent done" {
			t.Errorf("text %q, want the parent's answer only\n%s", got, sse)
		}
		parts, u := shownParts(t, sse)
		id := callID(t, parts)
		if diff := cmp.Diff([]string{"input ask_desk " + id, "output " + id}, parts); diff != "" {
			t.Errorf("the calls shown (-want +got):\n%s", diff)
		}
		// The parent's two steps and the child's two.
		if want := (usage{InputTokens: 202, OutputTokens: 22, TotalTokens: 224}); u != want {
			t.Errorf("usage %+v, want %+v: the parent's, the child's in it once", u, want)
		}
		if got, want := output(t, sse, id), `"`+childSecret+`: {\"item\":\"espresso machine\",\"order\":\"7\"}"`; got != want {
			t.Errorf("output of the parent's call %s, want the child's answer %s", got, want)
		}
	})
	t.Run("approval", func(t *testing.T) {
		s := newAgentServer(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)}}},
			{Text: childSecret + ": {{output \"refund\"}}"},
		}}}})
		sse := readAll(t, s.post(t, "ann", userMessage("c1", "refund 7")))
		s.h.turns.Wait()
		ids := approvalIDs(t, s, "c1")
		if len(ids) != 1 || !strings.Contains(ids[0], "/") {
			t.Fatalf("the parent's approvals %v, want the child's refund's, mirrored", ids)
		}
		parts, u := shownParts(t, sse)
		id := callID(t, parts)
		want := []string{"input ask_desk " + id, "input refund " + ids[0], "approval " + ids[0] + " " + ids[0]}
		if diff := cmp.Diff(want, parts); diff != "" {
			t.Errorf("the calls shown (-want +got):\n%s", diff)
		}
		// The parent's first step and the child's.
		if want := (usage{InputTokens: 101, OutputTokens: 11, TotalTokens: 112}); u != want {
			t.Errorf("usage %+v, want %+v: the parent's, the child's in it once", u, want)
		}
		if got := texts(sse); got != "" {
			t.Errorf("text %q before the decision, want none", got)
		}
		sse = readAll(t, s.post(t, "ann", answersMessage("c1", "msg-1", []approvalAnswer{{ID: ids[0], Approved: true}})))
		s.h.turns.Wait()
		if got := texts(sse); got != "parent done" {
			t.Errorf("text %q after the decision, want the parent's answer only\n%s", got, sse)
		}
		if n := s.fx.count("7"); n != 1 {
			t.Errorf("refunds of order 7: %d, want 1", n)
		}
		parts, u = shownParts(t, sse)
		// The approval's call is the child's: its result, from the
		// child's events, is shown under the run's id for it, before the
		// output of the parent's call.
		if diff := cmp.Diff([]string{"output " + ids[0], "output " + id}, parts); diff != "" {
			t.Errorf("the calls shown after the decision (-want +got):\n%s", diff)
		}
		if got, want := output(t, sse, ids[0]), `"refunded 150 on order 7"`; got != want {
			t.Errorf("output of the child's refund %s, want %s", got, want)
		}
		if got, want := output(t, sse, id), `"`+childSecret+`: refunded 150 on order 7"`; got != want {
			t.Errorf("output of the parent's call %s, want the child's answer %s", got, want)
		}
		// The turn's: the parent's two steps and the child's two.
		if want := (usage{InputTokens: 202, OutputTokens: 22, TotalTokens: 224}); u != want {
			t.Errorf("usage %+v after the decision, want %+v: the parent's, the child's in it once", u, want)
		}
	})
}

// callID returns the id of the call of ask_desk that parts show.
func callID(t *testing.T, parts []string) string {
	t.Helper()
	for _, p := range parts {
		if id, ok := strings.CutPrefix(p, "input ask_desk "); ok {
			return id
		}
	}
	t.Fatalf("no call of ask_desk shown: %v", parts)
	return ""
}

// output returns the output of call id that an SSE transcript shows.
func output(t *testing.T, sse, id string) string {
	t.Helper()
	for _, c := range chunks(sse) {
		var v struct {
			Type, ToolCallID string
			Output           json.RawMessage
		}
		if json.Unmarshal([]byte(c), &v) == nil && v.Type == "tool-output-available" && v.ToolCallID == id {
			return string(v.Output)
		}
	}
	t.Fatalf("no output of call %s shown", id)
	return ""
}

// TestAskShown: a question a tool's handler asked (core.Ask), shown as an
// approval under "<call>/<question>", ends with the page's decision once
// the call has its result (approved: the decision as its output; denied:
// denied), not as a call stopped before it finished.
func TestAskShown(t *testing.T) {
	for _, c := range []struct {
		name     string
		approved bool
		kind     string // of the question's last chunk
		answer   string
	}{
		{"approved", true, "tool-output-available", "done: shipped"},
		{"denied", false, "tool-output-denied", "done: not shipped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ship, err := core.NewTool("ship", "Ship an order.", func(ctx context.Context, _ struct{}) (string, error) {
				ds, err := core.Ask(ctx, core.Question{ID: "confirm", Why: "ship it?"})
				if err != nil {
					return "", err
				}
				if ds[0].Approved {
					return "shipped", nil
				}
				return "not shipped", nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			tools, err := core.NewToolbox(ship)
			if err != nil {
				t.Fatal(err)
			}
			b := coretest.NewBackend(coretest.Simple("ship", `{}`, `done: {{output "ship"}}`), &coretest.BackendOptions{Tools: tools})
			r := core.NewRunner(b, tools, &core.Options{Logger: quiet})
			s := serve(t, r, b, &effects{}, nil)
			readAll(t, s.post(t, "ann", userMessage("c1", "ship 7")))
			s.h.turns.Wait()
			ids := approvalIDs(t, s, "c1")
			if len(ids) != 1 || !strings.HasSuffix(ids[0], "/confirm") {
				t.Fatalf("approvals %v, want the question", ids)
			}
			sse := readAll(t, s.post(t, "ann", answersMessage("c1", "msg-1", []approvalAnswer{{ID: ids[0], Approved: c.approved}})))
			s.h.turns.Wait()
			if got := texts(sse); got != c.answer {
				t.Errorf("text %q, want %q", got, c.answer)
			}
			var last string
			for _, ch := range chunks(sse) {
				var v struct{ Type, ToolCallID string }
				if json.Unmarshal([]byte(ch), &v) == nil && v.ToolCallID == ids[0] {
					last = v.Type
				}
			}
			if last != c.kind {
				t.Errorf("the question's last chunk %q, want %q\n%s", last, c.kind, sse)
			}
		})
	}
}
