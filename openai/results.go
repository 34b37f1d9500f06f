package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// unknownCallDelays are the pauses before a result refused as "Unknown
// pending tool call" is sent again, when the call was just announced and
// the service may not have registered it yet (the official helper waits
// the same).
var unknownCallDelays = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}

// deliver posts the results of a step until each is delivered, in one
// request whose Idempotency-Key is derived from the results' own keys (see
// [batchKey]), so that a resend of the same results is the same request.
//
//   - A refusal "Unknown pending tool call: <id>" for a call whose result
//     was delivered before (the journal says so, or a request of this
//     process carrying it may have been applied) means it was delivered: it
//     is dropped and the rest is sent again. For another call it is the
//     race of a call the service has not registered yet: the request is sent
//     again after a short pause, a few times.
//   - Another 4xx refusal is returned.
//   - An error that leaves the outcome unknown (the response was lost, the
//     connection broke, a 5xx after the SDK's retries) is resolved by
//     reading the session (after re-subscribing, when streaming): results
//     for calls no longer pending were delivered; the others are sent
//     again. If the turn moved on meanwhile, the step it shows is returned.
//
// stale reports that some results had (or may have) been delivered before
// this call, so that the turn may have moved on before the current event
// stream was opened: the caller must read the session before it waits for
// events.
func (st *thread) deliver(ctx context.Context, results []driver.ToolResult) (step *driver.Step, stale bool, err error) {
	b := st.b
	todo := slices.Clone(results)
	races, resyncs := 0, 0
	// A result the journal shows as submitted may be answered from the
	// service's idempotency store: the turn may have moved on unseen.
	stale = slices.ContainsFunc(results, func(r driver.ToolResult) bool { return r.Resend })
	for len(todo) > 0 {
		err := st.postResults(ctx, todo)
		if err == nil {
			st.markSent(todo)
			return nil, stale, nil
		}
		if ctx.Err() != nil {
			st.markSent(todo) // the request may have been applied
			return nil, false, ctx.Err()
		}
		if id, ok := unknownPendingCall(err); ok {
			i := slices.IndexFunc(todo, func(r driver.ToolResult) bool { return r.Call.ID == id })
			if i >= 0 && (todo[i].Resend || st.sent[key(todo[i].Call)]) {
				// Delivered before. The rest of the request may have been
				// applied too, if the service applies events one by one.
				st.sent[key(todo[i].Call)] = true
				todo = slices.Delete(todo, i, i+1)
				st.markSent(todo)
				stale = true
				b.log.DebugContext(ctx, "openai: tool result already delivered", "session", st.id, "call_id", id)
				continue
			}
			if races < len(unknownCallDelays) {
				if err := sleep(ctx, unknownCallDelays[races]); err != nil {
					return nil, false, err
				}
				races++
				continue
			}
			return nil, false, apiError("submit results", err)
		}
		if definitive(err) {
			return nil, false, apiError("submit results", err)
		}
		st.markSent(todo)
		if resyncs >= b.opts.MaxReconnects {
			return nil, false, apiError("submit results", err)
		}
		resyncs++
		b.log.InfoContext(ctx, "openai: the outcome of a results request is unknown; reading the session", "session", st.id, "error", err)
		step, sess, rerr := st.reconcile(ctx, b.opts.Delivery != Polling, false)
		if rerr != nil {
			return nil, false, rerr
		}
		pending := map[callKey]bool{}
		if sess.Status == "requires_action" {
			for _, a := range sess.RequiredActions {
				pending[callKey{a.TurnID, actionID(&a)}] = true
			}
		}
		todo = slices.DeleteFunc(todo, func(r driver.ToolResult) bool { return !pending[key(r.Call)] })
		if len(todo) == 0 {
			return step, false, nil
		}
		stale = false // the session was just read
	}
	return nil, stale, nil
}

// A result the service accepted (202) may still be refused: "HTTP 202
// confirms acceptance, not durable completion" (openai-go v3.105,
// betaagentsessionevent.go, Events.New). The service then lists the call
// again in required_actions, or names it in an error event. The backend
// does not send it again: the SDK's own helper (agents_stream.go) sends a
// call's result once and retries only a refusal that comes with the
// response (400 "Unknown pending tool call"); the request sent again, with
// the Idempotency-Key of the call's result (stable, the journal's), would
// be answered from the service's idempotency store and not applied, and
// sent with a new key it would be a request the journal does not know;
// and a result refused for what it holds is refused again. So the run
// ends with a FailedPrecondition error naming the call, the turn left
// waiting, where it would otherwise wait for an event that never comes.

// refusedAgain returns the error of results refused after their
// acceptance, shown by a requires_action event (read after the results
// were accepted) that lists calls whose results were sent, and nothing
// new; nil otherwise. An event that lists a new action as well is a step
// (the calls sent are left out of it, see actions): if the others were
// refused, the event after its results shows it.
func refusedAgain(st *thread, list []oai.AgentSessionRequiredActionUnion) error {
	var first *callKey
	for _, a := range list {
		k := callKey{a.TurnID, actionID(&a)}
		if k.call == "" || !st.sent[k] {
			return nil
		}
		if first == nil {
			first = &k
		}
	}
	if first == nil {
		return nil
	}
	return refusedResult(st, *first, "it listed the call again in required_actions")
}

