package openaitest

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The JSON shapes the server sends. Fields are listed in the order the
// service's fixtures use; pointers are null when unset.

type usageJSON struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func (u Usage) json() *usageJSON {
	return &usageJSON{
		InputTokens:  u.InputTokens,
		OutputTokens: u.OutputTokens,
		TotalTokens:  u.InputTokens + u.OutputTokens,
	}
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
}

type turnErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type turnJSON struct {
	ID                 string         `json:"id"`
	Object             string         `json:"object"`
	AgentID            string         `json:"agent_id"`
	SessionID          string         `json:"session_id"`
	SubagentID         *string        `json:"subagent_id"`
	Status             string         `json:"status"`
	CreatedAt          int64          `json:"created_at"`
	StartedAt          int64          `json:"started_at"`
	CompletedAt        *int64         `json:"completed_at"`
	Error              *turnErrorJSON `json:"error"`
	Usage              *usageJSON     `json:"usage"`
	PromptCacheOptions *struct{}      `json:"prompt_cache_options"`
}

type requiredActionJSON struct {
	Type      string          `json:"type"`
	TurnID    string          `json:"turn_id,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// mcp_approval_request, computer_use_approval_request
	RequestID string          `json:"request_id,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
	// environment_connection (which names no turn)
	EnvironmentID string `json:"environment_id,omitempty"`
}

type sessionJSON struct {
	ID                 string               `json:"id"`
	Object             string               `json:"object"`
	Status             string               `json:"status"`
	RequiredActions    []requiredActionJSON `json:"required_actions"`
	Agent              json.RawMessage      `json:"agent"`
	Environment        environmentJSON      `json:"environment"`
	Error              *string              `json:"error"`
	CreatedAt          int64                `json:"created_at"`
	LastActiveAt       int64                `json:"last_active_at"`
	Metadata           metadataJSON         `json:"metadata"`
	Usage              *usageJSON           `json:"usage"`
	VaultIDs           []string             `json:"vault_ids"`
	PromptCacheOptions *struct{}            `json:"prompt_cache_options"`
}

// environmentJSON is a session's environment: {"type":"none"}, or a
// self-hosted one.
type environmentJSON struct {
	Type               string `json:"type"`
	ID                 string `json:"id,omitempty"`
	RemoteURL          string `json:"remote_url,omitempty"`
	WorkspaceDirectory string `json:"workspace_directory,omitempty"`
}

// eventJSON is a session event. Only "error" events have a top-level
// "error" key: openai-go reads session streams in events mode (v3.102 and
// later) and hands them over; earlier versions ended the stream on one.
type eventJSON struct {
	Type         string          `json:"type"`
	EventID      string          `json:"event_id"`
	SessionID    string          `json:"session_id,omitempty"`
	TurnID       string          `json:"turn_id,omitempty"`
	Session      *sessionJSON    `json:"session,omitempty"`
	Turn         *turnJSON       `json:"turn,omitempty"`
	OutputIndex  *int            `json:"output_index,omitempty"`
	ItemID       string          `json:"item_id,omitempty"`
	ContentIndex *int            `json:"content_index,omitempty"`
	SummaryIndex *int            `json:"summary_index,omitempty"`
	Delta        string          `json:"delta,omitempty"`
	Text         *string         `json:"text,omitempty"`
	Part         *contentJSON    `json:"part,omitempty"`
	Item         json.RawMessage `json:"item,omitempty"`
	Usage        *usageJSON      `json:"usage,omitempty"`
	Error        *errorJSON      `json:"error,omitempty"`
	Subagent     json.RawMessage `json:"subagent,omitempty"`
}

// errorJSON is the error of an "error" event.
type errorJSON struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Type    string  `json:"type"`
}

type contentJSON struct {
	Type        string    `json:"type"`
	Text        string    `json:"text"`
	Annotations *[]string `json:"annotations,omitempty"`
}

type itemJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TurnID    string          `json:"turn_id"`
	Role      string          `json:"role,omitempty"`
	Phase     string          `json:"phase,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     *string         `json:"error,omitempty"`
	Status    string          `json:"status"`
	Content   []contentJSON   `json:"content,omitempty"`
	Summary   []contentJSON   `json:"summary,omitempty"`
}

// metadataJSON is a session's metadata: {} when it has none.
type metadataJSON map[string]string

// MarshalJSON renders nil as {}.
func (m metadataJSON) MarshalJSON() ([]byte, error) {
	if len(m) == 0 {
		return []byte(`{}`), nil
	}
	return json.Marshal(map[string]string(m))
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// argsJSON returns the arguments as sent in items and required actions: the
// rendered object as it is, or, when asked for or when the text is not a
// JSON object, as a JSON string.
func argsJSON(text string, asString bool) json.RawMessage {
	t := bytes.TrimSpace([]byte(text))
	if !asString && len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return json.RawMessage(t)
	}
	return mustJSON(text)
}

// inputMessage is an input message as the API accepts it.
type inputMessage struct {
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// inputText reads the user's text from an input: a string, or an array of
// messages whose input_text parts are joined by newlines. ok is false when
// the input is absent, empty or malformed.
func inputText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var msgs []inputMessage
	if json.Unmarshal(raw, &msgs) != nil || len(msgs) == 0 {
		return "", false
	}
	var parts []string
	for _, m := range msgs {
		for _, c := range m.Content {
			if c.Type == "input_text" {
				parts = append(parts, c.Text)
			}
		}
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}
