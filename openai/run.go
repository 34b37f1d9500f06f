package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/owned"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// Start implements [driver.Backend]. A new session (req.Thread empty and no
// Options.SessionID) is created with environment {"type":"none"} and its
// first turn runs on the creation stream (or, when polling, is read with
// GET requests); on an existing session the backend subscribes to the
// events stream before it posts the input. If ctx ends while the turn
// runs, the turn is left on the service, for a resume.
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	if err := b.checkClosed(); err != nil {
		return nil, err
	}
	id := req.Thread
	if id == "" {
		id = b.opts.SessionID
	}
	text, err := textOf(req.Format)
	if err != nil {
		return nil, err
	}
	content, err := inputContent(req.Input, req.Parts)
	if err != nil {
		return nil, err
	}
	if id != "" {
		if err := b.checkSession(ctx, id, req.Format, text); err != nil {
			return nil, err
		}
	}
	var st *thread
	if id == "" {
		st, err = b.newSession(ctx, content, text, req.Created)
	} else {
		st, err = b.sendInput(ctx, id, content)
	}
	if err != nil {
		return nil, err
	}
	st.observe(ctx)
	step, err := st.follow(ctx, false)
	return st.finish(step, err)
}

// Resume implements [driver.Backend]: it re-subscribes to the session's
// events (unless polling), reads the session, and returns the function calls
// still listed in required_actions (minus those whose results this process
// delivered), or, when the session is idle, the last turn's answer read from
// its items; while the turn runs, it follows it. A required action that is
// not a function call gives an *[UnsupportedActionError].
func (b *Backend) Resume(ctx context.Context, id string) (*driver.Step, error) {
	st, err := b.thread(id)
	if err != nil {
		return nil, err
	}
	st.resetFollow()
	st.observe(ctx)
	var step *driver.Step
	if b.opts.Delivery == Polling {
		step, err = st.poll(ctx, true)
	} else if step, _, err = st.reconcile(ctx, true, true); err == nil && step == nil {
		step, err = st.await(ctx)
	}
	return st.finish(step, err)
}

// Submit implements [driver.Backend]: it posts the results of a step in one
// request (see the package documentation, Delivery) and returns the next
// step.
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	// The format (req.Format) is the session's, set when it was made.
	st, err := b.thread(req.Step.Thread)
	if err != nil {
		return nil, err
	}
	if st.turn == "" && req.Step.Turn != "" {
		st.beginTurn(req.Step.Turn)
	}
	if err := st.reoffer(ctx); err != nil {
		return nil, err
	}
	st.observe(ctx)
	if b.opts.Delivery != Polling && st.stream == nil {
		if st.stream, err = b.subscribe(ctx, st.id); err != nil {
			return nil, err
		}
	}
	step, stale, err := st.deliver(ctx, req.Results)
	if err == nil && step == nil && stale && b.opts.Delivery != Polling {
		// The results were delivered before: what followed is not on
		// the current stream, so read the session.
		step, _, err = st.reconcile(ctx, false, false)
	}
	if err == nil && step == nil {
		step, err = st.follow(ctx, false)
	}
	if err != nil {
		// The runner cancels the turn if ctx ended; the next call
		// subscribes again.
		st.closeStream()
	}
	if step != nil {
		step.Model = b.model()
	}
	if err == nil {
		b.settle(step)
	}
	return step, err
}

// Cancel implements [driver.Canceler]: it posts agent.session.input.cancel,
// so that the service does not keep the turn waiting.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	st, err := b.thread(id)
	if err != nil {
		return err
	}
	st.endTurn()
	return apiError("cancel turn", b.postCancel(ctx, id))
}

func (b *Backend) postCancel(ctx context.Context, id string) error {
	cancel := oai.NewAgentSessionInputParamAgentSessionInputCancel()
	return b.client.Beta.Agents.Sessions.Events.New(ctx, id, oai.BetaAgentSessionEventNewParams{
		Events: []oai.AgentSessionInputParamUnion{{OfParamAgentSessionInputCancel: &cancel}},
	})
}

