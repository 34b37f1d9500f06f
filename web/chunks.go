package web

import (
	"bytes"
	"encoding/json"
)

// The chunks of the UI message stream, as the AI SDK's client (npm ai 7.x,
// ui-message-stream/ui-message-chunks.ts) reads them: one JSON object per
// server-sent event, "data: {...}\n\n", the stream ending with
// "data: [DONE]\n\n". Each type has the fields its schema requires and
// nothing it does not know.
type (
	// start, start-step, finish-step.
	bareChunk struct {
		Type string `json:"type"`
	}
	startChunk struct {
		Type      string `json:"type"` // start
		MessageID string `json:"messageId"`
	}
	finishChunk struct {
		Type         string    `json:"type"` // finish
		FinishReason string    `json:"finishReason"`
		Metadata     *metadata `json:"messageMetadata,omitempty"`
	}
	// text-start, text-end, reasoning-start, reasoning-end.
	partChunk struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	// text-delta, reasoning-delta.
	deltaChunk struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Delta string `json:"delta"`
	}
	toolInputStartChunk struct {
		Type             string `json:"type"` // tool-input-start
		ToolCallID       string `json:"toolCallId"`
		ToolName         string `json:"toolName"`
		ProviderExecuted bool   `json:"providerExecuted,omitempty"`
	}
	toolInputChunk struct {
		Type             string          `json:"type"` // tool-input-available
		ToolCallID       string          `json:"toolCallId"`
		ToolName         string          `json:"toolName"`
		Input            json.RawMessage `json:"input"`
		ProviderExecuted bool            `json:"providerExecuted,omitempty"`
	}
	approvalRequestChunk struct {
		Type       string `json:"type"` // tool-approval-request
		ApprovalID string `json:"approvalId"`
		ToolCallID string `json:"toolCallId"`
		Reason     string `json:"reason,omitempty"`
	}
	approvalResponseChunk struct {
		Type       string `json:"type"` // tool-approval-response
		ApprovalID string `json:"approvalId"`
		Approved   bool   `json:"approved"`
		Reason     string `json:"reason,omitempty"`
	}
	toolOutputChunk struct {
		Type       string          `json:"type"` // tool-output-available
		ToolCallID string          `json:"toolCallId"`
		Output     json.RawMessage `json:"output"`
	}
	// tool-output-error, and error (without ToolCallID).
	errorChunk struct {
		Type       string `json:"type"`
		ToolCallID string `json:"toolCallId,omitempty"`
		ErrorText  string `json:"errorText"`
	}
	toolDeniedChunk struct {
		Type       string `json:"type"` // tool-output-denied
		ToolCallID string `json:"toolCallId"`
	}
)

// metadata is the message metadata a finish chunk carries: the tokens the
// service counted for the answer.
type metadata struct {
	Usage usage `json:"usage"`
}

// usage is core.Usage under the AI SDK's names (LanguageModelUsage).
type usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	TotalTokens  int64 `json:"totalTokens"`
}

var (
	doneFrame = []byte("data: [DONE]\n\n")
	// keepAliveFrame is a comment, which readers of server-sent events
	// skip; it keeps proxies from closing a quiet stream.
	keepAliveFrame = []byte(": keep-alive\n\n")
)

// appendFrame appends chunk c to buf as one server-sent event.
func appendFrame(buf []byte, c any) []byte {
	b := bytes.NewBuffer(buf)
	b.WriteString("data: ")
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		// Only a json.RawMessage that is not JSON could fail, and
		// every one is checked before it gets here.
		panic("web: encoding a chunk: " + err.Error())
	}
	// Encode ended the JSON with a newline: one more ends the event.
	b.WriteByte('\n')
	return b.Bytes()
}
