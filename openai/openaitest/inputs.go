package openaitest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

type inputEvent struct {
	Type    string          `json:"type"`
	Input   json.RawMessage `json:"input"`
	TurnID  *string         `json:"turn_id"`
	CallID  *string         `json:"call_id"`
	Success *bool           `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
	// mcp_approval_request_result, computer_use_approval_request_result
	RequestID *string `json:"request_id"`
	Response  *struct {
		Type     string `json:"type"`
		Decision string `json:"decision"`
		// browser_authentication: submit (with fields) or cancel
		Action string `json:"action"`
		Fields []struct {
			FieldID string `json:"field_id"`
			Value   string `json:"value"`
		} `json:"fields"`
	} `json:"response"`
}

// postEvents handles POST agents/sessions/{id}/events. The events of one
// request are checked together before any is applied: a request naming a
// call that is not pending is refused whole. With f.Refuse, a request
// carrying tool results is accepted (202) and not applied (see
// Fault.Refuse).
func (s *Server) postEvents(id string, f *Fault) func(req *Request) reply {
	return func(req *Request) reply {
		bad := func(code, msg string) reply {
			return errorReply(http.StatusBadRequest, "invalid_request_error", code, msg)
		}
		var body struct {
			Events []inputEvent `json:"events"`
		}
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return bad("invalid_json", "We could not parse the JSON body of your request.")
		}
		if len(body.Events) == 0 {
			return bad("missing_required_parameter", "Missing required parameter: 'events'.")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sess := s.sessions[id]
		if sess == nil {
			return noSession(id)
		}
		// Check.
		answered := map[*pendingCall]bool{}
		messages := 0
		for i, ev := range body.Events {
			switch ev.Type {
			case "agent.session.input.message":
				messages++
				if _, ok := inputText(ev.Input); !ok {
					return bad("missing_required_parameter", "Missing required parameter: 'events["+strconv.Itoa(i)+"].input'.")
				}
				if messages > 1 || sess.cur != nil {
					return bad("active_turn_not_steerable", "The session already has an active turn; wait for it to finish or cancel it.")
				}
			case "agent.session.input.tool_result":
				if ev.CallID == nil || ev.TurnID == nil || ev.Success == nil {
					return bad("missing_required_parameter", "Missing required parameters: 'turn_id', 'call_id' and 'success' are required for a tool result.")
				}
				p := sess.pendingCall(*ev.TurnID, *ev.CallID)
				if p == nil || answered[p] {
					return bad("invalid_request_error", "Unknown pending tool call: "+*ev.CallID)
				}
				answered[p] = true
			case "agent.session.input.mcp_approval_request_result", "agent.session.input.computer_use_approval_request_result":
				if ev.RequestID == nil || ev.Response == nil {
					return bad("missing_required_parameter", "Missing required parameters: 'request_id' and 'response' are required for an approval result.")
				}
				computer := ev.Type == "agent.session.input.computer_use_approval_request_result"
				p := sess.pendingApproval(*ev.RequestID, computer)
				if p == nil || answered[p] {
					return bad("invalid_request_error", "Unknown pending approval request: "+*ev.RequestID)
				}
				if refusal := checkResponse(p, computer, ev.Response.Type, ev.Response.Decision, ev.Response.Action, len(ev.Response.Fields)); refusal != "" {
					return bad("invalid_value", refusal)
				}
				if p.signIn && ev.Response.Action == "submit" {
					given := map[string]bool{}
					for _, f := range ev.Response.Fields {
						if f.Value != "" {
							given[f.FieldID] = true
						}
					}
					for _, f := range signInFields {
						if !given[f["id"].(string)] {
							return bad("invalid_value", "Missing a value for the required field '"+f["id"].(string)+"'.")
						}
					}
				}
				answered[p] = true
			case "agent.session.input.cancel":
			default:
				return bad("invalid_value", "Invalid value for 'events["+strconv.Itoa(i)+"].type': '"+ev.Type+"'.")
			}
		}
		if f != nil && f.Refuse != 0 && s.refuse(sess, body.Events, f.Refuse) {
			return reply{status: http.StatusAccepted}
		}
		// Apply.
		var results []coretest.Delivered
		for _, ev := range body.Events {
			switch ev.Type {
			case "agent.session.input.message":
				text, _ := inputText(ev.Input)
				if err := sess.model.Begin(text); err != nil {
					return bad("invalid_value", err.Error())
				}
				s.startTurn(sess, text, fakeapi.InputParts(ev.Input))
			case "agent.session.input.tool_result":
				p := sess.pendingCall(*ev.TurnID, *ev.CallID)
				d := coretest.Delivered{CallID: p.callID, Name: p.name, Output: outputText(ev.Output), Failed: !*ev.Success}
				if ev.Error != nil {
					d.Error = *ev.Error
				}
				if d.Failed {
					d.Output = ""
				}
				p.result, p.output = &d, bytes.TrimSpace(ev.Output)
				if len(p.output) == 0 && !d.Failed {
					p.output = json.RawMessage(`null`)
				}
				results = append(results, d)
			case "agent.session.input.mcp_approval_request_result", "agent.session.input.computer_use_approval_request_result":
				p := sess.pendingApproval(*ev.RequestID, ev.Type == "agent.session.input.computer_use_approval_request_result")
				d := coretest.Delivered{CallID: p.callID, Name: p.name, Output: "approved"}
				switch {
				case p.signIn && ev.Response.Action == "submit":
					d.Output = "signed in" // the credentials go to the browser, not to the model
				case p.signIn:
					d.Output, d.Failed, d.Error = "", true, "cancelled"
				case ev.Response.Decision != "approve":
					// The event carries no reason.
					d.Output, d.Failed, d.Error = "", true, map[string]string{"deny": "denied", "cancel": "cancelled"}[ev.Response.Decision]
				}
				p.result, p.output = &d, mustJSON(d.Output)
				results = append(results, d)
			case "agent.session.input.cancel":
				s.cancel(sess)
			}
		}
		if len(results) > 0 {
			s.received = append(s.received, coretest.Received{Kind: "results", Thread: sess.id, Results: results, Format: sess.agent.formatName()})
			if sess.allAnswered() {
				s.deliver(sess)
			}
		}
		return reply{status: http.StatusAccepted}
	}
}

// refuse refuses, after their acceptance, the tool results among events
// (checked), as how says, and reports whether there were any: the calls
// stay pending. The caller holds s.mu.
func (s *Server) refuse(sess *session, events []inputEvent, how Refusal) bool {
	var calls []string
	for i, ev := range events {
		if ev.Type != "agent.session.input.tool_result" {
			continue
		}
		calls = append(calls, *ev.CallID)
		if how == ErrorEvent {
			param := "events[" + strconv.Itoa(i) + "].call_id"
			s.emit(sess, eventJSON{Type: "error", SessionID: sess.id, Error: &errorJSON{Code: "invalid_request", Param: &param, Type: "invalid_request_error",
				Message: "The tool result for call '" + *ev.CallID + "' was not applied: the result was rejected after it was accepted."}})
		}
	}
	if len(calls) == 0 {
		return false
	}
	if how == Relist {
		s.emit(sess, eventJSON{Type: "agent.session.requires_action", Session: sess.json()})
	}
	return true
}

// checkResponse returns why the response to approval request p is
// refused, or "": an MCP request or a request for access to an origin
// takes a decision (approve, deny or cancel); a sign-in request
// (browser_authentication) takes submit, with fields, or cancel.
func checkResponse(p *pendingCall, computer bool, typ, decision, action string, fields int) string {
	want := "browser_origin_access"
	if p.signIn {
		want = "browser_authentication"
	}
	switch {
	case computer && typ != want:
		return "Invalid value for 'response.type': '" + typ + "'; the request is for " + want + "."
	case p.signIn && action != "submit" && action != "cancel":
		return "Invalid value for 'response.action': '" + action + "'; want 'submit' or 'cancel'."
	case p.signIn && action == "submit" && fields == 0:
		return "Missing required parameter: 'response.fields'."
	case p.signIn:
		return ""
	}
	switch decision {
	case "approve", "deny", "cancel":
		return ""
	}
	return "Invalid value for 'response.decision': '" + decision + "'."
}

// pendingCall returns the pending call (turnID, callID) that has no result
// yet, or nil.
func (sess *session) pendingCall(turnID, callID string) *pendingCall {
	for _, p := range sess.pending {
		if p.turnID == turnID && p.callID == callID && p.result == nil {
			return p
		}
	}
	return nil
}

// pendingApproval returns the pending approval request requestID that has
// no answer yet, or nil: a computer-use request when computer is set, an
// MCP one otherwise.
func (sess *session) pendingApproval(requestID string, computer bool) *pendingCall {
	for _, p := range sess.pending {
		if p.approval && p.callID == requestID && p.result == nil && (p.origin != "") == computer {
			return p
		}
	}
	return nil
}

func (sess *session) allAnswered() bool {
	for _, p := range sess.pending {
		if p.result == nil {
			return false
		}
	}
	return len(sess.pending) > 0
}

// outputText renders a tool result's output as text for the model: a
// string as it is, null as "null", a content array as JSON.
func outputText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "":
		return ""
	case "null":
		return "null"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