// finish ends a Start or Resume: on an error the event stream is closed
// (the next call subscribes again), and the step names the session if
// there is one, so that the run can be resumed. A turn whose run stopped
// (ctx ended) is left to run or wait on the service: a resume picks it up.
func (st *thread) finish(step *driver.Step, err error) (*driver.Step, error) {
	b := st.b
	if err != nil {
		st.closeStream()
		if step == nil && st.id != "" {
			step = &driver.Step{Thread: st.id}
		}
	}
	if step != nil {
		step.Model = b.model()
	}
	if err == nil {
		b.settle(step)
	}
	return step, err
}

// textOf returns the agent.text a new session gets for a run's format:
// {"format":{"type":"json_schema","schema":…}} (the sessions API names no
// format, and has no strict flag), or the zero value for none.
func textOf(f *driver.Format) (oai.AgentTextParam, error) {
	if f == nil {
		return oai.AgentTextParam{}, nil
	}
	schema, err := schemaMap(f.Schema)
	if err != nil {
		return oai.AgentTextParam{}, errcode.Errorf(errcode.InvalidArgument, "openai: format %q: %v", f.Name, err)
	}
	return oai.AgentTextParam{Format: oai.TextFormatParamUnion{OfParamJSONSchema: &oai.TextFormatParamJSONSchema{Schema: schema}}}, nil
}

// checkSessionFormat refuses a run's format on existing session id (sess,
// as read) that answers in another: a session's format is set when it is
// made (the sessions API cannot change it), so a run on it may ask for
// that one only.
func checkSessionFormat(id string, sess *oai.AgentSession, f *driver.Format, want oai.AgentTextParam) error {
	got := sess.Agent.Text.Format
	if got.Type == "json_schema" && sameJSON(got.Schema, want.Format.OfParamJSONSchema.Schema) {
		return nil
	}
	return errcode.Errorf(errcode.InvalidArgument, "openai: session %s answers in %s: a session's format is set when the session is made (by its first run's format), so a run on it cannot ask for format %q", id, describeFormat(got.Type), f.Name)
}

// sameJSON reports whether two decoded JSON values are the same document.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func describeFormat(typ string) string {
	if typ == "json_schema" {
		return "another JSON schema"
	}
	return "text"
}

// inputContent returns the content of the user's message: its text, then
// its images. The sessions API carries no files, nor images by file id.
func inputContent(text string, parts []driver.Part) ([]oai.InputContentParamUnion, error) {
	content := []oai.InputContentParamUnion{oai.InputContentParamOfParamInputText(text)}
	for i, p := range parts {
		switch {
		case p.Type == driver.PartText:
			content = append(content, oai.InputContentParamOfParamInputText(p.Text))
		case p.Type == driver.PartImage && p.URL != "":
			content = append(content, oai.InputContentParamUnion{OfParamInputImage: &oai.InputContentParamInputImage{ImageURL: p.URL}})
		default:
			return nil, errcode.Errorf(errcode.InvalidArgument, "openai: input part %d: the sessions API carries text and images by URL (or data: URL) only, not %s", i, describePart(p))
		}
	}
	return content, nil
}

// describePart names a kind of part the sessions API cannot carry.
func describePart(p driver.Part) string {
	if p.Type == driver.PartImage {
		return "an image by file id"
	}
	return "a " + string(p.Type) + " part"
}

// newSession creates a session with the user's input, marked disposable
// in its metadata unless Options.Keep (see package owned). If the agent
// made from the toolbox is gone (another process deleted it once no
// session used it), it is found or made again, once.
func (b *Backend) newSession(ctx context.Context, content []oai.InputContentParamUnion, text oai.AgentTextParam, created func(string)) (*thread, error) {
	for attempt := 0; ; attempt++ {
		agentID, err := b.agent(ctx)
		if err != nil {
			return nil, err
		}
		st, err := b.createSession(ctx, agentID, content, text, created)
		if err != nil && attempt == 0 && b.opts.Agent == "" && isNotFound(err) {
			b.forgetAgent(agentID)
			continue
		}
		if err != nil {
			return nil, apiError("create session", err)
		}
		return st, nil
	}
}

