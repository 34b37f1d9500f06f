package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// strayWait bounds the wait for the refusal of a result for a call that is
// not pending: long enough for a loaded machine and the retries of a
// backend that takes the refusal for a race (the sessions backend's 1 s),
// short enough to fail fast when the fake accepts the result and the
// backend waits for a step that never comes.
const strayWait = 20 * time.Second

var errStrayWait = errors.New("no refusal within 20s: the result for a call that is not pending was taken")

// resultNotPending submits, through the backend, a result for a call id
// the model never made, with the result of the call the turn waits for:
// the service refuses the request (both services answer 400,
// invalid_request_error: "Unknown pending tool call" on sessions, "No
// tool call found for function call output" on the Responses API), so the
// backend's Submit fails with InvalidArgument (as the backend's ErrorCode
// classifies it), the fake records no such result, and the turn still
// waits for its call, whose result then gets the answer. A fake that
// accepted any result would let a backend that answers the wrong calls
// pass the suite.
func resultNotPending(e *env) {
	e.runner(script(calls("getUserFavoriteCity", `{}`), answer("{{result 0}}")), nil, weatherTools(e)...)
	ctx := e.t.Context()
	step, err := e.b.Start(ctx, &driver.StartRequest{Input: "Where do I like to be?"})
	if err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	if len(step.Calls) != 1 {
		e.t.Fatalf("the first step has %d calls, want the favorite city's", len(step.Calls))
	}
	// The pending call's result goes too (a service that takes a step's
	// results together refuses one that leaves a call unanswered); the
	// stray result is what must be refused.
	const stray = "call_not_pending_7f3a"
	forged := *step
	call := step.Calls[0]
	call.ID = stray
	forged.Calls = []driver.Call{step.Calls[0], call}
	// A refusal comes at once; a fake that accepts the result leaves the
	// backend waiting for a step that never comes: the wait is bounded.
	sctx, cancel := context.WithTimeoutCause(ctx, strayWait, errStrayWait)
	defer cancel()
	_, err = e.b.Submit(sctx, &driver.SubmitRequest{Step: &forged, Results: []driver.ToolResult{
		{Call: step.Calls[0], Output: driver.Output{Text: "Seattle, WA"}, Outcome: driver.OK, IdempotencyKey: "conformance-" + step.Calls[0].ID},
		{Call: call, Output: driver.Output{Text: "Paris"}, Outcome: driver.OK, IdempotencyKey: "conformance-" + stray},
	}})
	switch {
	case err == nil:
		e.t.Fatalf("Submit of a result for call %s, which is not pending, succeeded; want the service's refusal", stray)
	case errors.Is(context.Cause(sctx), errStrayWait):
		e.t.Fatalf("Submit of a result for call %s, which is not pending, was not refused: %v", stray, err)
	}
	code := errcode.Of(err)
	if code == errcode.Unknown {
		code = e.b.ErrorCode(err) // as the runner classifies it
	}
	if code != errcode.InvalidArgument {
		e.t.Errorf("Submit of a result for a call that is not pending: %v has code %v, want InvalidArgument (the service's 400)", err, code)
	}
	for _, d := range e.results() {
		if d.CallID == stray {
			e.t.Fatalf("the fake accepted a result for call %s, which is not pending: %+v", stray, d)
		}
	}
	// The turn still waits for its real call.
	next, err := e.b.Submit(ctx, &driver.SubmitRequest{Step: step, Results: []driver.ToolResult{
		{Call: step.Calls[0], Output: driver.Output{Text: "Seattle, WA"}, Outcome: driver.OK, IdempotencyKey: "conformance-" + step.Calls[0].ID},
	}})
	if err != nil {
		e.t.Fatalf("Submit of the pending call's result after the refusal: %v", err)
	}
	if next == nil || len(next.Calls) != 0 || next.Text != "Seattle, WA" {
		e.t.Errorf("the step after the pending call's result = %+v, want the answer %q", next, "Seattle, WA")
	}
}
