package openaitest

import "strconv"

// Subagents describes what a session's agent delegates to subagents
// before each of its answers (see [Options].Subagents), as a multi-agent
// session does. The shapes are openai-go's (v3.105, betaagent.go: the
// Subagent object and the agent.session.subagent.created, .active and
// .closed events; the items create_subagent_call,
// send_subagent_input_call, resume_subagent_call,
// wait_for_subagents_call, interrupt_subagent_call, close_subagent_call
// and agent_message; betaagentsessionturn.go: a subagent's turns, whose
// subagent_id names it).
//
// For each subagent, in order, the agent's (root) turn shows a
// create_subagent_call and agent.session.subagent.created; then each turn
// of the subagent: before the second, the agent closes the subagent
// (close_subagent_call, agent.session.subagent.closed) and resumes it
// (resume_subagent_call, agent.session.subagent.active), and before every
// turn after the first it sends it input (send_subagent_input_call); the
// subagent's turn (its own turn.created, an assistant message whose
// phase is final_answer, turn.completed, listed by GET .../turns after
// the root turn, newer than it), then the subagent's answer sent back to
// the agent (an agent_message in the root turn). Last, the agent waits for
// it (wait_for_subagents_call), interrupts it (interrupt_subagent_call)
// and closes it (close_subagent_call, agent.session.subagent.closed). The
// subagents' items are theirs: GET .../items (the root agent's) lists
// only the root turn's.
type Subagents struct {
	// Count is how many subagents the agent creates before each answer
	// (at least 1).
	Count int
	// Turns is how many turns each subagent runs (at least 1).
	Turns int
	// Text is what each subagent answers in each of its turns, and sends
	// back to the agent. It is never part of the session's answer.
	Text string
}

// subagentJSON is a subagent (openai-go's Subagent, betaagent.go).
type subagentJSON struct {
	ID            string        `json:"id"`
	Object        string        `json:"object"`
	SessionID     string        `json:"session_id"`
	ParentAgentID string        `json:"parent_agent_id"`
	Name          string        `json:"name"`
	Instructions  []contentJSON `json:"instructions"`
	Status        string        `json:"status"`
	OpenedAt      int64         `json:"opened_at"`
	ClosedAt      *int64        `json:"closed_at"`
}

// subagentItemJSON is an item of the multi-agent kinds (openai-go's
// AgentCreateSubagentCallItem, AgentSendSubagentInputCallItem,
// AgentResumeSubagentCallItem, AgentWaitForSubagentsCallItem,
// AgentInterruptSubagentCallItem, AgentCloseSubagentCallItem and
// AgentSessionItemAgentMessage, betaagent.go): each has only its own
// members.
type subagentItemJSON struct {
	ID                string        `json:"id"`
	Type              string        `json:"type"`
	TurnID            string        `json:"turn_id"`
	AgentID           string        `json:"agent_id,omitempty"`
	SenderAgentID     string        `json:"sender_agent_id,omitempty"`
	RecipientAgentID  string        `json:"recipient_agent_id,omitempty"`
	RecipientAgentIDs []string      `json:"recipient_agent_ids,omitempty"`
	Content           []contentJSON `json:"content,omitempty"`
	Model             string        `json:"model,omitempty"`
	ReasoningEffort   string        `json:"reasoning_effort,omitempty"`
	Status            string        `json:"status,omitempty"` // agent_message has none
}