// createSession sends the request that creates a session running agentID.
// A run's format (text) overrides the agent's text.format for the session.
func (b *Backend) createSession(ctx context.Context, agentID string, content []oai.InputContentParamUnion, text oai.AgentTextParam, created func(string)) (*thread, error) {
	params := oai.BetaAgentSessionNewParams{
		Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
		AgentID:     oai.String(agentID),
		Input:       sessionInput(content),
		Metadata:    owned.Thread(b.opts.Keep),
	}
	if text.Format.OfParamJSONSchema != nil {
		params.Agent = oai.BetaAgentSessionNewParamsAgent{Text: text}
	}
	key := option.WithHeader("Idempotency-Key", newKey())
	st := newThread(b, "")
	st.lastKnown, st.created = true, created
	st.agentChecked = true // the toolbox's agent, or the one Open checked
	if b.opts.Delivery == Polling {
		sess, err := b.client.Beta.Agents.Sessions.New(ctx, params, key)
		if err != nil {
			return nil, err
		}
		st.id = sess.ID
		st.active.Store(true)
		st.register()
		return st, nil
	}
	var err error
	st.stream, err = b.openStream(ctx, http.MethodPost, "agents/sessions", params, key, option.WithJSONSet("stream", true))
	if err != nil {
		return nil, err
	}
	st.active.Store(true)
	return st, nil
}

// sessionInput returns the input of a new session: the text alone as a
// string, as the service's examples send it, or a message.
func sessionInput(content []oai.InputContentParamUnion) oai.BetaAgentSessionNewParamsInputUnion {
	if len(content) == 1 {
		return oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String(content[0].OfParamInputText.Text)}
	}
	return oai.BetaAgentSessionNewParamsInputUnion{OfArrayOfInputMessages: []oai.AgentSessionInputMessageParam{{Content: content}}}
}

// sendInput starts a turn on an existing session: subscribe (unless
// polling), then post the input message.
func (b *Backend) sendInput(ctx context.Context, id string, content []oai.InputContentParamUnion) (*thread, error) {
	st, err := b.thread(id)
	if err != nil {
		return nil, err
	}
	st.resetFollow()
	if !st.lastKnown {
		t, err := b.latestRootTurn(ctx, id)
		if err != nil {
			return nil, err
		}
		st.lastTurn, st.lastKnown = "", true
		if t != nil {
			st.lastTurn = t.ID
		}
	}
	if b.opts.Delivery != Polling {
		if st.stream, err = b.subscribe(ctx, id); err != nil {
			return nil, err
		}
	}
	msg := oai.AgentSessionInputParamOfParamAgentSessionInputMessage([]oai.AgentSessionInputMessageParam{{Content: content}})
	err = b.client.Beta.Agents.Sessions.Events.New(ctx, id, oai.BetaAgentSessionEventNewParams{
		Events:         []oai.AgentSessionInputParamUnion{msg},
		IdempotencyKey: oai.String(newKey()),
	})
	if err != nil {
		st.closeStream()
		return nil, apiError("send input", err)
	}
	st.active.Store(true)
	return st, nil
}

func (b *Backend) subscribe(ctx context.Context, id string) (*eventStream, error) {
	es, err := b.openStream(ctx, http.MethodGet, "agents/sessions/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return nil, apiError("subscribe to session "+id, err)
	}
	return es, nil
}

// follow returns the turn's next step: from the event stream, or by polling.
func (st *thread) follow(ctx context.Context, resume bool) (*driver.Step, error) {
	b := st.b
	if b.opts.Delivery == Polling {
		return st.poll(ctx, resume)
	}
	return st.await(ctx)
}