// refusedByError returns the error of a result refused after its
// acceptance, shown by an error event that names a call whose result was
// sent (by its call id, in its message or param); nil when it names none.
func refusedByError(st *thread, e *oai.SessionError) error {
	keys := slices.SortedFunc(maps.Keys(st.sent), func(a, b callKey) int { return strings.Compare(a.turn+"/"+a.call, b.turn+"/"+b.call) })
	for _, k := range keys {
		if k.call != "" && (namesID(e.Message, k.call) || namesID(e.Param, k.call)) {
			return refusedResult(st, k, fmt.Sprintf("an error event said %s: %s", e.Code, e.Message))
		}
	}
	return nil
}

// refusedResult is the FailedPrecondition error of the result of call k,
// accepted and then refused as how says.
func refusedResult(st *thread, k callKey, how string) error {
	return errcode.Errorf(errcode.FailedPrecondition, "openai: %s: the service accepted the result of call %s (turn %s), then refused it: %s; "+
		"toolrelay sends a call's result once (the same request again would be answered from the service's idempotency store, not applied), "+
		"so the turn is left waiting for it: cancel it (Runner.Cancel), or answer the call with the SDK "+
		"(Backend.Client().Beta.Agents.Sessions.Events.New) and resume the run (Runner.Resume)", st, k.call, k.turn, how)
}

// namesID reports whether s holds id as a whole word (not inside a
// longer id: call_1 is not named by "call_12").
func namesID(s, id string) bool {
	idChar := func(c byte) bool {
		return c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], id)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(id)
		if (j == 0 || !idChar(s[j-1])) && (end == len(s) || !idChar(s[end])) {
			return true
		}
		i = j + 1
	}
}

func (st *thread) postResults(ctx context.Context, results []driver.ToolResult) error {
	b := st.b
	events := make([]oai.AgentSessionInputParamUnion, len(results))
	for i, r := range results {
		events[i] = toolResult(r)
	}
	return b.client.Beta.Agents.Sessions.Events.New(ctx, st.id, oai.BetaAgentSessionEventNewParams{
		Events:         events,
		IdempotencyKey: oai.String(batchKey(results)),
	})
}

func (st *thread) markSent(results []driver.ToolResult) {
	for _, r := range results {
		st.sent[key(r.Call)] = true
	}
}

func key(c driver.Call) callKey { return callKey{c.Turn, c.ID} }

// batchKey derives the Idempotency-Key of a request carrying results from
// their own keys, in order: a single result's key as it is, several
// results' keys hashed together. The same results give the same key in any
// process.
func batchKey(results []driver.ToolResult) string {
	keyOf := func(r driver.ToolResult) string {
		if r.IdempotencyKey != "" {
			return r.IdempotencyKey
		}
		return r.Call.Thread + "/" + r.Call.Turn + "/" + r.Call.ID
	}
	if len(results) == 1 {
		return keyOf(results[0])
	}
	h := sha256.New()
	for _, r := range results {
		h.Write([]byte(keyOf(r)))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// toolResult is the agent.session.input.tool_result event of a result:
// success with the output (a string, a content array of text and image
// parts, or null), or success false with the error message.
func toolResult(r driver.ToolResult) oai.AgentSessionInputParamUnion {
	if r.Call.Kind == driver.ServiceApproval {
		// The answer to an approval request: approve or deny (the events
		// have no room for a reason).
		decision := "approve"
		if r.Failed {
			decision = "deny"
		}
		if r.Call.Name == OriginAccess {
			return oai.AgentSessionInputParamUnion{OfParamAgentSessionInputComputerUseApprovalRequestResult: &oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResult{
				RequestID: r.Call.ID,
				Response: oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion{
					OfBrowserOriginAccess: &oai.AgentBrowserOriginAccessParam{Decision: oai.AgentBrowserOriginAccessParamDecision(decision)}},
			}}
		}
		return oai.AgentSessionInputParamOfParamAgentSessionInputMcpApprovalRequestResult(r.Call.ID,
			oai.AgentSessionInputParamAgentSessionInputMcpApprovalRequestResultResponse{Decision: decision})
	}
	tr := &oai.AgentSessionInputParamAgentSessionInputToolResult{TurnID: r.Call.Turn, CallID: r.Call.ID, Success: !r.Failed}
	if r.Failed {
		msg := r.Error
		if msg == "" {
			msg = "The tool call failed."
		}
		tr.Error = oai.String(msg)
	} else {
		tr.Output = outputParam(r.Output)
	}
	return oai.AgentSessionInputParamUnion{OfParamAgentSessionInputToolResult: tr}
}

func outputParam(o driver.Output) oai.AgentFunctionCallOutputParamUnion {
	switch {
	case o.Null:
		return param.NullStruct[oai.AgentFunctionCallOutputParamUnion]()
	case o.Parts == nil:
		return oai.AgentFunctionCallOutputParamUnion{OfString: oai.String(o.Text)}
	}
	parts := make([]oai.InputContentParamUnion, 0, len(o.Parts))
	for _, p := range o.Parts {
		switch {
		case p.Type == driver.PartText:
			parts = append(parts, oai.InputContentParamOfParamInputText(p.Text))
		case p.Type == driver.PartImage && p.URL != "":
			parts = append(parts, oai.InputContentParamOfParamInputImage(p.URL))
		default:
			// The sessions API takes text and image parts only.
			return oai.AgentFunctionCallOutputParamUnion{OfString: oai.String(o.String())}
		}
	}
	return oai.AgentFunctionCallOutputParamUnion{OfArrayOfInputContents: parts}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
