package core

import (
	"context"

	"github.com/toolrelay/toolrelay/core/driver"
)

// A CallRequest asks [Runner.Call] to answer one call for a loop that is
// run elsewhere than in [Runner.Run], such as a durable-execution engine's
// workflow (module toolrelay/temporal), which keeps the results itself.
type CallRequest struct {
	// Call is the call to answer.
	Call Call
	// Step is the number of the step the call belongs to (from 1), for
	// events and hooks.
	Step int
	// Again says the call was started before, here or in another process,
	// and its result was lost: it is decided as [Runner.Resume] decides a
	// call its journal found started and not finished. The tool's Verify
	// hook, if it has one, says what became of it; without one (or when
	// the hook cannot tell), an idempotent or read-only tool runs again,
	// and any other call gets a failed result saying its outcome is
	// unknown (outcome InDoubt): never a second effect.
	Again bool
	// IdempotencyKey, if set, is the result's key in place of the one
	// the runner derives from the call's backend, thread, turn, id and
	// arguments.
	IdempotencyKey string
	// Journaled puts the call through the runner's journal, as a step's
	// call goes, for a toolbox served to other clients (package mcptools
	// serves one over MCP): a result the journal holds for the call's
	// key (the runner's backend name, the call's thread, turn and id) is
	// returned without running anything, a call found started and not
	// finished is decided as a resume decides it, and the result is kept
	// before it is returned. Again, IdempotencyKey and Decision are
	// ignored: a call whose tool needs a person's approval gets a failed
	// result (outcome Denied), as no one can be asked.
	Journaled bool
	// Decision is a person's decision about a call that needed one (see
	// [Runner.ApprovalNeeded]); nil when none was needed. A denied call
	// runs no handler and gets a failed result telling the model why
	// (outcome Denied); an approved service's approval request is
	// answered "approved"; an approval with Arguments runs the handler
	// with them.
	Decision *Decision
	// Child, for a call of an agent tool ([NewAgentTool]) whose child
	// ran elsewhere (module toolrelay/temporal runs it as a child
	// workflow), is the child run's outcome, with ChildErr its error:
	// the call's result is made of them as it would be of the child's
	// run here (its answer; a failed result naming the error's code),
	// and the child does not run. Ignored for other tools.
	Child    *Result
	ChildErr error
	// Parents, for a call of an agent's run that goes on elsewhere
	// (module toolrelay/temporal runs an agent tool's child as a child
	// workflow, and its calls through the child's runner), are the agent
	// calls that run came through, from the outermost, each with the
	// runner that made it: the call's events go to each one's OnEvent
	// too, their Path the agent calls from that runner down, as the
	// events of a child run here go (see [NewAgentTool]). Ignored for a
	// Journaled request.
	Parents []Parent
}

// A Parent is a call of an agent tool and the runner that made it: see
// [CallRequest.Parents].
type Parent struct {
	Runner *Runner
	Call   Call
}

// Call answers one call as a step of [Runner.Run] does, but without the
// runner's journal: the arguments are checked against the runner's limit
// and the tool's schema, the middleware and the handler run (a panic
// recovered, the time bounded), the output is encoded within the limit,
// and the runner's events and call hook report it. Every failure of the
// call is a failed result; the error is non-nil only when ctx ended while
// the handler ran (the call may then run again). Keeping the result,
// and running a call only once, is the caller's part.
func (r *Runner) Call(ctx context.Context, req *CallRequest) (driver.ToolResult, error) {
	if req.Journaled {
		call := req.Call
		c := &callRun{r: r, call: &call, tool: r.tools.Lookup(call.Name), key: r.key(&call), step: req.Step, mode: outsideCall}
		return c.journaled(ctx)
	}
	c := &callRun{r: r, call: &req.Call, tool: r.tools.Lookup(req.Call.Name), step: req.Step, mode: detachedCall, out: relayTo(req.Parents)}
	c.key = r.key(c.call)
	h := r.opts.Hooks
	if h == nil || h.Call == nil {
		return c.detached(ctx, req)
	}
	hc := c.hooked()
	ctx, end := h.Call(ctx, &hc.info)
	tr, err := c.detached(ctx, req)
	e := &hc.end
	*e = CallEnd{Cause: c.cause, Err: err}
	if err == nil {
		e.Result = CallResult{Output: tr.Output, Failed: tr.Failed, Error: tr.Error, Outcome: tr.Outcome}
	}
	end(e)
	return tr, err
}

// ApprovalNeeded reports whether call needs a person's decision before it
// runs, and why, as [Runner.Run] would ask: a call of a tool with an
// approval rule ([ToolOptions.Approval]) whose arguments are valid and
// that the rule covers (a rule that fails covers it), or the service's own
// approval request (kind ServiceApproval). A call of an unknown tool, or
// whose arguments are not valid, needs none: it fails as usual.
func (r *Runner) ApprovalNeeded(ctx context.Context, call Call) (need bool, why string) {
	rule := approvalRule(&call, r.tools.Lookup(call.Name))
	if rule == nil {
		return false, ""
	}
	c := &callRun{r: r, call: &call}
	c.key = r.key(c.call)
	c.prepare()
	if c.argErr != nil && call.Kind != ServiceApproval {
		return false, ""
	}
	need, why, err := rule(ctx, call, c.args)
	if err != nil {
		return true, "the approval rule failed: " + err.Error()
	}
	if !need {
		return false, ""
	}
	return true, why
}