// await reads the event stream until the turn reaches a step: calls to run,
// or its end. A stream that ends mid-turn is resumed (re-subscribe, then
// read the session) at most Options.MaxReconnects times.
func (st *thread) await(ctx context.Context) (*driver.Step, error) {
	b := st.b
	drops := 0
	for {
		if st.stream == nil {
			return nil, errcode.Errorf(errcode.Internal, "openai: %s: no event stream to follow", st)
		}
		ev, err := st.stream.next(ctx, st.obs != nil)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case b.life.Err() != nil:
				return nil, errClosed
			case errors.Is(err, wirelimit.ErrTooLarge):
				// An event past MaxEventBytes: resubscribing would read
				// it again.
				st.closeStream()
				return nil, fmt.Errorf("openai: %s: %w", st, err)
			case st.id == "":
				st.closeStream()
				return nil, fmt.Errorf("openai: the creation stream ended before the session was created: %w", err)
			case drops >= b.opts.MaxReconnects:
				st.closeStream()
				return nil, fmt.Errorf("%w %d times mid-turn (%s): %w", errStreamDropped, drops+1, st, err)
			}
			drops++
			b.log.InfoContext(ctx, "openai: event stream ended mid-turn; resuming", "session", st.id, "attempt", drops, "error", err)
			step, _, err := st.reconcile(ctx, true, false)
			if err != nil || step != nil {
				return step, err
			}
			continue
		}
		step, err := st.handle(ctx, ev)
		release(ev)
		if err != nil || step != nil {
			return step, err
		}
	}
}

// maxUnapplied bounds how long a polling run waits while the session
// lists only calls whose results it accepted (202) and has not applied:
// a result the service refused after its acceptance is never applied,
// and polling cannot tell the refusal from a delay before this bound
// (the event stream can: see refusedAgain).
var maxUnapplied = 2 * time.Minute

// poll reads the session every PollInterval until the turn reaches a step.
// A session that lists only calls whose results were sent, for longer than
// maxUnapplied, ends it with the error of a result refused (see
// refusedResult).
func (st *thread) poll(ctx context.Context, resume bool) (*driver.Step, error) {
	b := st.b
	var unapplied time.Time // since when the session lists only calls whose results went
	for {
		step, sess, err := st.reconcile(ctx, false, resume)
		if err != nil || step != nil {
			return step, err
		}
		switch err := refusedAgain(st, sessionActions(sess)); {
		case err == nil:
			unapplied = time.Time{}
		case unapplied.IsZero():
			unapplied = time.Now()
		case time.Since(unapplied) > maxUnapplied:
			return nil, err
		}
		t := time.NewTimer(b.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-b.life.Done():
			t.Stop()
			return nil, errClosed
		case <-t.C:
		}
	}
}

