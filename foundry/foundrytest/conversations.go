package foundrytest

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// conversation is a conversation of the fake, with the model playing the
// script for it.
type conversation struct {
	id       string
	seq      int
	created  int64
	metadata map[string]string
	items    []*item
	deleted  bool

	model      *coretest.Model
	unbegun    []string // user messages the model has not begun a turn with
	unrecorded []*item  // user messages added outside a response, not yet in Received
	modelCalls []string // call ids of the model's pending calls
	lastText   string   // the model's last answer

	// Indexes of items, kept by append so that a request costs the same
	// however long the conversation is.
	open     []*item          // function_call items no output answers, in order
	answered map[string]bool  // call ids some function_call_output answers
	calls    map[string]bool  // call ids of the function_call items
	outputs  map[string]*item // the last function_call_output of each call id
}

// append adds items to c and updates its indexes.
func (c *conversation) append(items ...*item) {
	if c.answered == nil {
		c.answered, c.calls, c.outputs = map[string]bool{}, map[string]bool{}, map[string]*item{}
	}
	c.items = append(c.items, items...)
	for _, it := range items {
		switch {
		case it.isCall():
			c.calls[it.CallID] = true
			if !c.answered[it.CallID] {
				c.open = append(c.open, it)
			}
		case it.isAnswer():
			c.outputs[it.CallID] = it
			if !c.answered[it.CallID] {
				c.answered[it.CallID] = true
				c.open = slices.DeleteFunc(c.open, func(call *item) bool { return call.CallID == it.CallID })
			}
		}
	}
}

func (c *conversation) json() map[string]any {
	md := c.metadata
	if md == nil {
		md = map[string]string{}
	}
	return map[string]any{"id": c.id, "object": "conversation", "created_at": c.created, "metadata": md}
}

// pending returns the function_call items of c that no
// function_call_output of c answers, in order.
func (c *conversation) pending() []*item {
	return slices.Clone(c.open)
}

// takeInput checks input items against the calls waiting for an output
// and returns the new items they make (user messages and function outputs,
// with ids) and the user texts. Outputs must answer waiting calls, each
// once; with complete set, every waiting call must be answered. Echoed
// function_call items of known calls are ignored.
func (s *Server) takeInput(waiting []*item, known func(callID string) bool, in []inputItem, complete bool) (items []*item, texts []string, e *apiError) {
	open := map[string]*item{}
	for _, c := range waiting {
		open[c.CallID] = c
	}
	for _, it := range in {
		switch it.Type {
		case "message":
			text, _ := messageText(it.Content)
			role := it.Role
			items = append(items, &item{Type: "message", ID: s.newID("msg_"), Status: "completed", Role: role, Text: text, Parts: fakeapi.InputParts(it.Content)})
			if role == "user" {
				texts = append(texts, text)
			}
		case "function_call_output":
			// An MCP approval request is answered by an
			// mcp_approval_response only: the service knows no function
			// call of its id.
			call := open[it.CallID]
			if call == nil || call.Type != "function_call" {
				return nil, nil, noToolCall(it.CallID)
			}
			delete(open, it.CallID)
			items = append(items, &item{Type: "function_call_output", ID: s.newID("fco_"), Status: "completed", CallID: it.CallID, Name: call.tool(), Namespace: it.Namespace, Output: it.Output})
		case "mcp_approval_response":
			call := open[it.ApprovalRequestID]
			if call == nil || call.Type != "mcp_approval_request" {
				return nil, nil, badRequest("invalid_request", "input", "No approval request found with id %s.", it.ApprovalRequestID)
			}
			delete(open, it.ApprovalRequestID)
			reason := ""
			if it.Reason != nil {
				reason = *it.Reason
			}
			items = append(items, &item{Type: "mcp_approval_response", ID: s.newID("mcpr_"), CallID: it.ApprovalRequestID, Name: call.Name, Approve: *it.Approve, Reason: reason})
		case "function_call":
			if known == nil || !known(it.CallID) {
				return nil, nil, noToolCall(it.CallID)
			}
		}
	}
	if complete {
		for _, c := range waiting {
			if open[c.CallID] != nil && c.Type != "oauth_consent_request" { // it needs no answer
				return nil, nil, noToolOutput(c.CallID)
			}
		}
	}
	return items, texts, nil
}

// consentAnswers returns the fake's record of how the client went on from
// the OAuth consent requests among waiting, with the new items of its
// request: the person signed in, unless the request carries a developer
// (or system) message, which the model reads as why not.
func consentAnswers(waiting, items []*item) map[string]*item {
	var why []string
	for _, it := range items {
		if it.Type == "message" && (it.Role == "developer" || it.Role == "system") {
			why = append(why, it.Text)
		}
	}
	out := map[string]*item{}
	for _, c := range waiting {
		if c.Type == "oauth_consent_request" {
			out[c.CallID] = &item{Type: "consent", CallID: c.CallID, Name: c.Name, Approve: len(why) == 0, Reason: strings.Join(why, "\n")}
		}
	}
	return out
}

