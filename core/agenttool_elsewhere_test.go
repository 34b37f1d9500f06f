package core_test

import (
	"encoding/json"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestAgentToolRanElsewhere: a loop run elsewhere (module
// toolrelay/temporal) sees an agent tool's child and options
// (Tool.Agent), gets the child's input for a call's arguments
// (Tool.AgentInput: the default {"input"}, or the arguments as JSON text
// with Parameters; arguments that do not fit are refused), and has
// Runner.Call make the call's result of the child's run it ran itself
// (CallRequest.Child): its answer, or a failed result naming its error's
// code, without running the child.
func TestAgentToolRanElsewhere(t *testing.T) {
	e := newAgentEnv(t, parentScript(), childScript("50"))
	e.childOpts.MaxSteps = 7
	e.agentOpts = &core.AgentToolOptions{Run: core.RunOptions{Budget: core.Budget{MaxToolCalls: 3}}}
	e.open()
	tool := e.parent.Toolbox().Lookup("ask_refunds")
	child, ro, ok := tool.Agent()
	if !ok || child != e.child || ro.MaxSteps != 7 || ro.Budget.MaxToolCalls != 3 || ro.Timeout <= 0 {
		t.Fatalf("Agent() = %p, %+v, %v; want the child runner (%p), its MaxSteps 7, the tool's budget and a time limit", child, ro, ok, e.child)
	}
	if _, _, ok := e.child.Toolbox().Lookup("refund").Agent(); ok {
		t.Error("Agent() of a tool that is no agent tool: ok")
	}
	if in, err := tool.AgentInput(json.RawMessage(`{"input":"refund order 7"}`)); err != nil || in != "refund order 7" {
		t.Errorf("AgentInput = %q, %v; want the input", in, err)
	}
	if in, err := tool.AgentInput(json.RawMessage(`{"inptu":1}`)); err == nil {
		t.Errorf("AgentInput of arguments that do not fit = %q, want an error", in)
	}
	raw, err := core.NewAgentTool("raw", "A raw agent.", e.child, &core.AgentToolOptions{Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := raw.AgentInput(json.RawMessage(`{ "order": "7" }`)); err != nil || in != `{"order":"7"}` {
		t.Errorf("AgentInput with Parameters = %q, %v; want the arguments as canonical JSON", in, err)
	}

	call := core.Call{Thread: "th", Turn: "tu", ID: "c1", Name: "ask_refunds", Arguments: json.RawMessage(`{"input":"refund order 7"}`)}
	for _, c := range []struct {
		name   string
		child  *core.Result
		err    error
		failed bool
		output string
	}{
		{"answered", &core.Result{Text: "child: refunded"}, nil, false, "child: refunded"},
		{"paused", &core.Result{}, &errcode.Error{Code: errcode.FailedPrecondition, Err: core.ErrAwaitingApproval}, true, `agent "ask_refunds" awaits a person's decision, which cannot be asked for here`},
		{"failed", &core.Result{}, &errcode.Error{Code: errcode.Unavailable, Err: errcode.Errorf(errcode.Unavailable, "down")}, true, `agent "ask_refunds" failed (Unavailable)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := e.parent.Call(t.Context(), &core.CallRequest{Call: call, Step: 1, Child: c.child, ChildErr: c.err})
			if err != nil {
				t.Fatal(err)
			}
			got := tr.Output.Text
			if tr.Failed {
				got = tr.Error
			}
			if tr.Failed != c.failed || got != c.output {
				t.Errorf("result = failed %v, %q; want failed %v, %q", tr.Failed, got, c.failed, c.output)
			}
		})
	}
	if n := e.inputs(); n != 0 || e.refunds.Load() != 0 {
		t.Errorf("the child ran: %d inputs, %d refunds; want none", n, e.refunds.Load())
	}
}
