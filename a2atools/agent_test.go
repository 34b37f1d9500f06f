package a2atools_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// childSecret is in the answer of the child of the agent tool: the task
// of the parent's run never shows it.
const childSecret = "CHILD-SECRET"

// newParentAgent serves a parent runner whose one tool, ask_shop, is an
// agent tool over a child runner playing child with the tools of
// newAgent (refund needs approval, lookup); the parent asks the child,
// then answers "parent done". The agent's r and b are the parent's, its
// refunds the child's.
func newParentAgent(t *testing.T, child *coretest.Script) *agent {
	t.Helper()
	a, _, err := agentHandler(child, "") // the child, not served
	if err != nil {
		t.Fatal(err)
	}
	shop, err := core.NewAgentTool("ask_shop", "Ask the shop.", a.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(shop)
	if err != nil {
		t.Fatal(err)
	}
	childR := a.r
	a.b = coretest.NewBackend(coretest.Simple("ask_shop", `{"input":"refund order 7"}`, "parent done"), &coretest.BackendOptions{Name: "parent", Tools: tb, DeltaSize: 4})
	a.r = core.NewRunner(a.b, tb, &core.Options{Logger: quiet})
	a.Server = httptest.NewServer(a2atools.NewHandler(a.r, &a2atools.ServeOptions{
		Name:     "desk",
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:   quiet,
	}))
	t.Cleanup(func() {
		a.Server.Close()
		a.r.Close()
		childR.Close()
	})
	return a
}

// TestServeAgentTool: the events of an agent tool's child run, relayed
// into the served runner's stream, are not the task's: its artifacts are
// the parent's answer only, sent or streamed; a child's approval leaves
// the task input-required once, under the parent's id for it, which the
// answer decides.
func TestServeAgentTool(t *testing.T) {
	lookup := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"order": "7"}`)}}},
		{Text: childSecret + ": {{output \"lookup\"}}"},
	}}}}
	t.Run("send", func(t *testing.T) {
		a := newParentAgent(t, lookup)
		task := asTask(t)(a.client(t, "ana").SendMessage(t.Context(), userText("where is order 7?")))
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "parent done" {
			t.Errorf("task %s, artifacts %q; want completed, the parent's answer only", task.Status.State, artifactText(task))
		}
	})
	t.Run("stream", func(t *testing.T) {
		a := newParentAgent(t, lookup)
		var got []string
		for ev, err := range a.client(t, "ana").SendStreamingMessage(t.Context(), userText("where is order 7?")) {
			if err != nil {
				t.Fatal(err)
			}
			if ev, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && ev.LastChunk {
				got = append(got, ev.Artifact.Parts[0].(a2a.TextPart).Text)
			}
		}
		if diff := cmp.Diff([]string{"parent done"}, got); diff != "" {
			t.Errorf("the whole artifacts streamed (-want +got):\n%s", diff)
		}
	})
	t.Run("approval", func(t *testing.T) {
		a := newParentAgent(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order": "7"}`)}}},
			{Text: childSecret + ": {{output \"refund\"}}"},
		}}}})
		c := a.client(t, "ana")
		task := asTask(t)(c.SendMessage(t.Context(), userText("refund order 7")))
		if task.Status.State != a2a.TaskStateInputRequired || artifactText(task) != "" {
			t.Fatalf("task %s, artifacts %q; want input-required, none", task.Status.State, artifactText(task))
		}
		pending, err := a.r.Approvals(t.Context(), a.b.Received()[0].Thread)
		if err != nil || len(pending) != 1 || !strings.Contains(pending[0].Key.Call, "/") {
			t.Fatalf("the parent's approvals %+v, %v; want the child's refund, mirrored", pending, err)
		}
		var ids []string
		for _, d := range task.Status.Message.Parts[1].(a2a.DataPart).Data["approvals"].([]any) {
			ids = append(ids, d.(map[string]any)["callId"].(string))
		}
		if diff := cmp.Diff([]string{pending[0].Key.Call}, ids); diff != "" {
			t.Errorf("the approvals the task asks for (-want +got):\n%s", diff)
		}
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "approve"})
		m.TaskID = task.ID
		done := asTask(t)(c.SendMessage(t.Context(), &a2a.MessageSendParams{Message: m}))
		if done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "parent done" {
			t.Errorf("after the decision: task %s, artifacts %q; want completed, the parent's answer only", done.Status.State, artifactText(done))
		}
		if n := a.refunds.Load(); n != 1 {
			t.Errorf("refunds = %d, want 1", n)
		}
	})
}
