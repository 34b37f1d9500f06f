package openaitest

import (
	"encoding/json"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// The methods below play the model on a session and emit the events a turn
// produces. The caller holds s.mu.

// startTurn starts a turn with input (model.Begin already succeeded) and
// plays its first step.
func (s *Server) startTurn(sess *session, input string, parts []driver.Part) {
	now := s.now()
	t := &turn{id: s.newID("turn"), status: "in_progress", created: now}
	sess.turns = append(sess.turns, t)
	sess.cur = t
	sess.status = "in_progress"
	sess.active = now
	s.received = append(s.received, coretest.Received{Kind: "input", Thread: sess.id, Input: input, Parts: parts, Format: sess.agent.formatName()})
	user := (&itemJSON{ID: s.newID("msg"), Type: "message", TurnID: t.id, Role: "user", Status: "completed",
		Content: []contentJSON{{Type: "input_text", Text: input}}}).json()
	s.addItem(sess, t, user)
	s.emit(sess, eventJSON{Type: "agent.session.in_progress", Session: sess.json()})
	s.emit(sess, eventJSON{Type: "agent.session.turn.created", SessionID: sess.id, TurnID: t.id, Turn: t.json(sess)})
	if sess.env.Type == "self_hosted" && !sess.connected {
		// The turn waits for the environment's executor, as the service's
		// does: required action environment_connection, which no input
		// event answers (see Server.ConnectEnvironment).
		sess.waitEnv = true
		sess.status = "requires_action"
		s.emit(sess, eventJSON{Type: "agent.session.requires_action", Session: sess.json()})
		return
	}
	s.play(sess)
}

// connectEnvironment connects the session's self-hosted environment and
// plays the turn that waited for it, if any.
func (s *Server) connectEnvironment(sess *session) {
	sess.connected = true
	if !sess.waitEnv {
		return
	}
	sess.waitEnv = false
	sess.status = "in_progress"
	sess.active = s.now()
	s.emit(sess, eventJSON{Type: "agent.session.in_progress", Session: sess.json()})
	s.play(sess)
}

// addItem adds item to turn t, and to the session's items (the root
// agent's: a subagent's turn keeps its own).
func (s *Server) addItem(sess *session, t *turn, item json.RawMessage) {
	t.items = append(t.items, item)
	if t.subagent == "" {
		sess.items = append(sess.items, item)
	}
}

func intp(i int) *int { return &i }

// itemEvent emits turn.item.added or turn.item.done for item (as JSON) at
// index.
func (s *Server) itemEvent(sess *session, t *turn, typ string, index int, item json.RawMessage) {
	s.emit(sess, eventJSON{Type: typ, SessionID: sess.id, TurnID: t.id, OutputIndex: intp(index), Item: item})
}

// play plays the model's next step on the active turn.
func (s *Server) play(sess *session) {
	t := sess.cur
	a, err := sess.model.Next()
	t.usage.add(s.opts.Usage)
	sess.usage.add(s.opts.Usage)
	switch {
	case err != nil:
		s.endTurn(sess, "failed", &turnErrorJSON{Code: "internal_error", Message: err.Error()})
		return
	case a.Fail != nil && a.Fail.Code == "budget_reached":
		s.pauseOnBudget(sess)
		return
	case a.Fail != nil:
		s.endTurn(sess, "failed", &turnErrorJSON{Code: a.Fail.Code, Message: a.Fail.Message})
		return
	}
	if a.Reasoning != "" {
		s.reasoning(sess, t, a.Reasoning)
	}
	if len(a.Calls) > 0 {
		s.askCalls(sess, t, a.Calls)
		return
	}
	if s.opts.Subagents != nil {
		s.delegate(sess, t)
	}
	if s.opts.Commentary != "" {
		s.message(sess, t, "commentary", s.opts.Commentary)
	}
	s.message(sess, t, "final_answer", a.Text)
	s.endTurn(sess, "completed", nil)
}

// reasoning emits a reasoning item whose summary is text, in deltas.
func (s *Server) reasoning(sess *session, t *turn, text string) {
	id := s.newID("rs")
	index := t.index
	t.index++
	s.itemEvent(sess, t, "agent.session.turn.item.added", index,
		(&itemJSON{ID: id, Type: "reasoning", TurnID: t.id, Status: "in_progress", Summary: []contentJSON{}}).json())
	at := func(typ string) eventJSON {
		return eventJSON{Type: typ, SessionID: sess.id, TurnID: t.id, ItemID: id, OutputIndex: intp(index), SummaryIndex: intp(0)}
	}
	added := at("agent.session.turn.reasoning_summary_part.added")
	added.Part = &contentJSON{Type: "summary_text"}
	s.emit(sess, added)
	for _, d := range fakeapi.Chunks(text, s.opts.DeltaSize) {
		ev := at("agent.session.turn.reasoning_summary_text.delta")
		ev.Delta = d
		s.emit(sess, ev)
	}
	textDone := at("agent.session.turn.reasoning_summary_text.done")
	textDone.Text = &text
	s.emit(sess, textDone)
	partDone := at("agent.session.turn.reasoning_summary_part.done")
	partDone.Part = &contentJSON{Type: "summary_text", Text: text}
	s.emit(sess, partDone)
	done := (&itemJSON{ID: id, Type: "reasoning", TurnID: t.id, Status: "completed", Summary: []contentJSON{{Type: "summary_text", Text: text}}}).json()
	s.itemEvent(sess, t, "agent.session.turn.item.done", index, done)
	s.addItem(sess, t, done)
}

// message emits an assistant message of the given phase.
func (s *Server) message(sess *session, t *turn, phase, text string) {
	id := s.newID("msg")
	index := t.index
	t.index++
	s.itemEvent(sess, t, "agent.session.turn.item.added", index,
		(&itemJSON{ID: id, Type: "message", TurnID: t.id, Role: "assistant", Phase: phase, Status: "in_progress", Content: []contentJSON{}}).json())
	part := func(typ string, p contentJSON) eventJSON {
		return eventJSON{Type: typ, SessionID: sess.id, TurnID: t.id, ItemID: id, OutputIndex: intp(index), ContentIndex: intp(0), Part: &p}
	}
	s.emit(sess, part("agent.session.turn.content_part.added", contentJSON{Type: "output_text", Annotations: &[]string{}}))
	for _, d := range fakeapi.Chunks(text, s.opts.DeltaSize) {
		s.emit(sess, eventJSON{Type: "agent.session.turn.output_text.delta", SessionID: sess.id, TurnID: t.id, ItemID: id,
			OutputIndex: intp(index), ContentIndex: intp(0), Delta: d})
	}
	s.emit(sess, eventJSON{Type: "agent.session.turn.output_text.done", SessionID: sess.id, TurnID: t.id, ItemID: id,
		OutputIndex: intp(index), ContentIndex: intp(0), Text: &text})
	s.emit(sess, part("agent.session.turn.content_part.done", contentJSON{Type: "output_text", Text: text, Annotations: &[]string{}}))
	done := (&itemJSON{ID: id, Type: "message", TurnID: t.id, Role: "assistant", Phase: phase, Status: "completed",
		Content: []contentJSON{{Type: "output_text", Text: text, Annotations: &[]string{}}}}).json()
	s.itemEvent(sess, t, "agent.session.turn.item.done", index, done)
	s.addItem(sess, t, done)
}

// askCalls announces the calls of a step and parks the session in
// requires_action.
func (s *Server) askCalls(sess *session, t *turn, calls []coretest.ActionCall) {
	announce := func(callID, name string, args json.RawMessage) {
		index := t.index
		t.index++
		id := s.newID("fc")
		it := itemJSON{ID: id, Type: "function_call", TurnID: t.id, CallID: callID, Name: name, Arguments: args, Status: "in_progress"}
		s.itemEvent(sess, t, "agent.session.turn.item.added", index, it.json())
		it.Status = "completed"
		done := it.json()
		s.itemEvent(sess, t, "agent.session.turn.item.done", index, done)
		s.addItem(sess, t, done)
	}
	for _, c := range calls {
		callID := c.ID
		if callID == "" {
			callID = s.newID("call")
		}
		p := &pendingCall{turnID: t.id, callID: callID, name: c.Name, args: argsJSON(c.Arguments, c.AsString)}
		if c.Approval {
			// A tool the service runs itself (an MCP server's): it asks
			// a person's approval first.
			p.callID, p.approval, p.args = s.newID("mcpreq"), true, json.RawMessage(c.Arguments)
			if c.Origin != "" {
				// A computer-use request for a browser's access to an
				// origin, or (Options.SignIn) to sign in to it.
				p.callID, p.origin, p.signIn = s.newID("cureq"), c.Origin, s.opts.SignIn
			}
			sess.pending = append(sess.pending, p)
			continue
		}
		sess.pending = append(sess.pending, p)
		announce(p.callID, p.name, p.args)
	}
	if s.opts.StrayCalls {
		first := sess.pending[0]
		announce(s.newID("call_stray"), first.name, first.args)
	}
	sess.status = "requires_action"
	s.emit(sess, eventJSON{Type: "agent.session.requires_action", Session: sess.json()})
}

// deliver hands the model the results of all pending calls, in call order,
// and plays its next step.
func (s *Server) deliver(sess *session) {
	t := sess.cur
	results := make([]coretest.Delivered, len(sess.pending))
	for i, p := range sess.pending {
		results[i] = *p.result
	}
	pending := sess.pending
	sess.pending = nil
	if err := sess.model.Deliver(results); err != nil {
		s.endTurn(sess, "failed", &turnErrorJSON{Code: "internal_error", Message: err.Error()})
		return
	}
	sess.status = "in_progress"
	s.emit(sess, eventJSON{Type: "agent.session.in_progress", Session: sess.json()})
	for _, p := range pending {
		if p.approval {
			continue // answered by a decision, not an output item
		}
		it := itemJSON{ID: s.newID("fco"), Type: "function_call_output", TurnID: t.id, CallID: p.callID, Status: "completed"}
		if p.result.Failed {
			msg := p.result.Error
			it.Error, it.Status = &msg, "failed"
		} else {
			it.Output = p.output
		}
		index := t.index
		t.index++
		item := it.json()
		s.itemEvent(sess, t, "agent.session.turn.item.added", index, item)
		s.addItem(sess, t, item)
	}
	s.play(sess)
}

// endTurn ends the active turn with status ("completed", "failed" or
// "cancelled") and returns the session to idle.
func (s *Server) endTurn(sess *session, status string, terr *turnErrorJSON) {
	t := sess.cur
	if terr != nil {
		// The service says what failed in an error event first.
		s.emit(sess, eventJSON{Type: "error", SessionID: sess.id, Error: &errorJSON{Code: terr.Code, Message: terr.Message, Type: "server_error"}})
	}
	t.status = status
	t.err = terr
	t.completed = s.now()
	sess.cur = nil
	sess.pending = nil
	sess.waitEnv = false
	typ := "agent.session.turn." + status
	ev := eventJSON{Type: typ, SessionID: sess.id, TurnID: t.id, Turn: t.json(sess)}
	if t.usage != (Usage{}) {
		ev.Usage = t.usage.json()
	}
	s.emit(sess, ev)
	sess.status = "idle"
	sess.active = s.now()
	s.emitEnd(sess, eventJSON{Type: "agent.session.idle", Session: sess.json()})
}

// pauseOnBudget pauses the session as the service does when its spending
// limit is reached: status budget_reached, an agent.session.budget_reached
// event, and the turn left as it was (a script fails a step with code
// "budget_reached" to get it).
func (s *Server) pauseOnBudget(sess *session) {
	sess.status = "budget_reached"
	sess.active = s.now()
	s.emitEnd(sess, eventJSON{Type: "agent.session.budget_reached", Session: sess.json()})
}

// cancel cancels the active turn, if any: the model is told its pending
// calls failed, so that it can take the next turn.
func (s *Server) cancel(sess *session) {
	s.received = append(s.received, coretest.Received{Kind: "cancel", Thread: sess.id})
	if sess.cur == nil {
		return
	}
	if sess.model.Waiting() {
		results := make([]coretest.Delivered, len(sess.model.Pending()))
		for i, c := range sess.model.Pending() {
			results[i] = coretest.Delivered{Name: c.Name, Failed: true, Error: "cancelled"}
			if i < len(sess.pending) {
				results[i].CallID = sess.pending[i].callID
			}
		}
		_ = sess.model.Deliver(results)
	}
	s.endTurn(sess, "cancelled", nil)
}
