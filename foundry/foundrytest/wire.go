package foundrytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

// item is a conversation or response item as the fake stores it. It
// marshals to the OpenAI item shape of its type.
type item struct {
	Type   string
	ID     string
	Status string
	// message
	Role  string
	Text  string        // the text of a message (input_text or output_text)
	Parts []driver.Part // the images and files of a message
	// Phase is an assistant message's: "commentary" for the model's
	// preamble, "final_answer" for its answer, "" for a model that
	// writes no phases (openai-go v3.105 ResponseOutputMessage.Phase).
	Phase string
	// Summary is the summary text of a reasoning item.
	Summary string
	// function_call and function_call_output
	CallID    string
	Name      string
	Arguments string
	// Namespace is the namespace of a function call's function, if it is
	// in one (openai-go v3.105 ResponseFunctionToolCall.Namespace), and
	// what a function_call_output said of it.
	Namespace string
	Output    json.RawMessage // a JSON string or a content array
	// ResponseID names the response that produced or received the item
	// (a Foundry extension of the item shape).
	ResponseID string
	// mcp_approval_request (CallID is its id), mcp_approval_response and
	// mcp_call (CallID is the request's id; a call's Output is its output
	// as a JSON string).
	ServerLabel string
	Approve     bool
	Reason      string
	// Extra holds the members of an item whose shape the fake writes
	// from a map (an OAuth consent request, the items the client is to
	// run other than function calls: see Call.Item of package coretest),
	// beside type, id, status and response_id.
	Extra map[string]any
}

// tool returns the name of the tool a function call calls, in neutral
// terms: its name, after its namespace and a dot if it has one (as in
// "crm.lookup").
func (it *item) tool() string {
	if it.Namespace == "" {
		return it.Name
	}
	return it.Namespace + "." + it.Name
}

// isCall reports whether the item waits for the client's answer: a
// function call, an MCP approval request, or an OAuth consent request
// (answered by the client's asking the service to go on: see
// conversation.goOn).
func (it *item) isCall() bool {
	return it.Type == "function_call" || it.Type == "mcp_approval_request" || it.Type == "oauth_consent_request"
}

// isAnswer reports whether the item answers a call: a function output, or
// an MCP approval response.
func (it *item) isAnswer() bool {
	return it.Type == "function_call_output" || it.Type == "mcp_approval_response"
}

// delivered returns an answer in the model's neutral terms: an approval
// is the output "approved", a denial a failure with its reason.
func (it *item) delivered(name string) coretest.Delivered {
	switch {
	case it.Type == "consent" && it.Approve:
		// The fake's record of a consent request the client went on from.
		return coretest.Delivered{CallID: it.CallID, Name: name, Output: "consented"}
	case it.Type == "consent":
		return coretest.Delivered{CallID: it.CallID, Name: name, Failed: true, Error: it.Reason}
	case it.Type != "mcp_approval_response":
		return coretest.Delivered{CallID: it.CallID, Name: name, Output: it.outputText()}
	case it.Approve:
		return coretest.Delivered{CallID: it.CallID, Name: name, Output: "approved"}
	}
	return coretest.Delivered{CallID: it.CallID, Name: name, Failed: true, Error: it.Reason}
}

// outputText returns the output of a function_call_output as text: the
// string, or the content array as JSON.
func (it *item) outputText() string {
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return s
	}
	return string(it.Output)
}

// inputItem is an item of a request's input (or of a conversation's
// items), decoded loosely to check its shape.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Name    string          `json:"name"`
	Args    json.RawMessage `json:"arguments"` // a function call's: a JSON string
	// Namespace is a function call's namespace, or the one a function
	// output names.
	Namespace string `json:"namespace"`

	ID string `json:"id"`
	// mcp_approval_request and mcp_call
	ServerLabel string `json:"server_label"`
	// mcp_approval_response
	ApprovalRequestID string  `json:"approval_request_id"`
	Approve           *bool   `json:"approve"`
	Reason            *string `json:"reason"`
}

// parseInput decodes a request's input: a string (one user message) or an
// array of items. Only the items a client may send are accepted: messages,
// function_call_output items, and function_call items the service made.
func parseInput(raw json.RawMessage) ([]inputItem, *apiError) { return parseInputOf(raw, false) }

// parseInputOf is parseInput; with resent set (a plain Responses request,
// which may resend a history the service did not store), it also accepts
// the model's reasoning items, MCP approval requests and the service's MCP
// calls.
func parseInputOf(raw json.RawMessage, resent bool) ([]inputItem, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, schemaError("input")
		}
		return []inputItem{{Type: "message", Role: "user", Content: raw}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, schemaError("input")
	}
	for i := range items {
		it := &items[i]
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			if _, err := messageText(it.Content); err != nil || it.Role == "" {
				return nil, schemaError(fmt.Sprintf("input[%d]", i))
			}
		case "function_call_output":
			if it.CallID == "" || !validOutput(it.Output) {
				return nil, schemaError(fmt.Sprintf("input[%d]", i))
			}
		case "function_call":
			var args string
			if it.CallID == "" || json.Unmarshal(it.Args, &args) != nil {
				return nil, schemaError(fmt.Sprintf("input[%d]", i))
			}
		case "mcp_approval_response":
			if it.ApprovalRequestID == "" || it.Approve == nil {
				return nil, schemaError(fmt.Sprintf("input[%d]", i))
			}
		case "reasoning", "mcp_approval_request", "mcp_call", "tool_search_call", "tool_search_output":
			if !resent || it.ID == "" {
				return nil, schemaError(fmt.Sprintf("input[%d]", i))
			}
		default:
			// Server-side items (reasoning, mcp_list_tools, web_search_call…)
			// sent back as input are refused, as Foundry does.
			return nil, schemaError("/")
		}
	}
	return items, nil
}

// messageText returns the text of a message's content: a string, or the
// text parts of a content array joined by newlines.
func messageText(content json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", err
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		case "input_image", "input_file":
		default:
			return "", fmt.Errorf("unknown content part %q", p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// validOutput reports whether a function_call_output's output is a string
// or an array of input content parts.
func validOutput(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return true
	}
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return false
	}
	for _, p := range parts {
		switch p.Type {
		case "input_text", "input_image", "input_file":
		default:
			return false
		}
	}
	return true
}

// usageJSON is the token usage u as a response carries it.
func usageJSON(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
}

// Usage counts tokens, as the fake reports them.
type Usage struct {
	InputTokens, OutputTokens int64
}

// DefaultUsage is the usage of every response when Options.Usage is zero,
// as in package openaitest.
var DefaultUsage = Usage{InputTokens: 10, OutputTokens: 5}