// delegate plays Options.Subagents on the active turn t, before its
// answer. The caller holds s.mu.
func (s *Server) delegate(sess *session, t *turn) {
	sa := s.opts.Subagents
	root := sess.agent.id
	for i := range max(sa.Count, 1) {
		task := "Subtask " + strconv.Itoa(i+1) + "."
		now := s.now()
		sub := &subagentJSON{ID: s.newID("subagent"), Object: "agent.session.subagent", SessionID: sess.id, ParentAgentID: root,
			Name: "helper-" + strconv.Itoa(i+1), Instructions: []contentJSON{{Type: "output_text", Text: task}}, Status: "active", OpenedAt: now}
		s.rootItem(sess, t, true, subagentItemJSON{Type: "create_subagent_call", AgentID: root,
			Content: []contentJSON{{Type: "output_text", Text: task}}, Model: sess.agent.model, ReasoningEffort: "medium"})
		s.subagentEvent(sess, "agent.session.subagent.created", sub)
		to := func(typ string) subagentItemJSON {
			return subagentItemJSON{Type: typ, SenderAgentID: root, RecipientAgentID: sub.ID}
		}
		for j := range max(sa.Turns, 1) {
			if j == 1 {
				s.closeSubagent(sess, t, sub)
				s.rootItem(sess, t, true, to("resume_subagent_call"))
				sub.Status, sub.ClosedAt = "active", nil
				s.subagentEvent(sess, "agent.session.subagent.active", sub)
			}
			if j > 0 {
				in := to("send_subagent_input_call")
				in.Content = []contentJSON{{Type: "output_text", Text: "Go on."}}
				s.rootItem(sess, t, true, in)
			}
			s.subagentTurn(sess, sub.ID, sa.Text)
			back := subagentItemJSON{Type: "agent_message", SenderAgentID: sub.ID, RecipientAgentID: root,
				Content: []contentJSON{{Type: "output_text", Text: sa.Text}}}
			s.rootItem(sess, t, false, back)
		}
		wait := to("wait_for_subagents_call")
		wait.RecipientAgentID, wait.RecipientAgentIDs = "", []string{sub.ID}
		s.rootItem(sess, t, true, wait)
		s.rootItem(sess, t, true, to("interrupt_subagent_call"))
		s.closeSubagent(sess, t, sub)
	}
}

// closeSubagent closes sub: a close_subagent_call, then
// agent.session.subagent.closed.
func (s *Server) closeSubagent(sess *session, t *turn, sub *subagentJSON) {
	s.rootItem(sess, t, true, subagentItemJSON{Type: "close_subagent_call", SenderAgentID: sess.agent.id, RecipientAgentID: sub.ID})
	closed := s.now()
	sub.Status, sub.ClosedAt = "closed", &closed
	s.subagentEvent(sess, "agent.session.subagent.closed", sub)
}

// rootItem adds a multi-agent item to the root turn t: turn.item.added,
// and for a call (not an agent_message, which turn.item.done never
// carries: openai-go's AgentOutputItemUnion has no such variant)
// turn.item.done once completed.
func (s *Server) rootItem(sess *session, t *turn, call bool, it subagentItemJSON) {
	it.ID, it.TurnID = s.newID("sa"), t.id
	index := t.index
	t.index++
	if !call {
		item := mustJSON(it)
		s.itemEvent(sess, t, "agent.session.turn.item.added", index, item)
		s.addItem(sess, t, item)
		return
	}
	it.Status = "in_progress"
	s.itemEvent(sess, t, "agent.session.turn.item.added", index, mustJSON(it))
	it.Status = "completed"
	done := mustJSON(it)
	s.itemEvent(sess, t, "agent.session.turn.item.done", index, done)
	s.addItem(sess, t, done)
}

// subagentEvent emits an agent.session.subagent.* event about sub (it has
// no session_id of its own: the subagent carries it).
func (s *Server) subagentEvent(sess *session, typ string, sub *subagentJSON) {
	s.emit(sess, eventJSON{Type: typ, Subagent: mustJSON(sub)})
}

// subagentTurn plays one turn of subagent id: turn.created, its answer
// text (a final_answer message, as any agent's), turn.completed. The
// session stays as it is (the root turn goes on).
func (s *Server) subagentTurn(sess *session, id, text string) {
	now := s.now()
	st := &turn{id: s.newID("turn"), subagent: id, status: "in_progress", created: now}
	sess.turns = append(sess.turns, st)
	s.emit(sess, eventJSON{Type: "agent.session.turn.created", SessionID: sess.id, TurnID: st.id, Turn: st.json(sess)})
	s.message(sess, st, "final_answer", text)
	st.status, st.completed = "completed", s.now()
	s.emit(sess, eventJSON{Type: "agent.session.turn.completed", SessionID: sess.id, TurnID: st.id, Turn: st.json(sess)})
}
