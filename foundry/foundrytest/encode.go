package foundrytest

import "encoding/json"

// The structs below give the JSON of a response and of an item the shape
// and key order (sorted, as encoding/json writes maps) of the maps that
// response.json and the streamed events use, at a fraction of the cost:
// TestWireShapes checks that both encode alike.

// responseWire is a response as JSON answers (not events) carry it.
type responseWire struct {
	AgentReference     json.RawMessage `json:"agent_reference"`
	Background         bool            `json:"background"`
	CompletedAt        *int64          `json:"completed_at,omitempty"`
	Conversation       *idWire         `json:"conversation"`
	CreatedAt          int64           `json:"created_at"`
	Error              *errorWire      `json:"error"`
	ID                 string          `json:"id"`
	IncompleteDetails  *struct{}       `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	Metadata           struct{}        `json:"metadata"`
	Model              string          `json:"model"`
	Object             string          `json:"object"`
	Output             []*item         `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Status             string          `json:"status"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              usageWire       `json:"usage"`
}

type idWire struct {
	ID string `json:"id"`
}

type errorWire struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type usageWire struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// wire returns r as JSON answers carry it: what r.json() encodes to.
func (r *response) wire() *responseWire {
	w := &responseWire{
		ID: r.id, CreatedAt: r.created, Model: r.model, Object: "response", Output: r.output,
		ParallelToolCalls: true, Status: r.status, Store: r.store, Temperature: 1, ToolChoice: "auto",
		Tools: json.RawMessage(`[]`), TopP: 1, Truncation: "disabled",
		Usage: usageWire{InputTokens: r.usage.InputTokens, OutputTokens: r.usage.OutputTokens, TotalTokens: r.usage.InputTokens + r.usage.OutputTokens},
	}
	if len(r.tools) > 0 {
		w.Tools = r.tools
	}
	w.Text = r.textJSON()
	if w.Output == nil {
		w.Output = []*item{}
	}
	if r.status == "failed" {
		w.Error = &errorWire{Code: r.errCode, Message: r.errMessage}
	}
	if r.conversation != "" {
		w.Conversation = &idWire{ID: r.conversation}
	}
	if r.previous != "" {
		w.PreviousResponseID = &r.previous
	}
	if len(r.agentRef) > 0 {
		w.AgentReference = r.agentRef
	}
	if r.instructions != "" {
		w.Instructions = &r.instructions
	}
	if r.status == "completed" {
		w.CompletedAt = &r.created
	}
	return w
}

// itemWire is an item's JSON (see item.MarshalJSON).
type itemWire struct {
	Arguments  *string          `json:"arguments,omitempty"`
	CallID     *string          `json:"call_id,omitempty"`
	Content    []contentWire    `json:"content,omitempty"`
	ID         string           `json:"id"`
	Name       *string          `json:"name,omitempty"`
	Namespace  string           `json:"namespace,omitempty"`
	Output     *json.RawMessage `json:"output,omitempty"`
	Phase      string           `json:"phase,omitempty"`
	ResponseID string           `json:"response_id,omitempty"`
	Role       *string          `json:"role,omitempty"`
	Status     string           `json:"status,omitempty"`
	Summary    *[]contentWire   `json:"summary,omitempty"`
	Type       string           `json:"type"`
	// MCP approvals.
	ServerLabel       *string `json:"server_label,omitempty"`
	ApprovalRequestID *string `json:"approval_request_id,omitempty"`
	Approve           *bool   `json:"approve,omitempty"`
	Reason            *string `json:"reason,omitempty"`
	// mcp_call: its error (null).
	Error *json.RawMessage `json:"error,omitempty"`
	// Tool search: the call's arguments (an object) and the tools loaded.
	Execution  *string          `json:"execution,omitempty"`
	SearchArgs *json.RawMessage `json:"-"`
	Tools      *json.RawMessage `json:"tools,omitempty"`
}

// MarshalJSON writes a tool search call's arguments as an object, the
// others' as a string.
func (w itemWire) MarshalJSON() ([]byte, error) {
	type plain itemWire
	b, err := json.Marshal(plain(w))
	if err != nil || w.SearchArgs == nil {
		return b, err
	}
	return append(append(b[:len(b)-1], `,"arguments":`...), append(*w.SearchArgs, '}')...), nil
}

type contentWire struct {
	Annotations *[]struct{} `json:"annotations,omitempty"`
	Logprobs    *[]struct{} `json:"logprobs,omitempty"`
	Text        string      `json:"text"`
	Type        string      `json:"type"`
}

// MarshalJSON writes the OpenAI item shape of the item's type (and, for
// an item with Extra, its members).
func (it *item) MarshalJSON() ([]byte, error) {
	if it.Extra != nil {
		m := map[string]any{"type": it.Type, "id": it.ID}
		for k, v := range it.Extra {
			m[k] = v
		}
		if it.Status != "" {
			m["status"] = it.Status
		}
		if it.ResponseID != "" {
			m["response_id"] = it.ResponseID
		}
		return json.Marshal(m)
	}
	w := itemWire{ID: it.ID, ResponseID: it.ResponseID, Status: it.Status, Type: it.Type}
	switch it.Type {
	case "message":
		w.Role, w.Phase = &it.Role, it.Phase
		if it.Role == "assistant" {
			empty := []struct{}{}
			w.Content = []contentWire{{Annotations: &empty, Logprobs: &empty, Text: it.Text, Type: "output_text"}}
		} else {
			w.Content = []contentWire{{Text: it.Text, Type: "input_text"}}
		}
	case "function_call":
		w.CallID, w.Name, w.Arguments, w.Namespace = &it.CallID, &it.Name, &it.Arguments, it.Namespace
	case "function_call_output":
		w.CallID, w.Output = &it.CallID, &it.Output
	case "mcp_approval_request":
		w.Name, w.Arguments, w.ServerLabel = &it.Name, &it.Arguments, &it.ServerLabel
	case "mcp_call":
		null := json.RawMessage("null")
		w.ApprovalRequestID, w.Name, w.Arguments, w.ServerLabel, w.Output, w.Error = &it.CallID, &it.Name, &it.Arguments, &it.ServerLabel, &it.Output, &null
	case "mcp_approval_response":
		w.ApprovalRequestID, w.Approve = &it.CallID, &it.Approve
		if it.Reason != "" {
			w.Reason = &it.Reason
		}
	case "tool_search_call":
		args := json.RawMessage(it.Arguments)
		exec := "server"
		w.CallID, w.Execution, w.SearchArgs = &it.CallID, &exec, &args
	case "tool_search_output":
		exec := "server"
		w.CallID, w.Execution, w.Tools = &it.CallID, &exec, &it.Output
	case "reasoning":
		w.Summary = &[]contentWire{}
		if it.Summary != "" {
			w.Summary = &[]contentWire{{Type: "summary_text", Text: it.Summary}}
		}
	}
	return json.Marshal(w)
}