// handle applies one event to the thread and returns the step it completes,
// if any. The event stream hands over only the types listed in handled,
// of turn.item.done only messages' and, to a streamed run, subagents'
// (see wanted, thread.go): a new case here needs its type there. What
// subagents do goes to the observer as agent activity, never into the
// turn's answer.
func (st *thread) handle(ctx context.Context, ev *oai.AgentSessionEventUnion) (*driver.Step, error) {
	b := st.b
	if !st.accept(ev.EventID) {
		return nil, nil
	}
	switch ev.Type {
	case "agent.session.created":
		if st.id == "" && ev.Session.ID != "" {
			st.id = ev.Session.ID
			st.register()
		}
	case "agent.session.turn.created", "agent.session.turn.in_progress":
		switch {
		case ev.Turn.SubagentID != "":
			if st.turn != "" {
				st.subturn(ev.TurnID, ev.Turn.SubagentID)
			}
		case st.turn == "" && st.newRootTurn(ev):
			st.beginTurn(ev.TurnID)
		}
	case "agent.session.subagent.created", "agent.session.subagent.active", "agent.session.subagent.closed":
		// A subagent's state changed: by it, about it (openai-go
		// betaagent.go, AgentSessionSubagentCreatedEvent and its
		// siblings carry the Subagent).
		sa := &ev.Subagent
		return nil, st.act(sa.ID, strings.TrimPrefix(ev.Type, "agent.session."), sa.ID, sa.Name)
	case "agent.session.turn.item.added":
		it := &ev.Item
		switch {
		case it.Type == "agent_message" && st.inTurn(it.TurnID):
			// What an agent sent another: the sender spoke
			// (AgentSessionItemAgentMessage, only ever added).
			return nil, st.act(it.SenderAgentID, it.Type, it.ID, contentText(ev))
		case st.turn != "" && it.TurnID == st.turn && answers(it.Type, it.Role, it.Phase):
			st.live[it.ID] = true
		}
	case "agent.session.turn.output_text.delta":
		if st.live[ev.ItemID] {
			return nil, st.emit(driver.TextDelta, ev.ItemID, ev.Delta)
		}
	case "agent.session.turn.reasoning_summary_text.delta":
		if st.turn != "" && ev.TurnID == st.turn {
			return nil, st.emit(driver.ReasoningDelta, ev.ItemID, ev.Delta)
		}
	case "agent.session.turn.item.done":
		it := &ev.Item
		if subagentCalls[it.Type] && st.inTurn(it.TurnID) {
			// An agent worked with a subagent: create_subagent_call
			// names the agent asking by agent_id, the others by
			// sender_agent_id (openai-go betaagent.go).
			agent := it.SenderAgentID
			if it.Type == "create_subagent_call" {
				agent = it.AgentID
			}
			return nil, st.act(agent, it.Type, it.ID, contentText(ev))
		}
		if sub := st.subturns[it.TurnID]; sub != "" && answers(it.Type, it.Role, it.Phase) && it.Status == "completed" {
			// A subagent's own message: its activity, never the answer.
			return nil, st.act(sub, it.Type, it.ID, messageText(ev))
		}
		if st.turn != "" && it.TurnID == st.turn && answers(it.Type, it.Role, it.Phase) && it.Status == "completed" {
			text := messageText(ev)
			st.msgs[ev.OutputIndex] = text
			delete(st.live, it.ID)
			return nil, st.emit(driver.TextDone, it.ID, text)
		}
	case "agent.session.requires_action":
		if err := refusedAgain(st, ev.Session.RequiredActions); err != nil {
			return nil, err
		}
		return st.actions(ev.Session.RequiredActions, false)
	case "agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled":
		if ev.TurnID != st.turn {
			if st.turn != "" || !st.newRootTurn(ev) {
				return nil, nil
			}
			st.beginTurn(ev.TurnID)
			st.gap = true // its messages were not collected
		}
		if ev.Type != "agent.session.turn.completed" {
			err := turnError(st.id, ev.Turn, strings.TrimPrefix(ev.Type, "agent.session.turn."))
			if err.Code == "" && err.Message == "" {
				err.Code, err.Message = st.lastErr.Code, st.lastErr.Message
			}
			st.endTurn()
			return nil, err
		}
		st.terminal = true
		st.usage = usageOf(ev.Turn.Usage)
		if !ev.Turn.JSON.Usage.Valid() {
			st.usage = usageOf(ev.Usage)
		}
	case "agent.session.idle":
		if !st.terminal {
			return nil, nil // an idle that does not end our turn (e.g. on subscription)
		}
		step := &driver.Step{Thread: st.id, Turn: st.turn, Usage: st.usage, Text: st.text()}
		if st.gap {
			text, err := st.turnText(ctx, st.turn)
			if err != nil {
				return nil, err
			}
			step.Text = text
		}
		st.endTurn()
		return step, nil
	case "agent.session.failed":
		err := &SessionError{Session: st.id, Message: ev.Session.Error}
		st.endTurn()
		return nil, err
	case "agent.session.budget_reached":
		err := budgetError(st)
		st.endTurn()
		return nil, err
	case "error":
		// The refusal of a result the service accepted, when it names
		// the call; else the failure of a turn or of the session: the
		// lifecycle event that ends it follows, and may say less.
		if err := refusedByError(st, &ev.Error); err != nil {
			return nil, err
		}
		st.lastErr = ev.Error
		b.log.InfoContext(ctx, "openai: error event", "session", st.id, "code", ev.Error.Code, "message", ev.Error.Message)
	}
	return nil, nil
}

// budgetError reports a session paused because its spending limit was
// reached (status budget_reached); its code maps to ResourceExhausted.
func budgetError(st *thread) error {
	return &driver.TurnError{Backend: "openai", Thread: st.id, Turn: st.turn, Status: "budget_reached", Code: "budget_reached",
		Message: "the session paused: its spending limit was reached"}
}