// goOn answers c's consent requests: a response requested after one goes
// on from it, whatever its input (see consentAnswers).
func (c *conversation) goOn(answers map[string]*item) {
	for id, a := range answers {
		c.outputs[id] = a
		c.answered[id] = true
		c.open = slices.DeleteFunc(c.open, func(call *item) bool { return call.CallID == id })
	}
}

// record notes what a thread received, in neutral terms, with the name of
// the response format asked for, if any.
func (s *Server) record(thread string, items []*item, format string) {
	var results []coretest.Delivered
	for _, it := range items {
		switch {
		case it.Type == "message" && it.Role == "user":
			s.received = append(s.received, coretest.Received{Kind: "input", Thread: thread, Input: it.Text, Parts: it.Parts, Format: format})
		case it.isAnswer():
			results = append(results, it.delivered(it.Name))
		}
	}
	if len(results) > 0 {
		s.received = append(s.received, coretest.Received{Kind: "results", Thread: thread, Results: results, Format: format})
	}
}

// add appends new items to c, queues user texts for the model and hands
// the model its results once all its calls are answered.
func (s *Server) add(c *conversation, items []*item, texts []string, r *request) {
	c.append(items...)
	if r == nil {
		// Added to the conversation outside a response: a user message
		// reaches the model with the next response, and is recorded then,
		// with the format that response asks for.
		var now []*item
		for _, it := range items {
			if it.Type == "message" && it.Role == "user" {
				c.unrecorded = append(c.unrecorded, it)
			} else {
				now = append(now, it)
			}
		}
		s.record(c.id, now, "")
	} else {
		s.record(c.id, append(c.unrecorded, items...), r.format.name)
		c.unrecorded = nil
	}
	c.unbegun = append(c.unbegun, texts...)
	if len(c.modelCalls) == 0 {
		return
	}
	results := make([]coretest.Delivered, 0, len(c.modelCalls))
	for _, id := range c.modelCalls {
		o := c.outputs[id]
		if o == nil {
			return
		}
		results = append(results, o.delivered(o.Name))
	}
	c.model.Deliver(results)
	c.modelCalls = nil
}

func (s *Server) conversation(id string) (*conversation, *apiError) {
	c := s.conversations[id]
	if c == nil || c.deleted {
		return nil, notFound("Conversation with id '%s' not found.", id)
	}
	return c, nil
}

func (s *Server) createConversation(ex *exchange, _ []string, _ *Fault) (any, error) {
	var req struct {
		Items    json.RawMessage `json:"items"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(ex.body, &req); err != nil {
		return nil, schemaError("/")
	}
	metadata, _, refusal := fakeapi.Metadata(req.Metadata)
	if refusal != "" {
		return nil, badRequest("invalid_request", "metadata", "%s", refusal)
	}
	in, e := parseInput(req.Items)
	if e != nil {
		return nil, e
	}
	if len(in) > 20 {
		return nil, badRequest("invalid_request", "items", "You may add up to 20 items at a time.")
	}
	c := &conversation{id: s.newID("conv_"), seq: len(s.conversations), created: now(), metadata: metadata, model: s.script.NewModel()}
	items, texts, e := s.takeInput(nil, nil, in, true)
	if e != nil {
		return nil, e
	}
	s.conversations[c.id] = c
	s.add(c, items, texts, nil)
	return c.json(), nil
}

func (s *Server) getConversation(_ *exchange, args []string, _ *Fault) (any, error) {
	c, e := s.conversation(args[0])
	if e != nil {
		return nil, e
	}
	return c.json(), nil
}

func (s *Server) deleteConversation(_ *exchange, args []string, _ *Fault) (any, error) {
	c, e := s.conversation(args[0])
	if e != nil {
		return nil, e
	}
	c.deleted = true
	return map[string]any{"id": c.id, "object": "conversation.deleted", "deleted": true}, nil
}

func (s *Server) createItems(ex *exchange, args []string, _ *Fault) (any, error) {
	c, e := s.conversation(args[0])
	if e != nil {
		return nil, e
	}
	var req struct {
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(ex.body, &req); err != nil {
		return nil, schemaError("/")
	}
	in, e := parseInput(req.Items)
	if e != nil {
		return nil, e
	}
	if len(in) == 0 || len(in) > 20 {
		return nil, badRequest("invalid_request", "items", "Add between 1 and 20 items at a time.")
	}
	items, texts, e := s.takeInput(c.pending(), c.knows, in, false)
	if e != nil {
		return nil, e
	}
	s.add(c, items, texts, nil)
	return itemList(items, false), nil
}

// knows reports whether c holds the call callID.
func (c *conversation) knows(callID string) bool {
	return c.calls[callID]
}

func itemID(it *item) string { return it.ID }

func itemList(items []*item, more bool) map[string]any {
	if items == nil {
		items = []*item{}
	}
	return fakeapi.List(items, more, itemID, items)
}

func (s *Server) listItems(ex *exchange, args []string, _ *Fault) (any, error) {
	c, e := s.conversation(args[0])
	if e != nil {
		return nil, e
	}
	items, more, e := pageOf(c.items, itemID, ex)
	if e != nil {
		return nil, e
	}
	return itemList(items, more), nil
}