// answers reports whether an item is part of a turn's answer: an
// assistant message that is not commentary.
func answers(typ, role, phase string) bool {
	return typ == "message" && role == "assistant" && phase != "commentary"
}

// newRootTurn reports whether the event is about a root turn (not a
// subagent's) that is not the session's previous turn.
func (st *thread) newRootTurn(ev *oai.AgentSessionEventUnion) bool {
	return ev.TurnID != "" && ev.Turn.SubagentID == "" && (!st.lastKnown || ev.TurnID != st.lastTurn)
}

// unsupported returns an *UnsupportedActionError for the first required
// action toolrelay cannot answer: anything but a function call, an MCP
// approval request and a computer-use request for access to an origin
// (a browser sign-in asks for credentials, not a decision).
func unsupported(st *thread, list []oai.AgentSessionRequiredActionUnion) error {
	for _, a := range list {
		switch {
		case a.Type == "function_call", a.Type == "mcp_approval_request":
		case a.Type == "computer_use_approval_request" && a.Request.Type == OriginAccess:
		default:
			ue := &UnsupportedActionError{Session: st.id, Turn: a.TurnID, Type: a.Type, Environment: a.EnvironmentID}
			if a.Type == "computer_use_approval_request" {
				ue.Request, ue.Origin = a.Request.Type, a.Request.CredentialOrigin
			}
			return ue
		}
	}
	return nil
}

// actionID is the id a required action is answered by: a function call's
// call id, an approval request's request id.
func actionID(a *oai.AgentSessionRequiredActionUnion) string {
	if a.Type == "function_call" {
		return a.CallID
	}
	return a.RequestID
}

// actions turns required actions into a step: the function calls whose
// results were not delivered yet (with all, every call listed: a resume
// answers again those whose delivery is in doubt, which deliver tells
// apart). Any other kind of action is an error.
func (st *thread) actions(list []oai.AgentSessionRequiredActionUnion, all bool) (*driver.Step, error) {
	if err := unsupported(st, list); err != nil {
		return nil, err
	}
	var calls []driver.Call
	for _, a := range list {
		if !all && st.sent[callKey{a.TurnID, actionID(&a)}] {
			continue
		}
		switch a.Type {
		case "mcp_approval_request":
			calls = append(calls, mcpApproval(st, &a))
			continue
		case "computer_use_approval_request":
			calls = append(calls, originAccess(st, &a))
			continue
		}
		var args json.RawMessage
		if raw := a.JSON.Arguments.Raw(); raw != "" && raw != "null" {
			args = json.RawMessage(raw)
		}
		calls = append(calls, driver.Call{Thread: st.id, Turn: a.TurnID, ID: a.CallID, Name: a.Name, Arguments: args})
	}
	if len(calls) == 0 {
		return nil, nil
	}
	if st.turn == "" {
		st.beginTurn(calls[0].Turn)
	}
	return &driver.Step{Thread: st.id, Turn: st.turn, Calls: calls}, nil
}

// mcpApproval returns the call that stands for an MCP approval request:
// of kind ServiceApproval, keyed by the request's id, named after the
// server and the tool, with the tool's arguments.
func mcpApproval(st *thread, a *oai.AgentSessionRequiredActionUnion) driver.Call {
	req := gjson.Parse(a.RawJSON()).Get("request")
	var args json.RawMessage
	if raw := req.Get("arguments").Raw; raw != "" && raw != "null" {
		args = json.RawMessage(raw)
	}
	return driver.Call{Thread: st.id, Turn: a.TurnID, ID: a.RequestID, Name: req.Get("server_label").Str + "/" + req.Get("name").Str,
		Arguments: args, Kind: driver.ServiceApproval}
}

// OriginAccess is the name of the call that stands for a computer-use
// request for the browser's access to an origin (required action
// computer_use_approval_request, request type browser_origin_access). Its
// arguments are {"origin": ..., "reason": ...}; its call id is the
// request's id.
const OriginAccess = "browser_origin_access"

// originAccess returns the call that stands for a computer-use request for
// access to an origin: of kind ServiceApproval, named [OriginAccess].
func originAccess(st *thread, a *oai.AgentSessionRequiredActionUnion) driver.Call {
	args, _ := json.Marshal(struct {
		Origin string `json:"origin"`
		Reason string `json:"reason,omitempty"`
	}{a.Request.Origin, a.Request.Reason})
	return driver.Call{Thread: st.id, Turn: a.TurnID, ID: a.RequestID, Name: OriginAccess, Arguments: args, Kind: driver.ServiceApproval}
}

// reconcile reads the session (after re-subscribing, when subscribe is
// set, so that no later event is missed) and returns the step its state
// shows: calls not yet answered, or the end of the turn. It returns a nil
// step while the turn runs. With resume, an idle session gives its last
// turn's answer, whichever turn that is.
func (st *thread) reconcile(ctx context.Context, subscribe, resume bool) (*driver.Step, *oai.AgentSession, error) {
	b := st.b
	if subscribe {
		st.closeStream()
		// The deltas of the messages being written while no stream was
		// open are lost: theirs stop here, and they go whole when done.
		clear(st.live)
		es, err := b.subscribe(ctx, st.id)
		if err != nil {
			return nil, nil, err
		}
		st.stream = es
	}
	st.gap = true
	sess, err := b.client.Beta.Agents.Sessions.Get(ctx, st.id)
	if err != nil {
		return nil, nil, apiError("read session "+st.id, err)
	}
	b.adopt(sess)
	switch sess.Status {
	case "failed":
		err := &SessionError{Session: st.id, Message: sess.Error}
		st.endTurn()
		return nil, sess, err
	case "budget_reached":
		err := budgetError(st)
		st.endTurn()
		return nil, sess, err
	case "requires_action":
		if err := unsupported(st, sess.RequiredActions); err != nil {
			return nil, sess, err
		}
		if err := st.findTurn(ctx, resume); err != nil {
			return nil, sess, err
		}
		// A resume answers every call still listed: a result whose
		// request failed may or may not have been applied, and the
		// service waits for it if it was not.
		step, err := st.actions(sess.RequiredActions, resume)
		return step, sess, err
	case "idle":
		step, err := st.finishIdle(ctx, resume)
		return step, sess, err
	}
	return nil, sess, st.findTurn(ctx, resume)
}

// sessionActions returns the actions sess requires, none when it is nil
// or requires none.
func sessionActions(sess *oai.AgentSession) []oai.AgentSessionRequiredActionUnion {
	if sess == nil || sess.Status != "requires_action" {
		return nil
	}
	return sess.RequiredActions
}

// findTurn learns the root turn being run, when the thread does not know
// it: the session's latest root turn, unless it is the previous one.
func (st *thread) findTurn(ctx context.Context, resume bool) error {
	b := st.b
	if st.turn != "" {
		return nil
	}
	t, err := b.latestRootTurn(ctx, st.id)
	if err != nil || t == nil {
		return err
	}
	if resume || !st.lastKnown || t.ID != st.lastTurn {
		st.beginTurn(t.ID)
	}
	return nil
}

// finishIdle returns the end of the turn on an idle session: its answer, or
// its error. It returns nil when the turn has not begun yet.
func (st *thread) finishIdle(ctx context.Context, resume bool) (*driver.Step, error) {
	b := st.b
	if st.turn == "" {
		t, err := b.latestRootTurn(ctx, st.id)
		switch {
		case err != nil:
			return nil, err
		case t == nil && resume:
			st.endTurn()
			return &driver.Step{Thread: st.id}, nil
		case t == nil, !resume && st.lastKnown && t.ID == st.lastTurn:
			return nil, nil
		}
		st.beginTurn(t.ID)
	}
	t, err := b.client.Beta.Agents.Sessions.Turns.Get(ctx, st.id, st.turn)
	if err != nil {
		return nil, apiError("read turn "+st.turn, err)
	}
	switch t.Status {
	case "completed":
		text, err := st.turnText(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		step := &driver.Step{Thread: st.id, Turn: t.ID, Text: text, Usage: usageOf(t.Usage)}
		st.endTurn()
		return step, nil
	case "failed", "cancelled":
		err := turnError(st.id, *t, string(t.Status))
		st.endTurn()
		return nil, err
	}
	return nil, nil
}

// maxTurnSearch bounds the turns latestRootTurn reads, newest first, to
// find the latest root turn: a session's turns include its subagents'
// (Turn.subagent_id, openai-go betaagentsessionturn.go), which a root
// turn that delegates much is followed by.
const maxTurnSearch = 1000

// latestRootTurn returns the session's most recent root turn, or nil when
// it has none. It reads the session's turns page by page, newest first,
// past those of subagents, up to maxTurnSearch of them; past that it
// returns a ResourceExhausted error.
func (b *Backend) latestRootTurn(ctx context.Context, id string) (*oai.Turn, error) {
	pager := b.client.Beta.Agents.Sessions.Turns.ListAutoPaging(ctx, id, oai.BetaAgentSessionTurnListParams{
		Order: oai.BetaAgentSessionTurnListParamsOrderDesc,
		Limit: oai.Int(100),
	})
	n := 0
	for ; n < maxTurnSearch && pager.Next(); n++ {
		if t := pager.Current(); t.SubagentID == "" {
			return &t, nil
		}
	}
	if err := pager.Err(); err != nil {
		return nil, apiError("list turns of session "+id, err)
	}
	if n == maxTurnSearch {
		return nil, errcode.Errorf(errcode.ResourceExhausted, "openai: session %s: its latest %d turns are all its subagents': toolrelay reads at most that many to find the root agent's latest turn", id, maxTurnSearch)
	}
	return nil, nil
}

// turnText reads a turn's final answer from its items: the completed
// assistant messages that are not commentary, in order. Each goes to the
// thread's observer whole (the runner drops those it had).
func (st *thread) turnText(ctx context.Context, turn string) (string, error) {
	b := st.b
	it := b.client.Beta.Agents.Sessions.Turns.Items.ListAutoPaging(ctx, st.id, turn, oai.BetaAgentSessionTurnItemListParams{
		Order: oai.BetaAgentSessionTurnItemListParamsOrderAsc,
		Limit: oai.Int(100),
	})
	var parts []string
	for it.Next() {
		item := it.Current()
		if answers(item.Type, string(item.Role), string(item.Phase)) && item.Status == "completed" && (item.TurnID == "" || item.TurnID == turn) {
			text := item.AsMessage().OutputText()
			parts = append(parts, text)
			if err := st.emit(driver.TextDone, item.ID, text); err != nil {
				return "", err
			}
		}
	}
	if err := it.Err(); err != nil {
		return "", apiError("read the items of turn "+turn, err)
	}
	return strings.Join(parts, "\n"), nil
}

// contentText returns the text of the content of an event's item (the
// output_text parts of a multi-agent item's content: openai-go
// AgentContentUnion; encrypted content is left out), joined by newlines.
func contentText(ev *oai.AgentSessionEventUnion) string {
	var parts []string
	gjson.Get(ev.RawJSON(), "item.content").ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").Str == "output_text" {
			parts = append(parts, c.Get("text").Str)
		}
		return true
	})
	return strings.Join(parts, "\n")
}

// messageText returns the output text of a turn.item.done message event.
func messageText(ev *oai.AgentSessionEventUnion) string {
	var e struct {
		Item oai.AgentSessionMessage `json:"item"`
	}
	if err := json.Unmarshal([]byte(ev.RawJSON()), &e); err != nil {
		return ""
	}
	return e.Item.OutputText()
}

func turnError(session string, t oai.Turn, status string) *driver.TurnError {
	return &driver.TurnError{Backend: "openai", Thread: session, Turn: t.ID, Status: status, Code: string(t.Error.Code), Message: t.Error.Message}
}

func usageOf(u oai.TokenUsage) driver.Usage {
	return driver.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
}
