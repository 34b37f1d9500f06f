package web

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolrelay/toolrelay/core"
)

// chatRequest is the body DefaultChatTransport POSTs (npm ai 7.x,
// ui/http-chat-transport.ts): the chat's id, its messages (all of them,
// or as a page may choose with prepareSendMessagesRequest, only the
// last), and what triggered the request. Other fields (the transport's
// body option) are ignored.
type chatRequest struct {
	ID       string            `json:"id"`
	Messages []json.RawMessage `json:"messages"`
	Trigger  string            `json:"trigger"`
	// MessageID names the message continued (an approval's answer) or
	// regenerated.
	MessageID string `json:"messageId"`
}

// uiMessage is the part of a UIMessage (ui/ui-messages.ts) the handler
// reads.
type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

type uiPart struct {
	Type string `json:"type"`
	// text
	Text string `json:"text"`
	// file
	MediaType string `json:"mediaType"`
	Filename  string `json:"filename"`
	URL       string `json:"url"`
	// tool-*, dynamic-tool
	ToolCallID string      `json:"toolCallId"`
	State      string      `json:"state"`
	Approval   *uiApproval `json:"approval"`
}

type uiApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
}

// A turnRequest is what a POST asks for: a user's input, or the answers
// to approvals that continue the assistant's message.
type turnRequest struct {
	chat string
	// input and parts: the user's newest message.
	input string
	parts []core.Part
	// message and decisions: the assistant's message whose approvals
	// were answered, and the answers.
	message   string
	decisions []decision
}

// A decision is a person's answer to an approval request.
type decision struct {
	approval string // the approval's id (the call's)
	approved bool
	reason   string
}

// A requestError is a request refused: its status, and a message safe
// to show.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

// maxApprovalParts bounds the parts of an assistant's message read for
// approval answers.
const maxApprovalParts = 1000

// parseRequest reads a POST's body, within the options' limits.
func (h *handler) parseRequest(w http.ResponseWriter, r *http.Request) (*turnRequest, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		return nil, refuse(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
	}
	body := http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	var req chatRequest
	dec := json.NewDecoder(body)
	if err := dec.Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, refuse(http.StatusRequestEntityTooLarge, "the request is too large (the limit is %d bytes)", h.opts.MaxBodyBytes)
		}
		return nil, refuse(http.StatusBadRequest, "the body is not a chat request")
	}
	if err := checkChatID(req.ID); err != nil {
		return nil, err
	}
	switch req.Trigger {
	case "submit-message", "":
	case "regenerate-message":
		return nil, refuse(http.StatusBadRequest, "an answer cannot be regenerated: the service keeps the conversation")
	default:
		return nil, refuse(http.StatusBadRequest, "unknown trigger")
	}
	if len(req.Messages) == 0 {
		return nil, refuse(http.StatusBadRequest, "the request has no message")
	}
	var last uiMessage
	if err := json.Unmarshal(req.Messages[len(req.Messages)-1], &last); err != nil {
		return nil, refuse(http.StatusBadRequest, "the last message is not a UI message")
	}
	tr := &turnRequest{chat: req.ID}
	switch last.Role {
	case "user":
		return tr, h.readInput(tr, &last)
	case "assistant":
		return tr, h.readDecisions(tr, &last)
	}
	return nil, refuse(http.StatusBadRequest, "the last message must be the user's, or the assistant's with answered approvals")
}

// readInput reads the user's message: its text, and its files as parts.
func (h *handler) readInput(tr *turnRequest, m *uiMessage) error {
	if len(m.Parts) > h.opts.MaxParts {
		return refuse(http.StatusBadRequest, "the message has too many parts (the limit is %d)", h.opts.MaxParts)
	}
	var texts []string
	n := 0
	for _, p := range m.Parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
			n += len(p.Text)
		case "file":
			part, err := filePart(&p)
			if err != nil {
				return err
			}
			tr.parts = append(tr.parts, part)
		}
	}
	if n > h.opts.MaxInputBytes {
		return refuse(http.StatusRequestEntityTooLarge, "the message is too long (the limit is %d bytes)", h.opts.MaxInputBytes)
	}
	tr.input = strings.Join(texts, "\n")
	if strings.TrimSpace(tr.input) == "" && len(tr.parts) == 0 {
		return refuse(http.StatusBadRequest, "the message is empty")
	}
	return nil
}

// filePart returns a file part of a user's message as an input part: an
// image by its URL (a data: URL too), another file by its URL or, from a
// data: URL, its bytes.
func filePart(p *uiPart) (core.Part, error) {
	bad := refuse(http.StatusBadRequest, "a file of the message is not a data: or https: URL")
	if strings.HasPrefix(p.MediaType, "image/") && (strings.HasPrefix(p.URL, "data:") || strings.HasPrefix(p.URL, "https:")) {
		return core.ImagePart(p.URL), nil
	}
	if strings.HasPrefix(p.URL, "https:") {
		return core.FileURL(p.URL), nil
	}
	meta, data, ok := strings.Cut(strings.TrimPrefix(p.URL, "data:"), ",")
	if !ok || !strings.HasPrefix(p.URL, "data:") || !strings.HasSuffix(meta, ";base64") {
		return core.Part{}, bad
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return core.Part{}, bad
	}
	name := p.Filename
	if name == "" {
		name = "file"
	}
	return core.FileData(name, b), nil
}

// readDecisions reads the answers to approvals in the assistant's message.
func (h *handler) readDecisions(tr *turnRequest, m *uiMessage) error {
	if len(m.Parts) > maxApprovalParts {
		return refuse(http.StatusBadRequest, "the message has too many parts (the limit is %d)", maxApprovalParts)
	}
	tr.message = m.ID
	for _, p := range m.Parts {
		a := p.Approval
		if p.State != "approval-responded" || a == nil || a.Approved == nil {
			continue
		}
		if a.ID == "" || len(a.ID) > maxIDBytes {
			return refuse(http.StatusBadRequest, "an approval has no valid id")
		}
		if len(a.Reason) > h.opts.MaxInputBytes {
			return refuse(http.StatusRequestEntityTooLarge, "a reason is too long (the limit is %d bytes)", h.opts.MaxInputBytes)
		}
		tr.decisions = append(tr.decisions, decision{approval: a.ID, approved: *a.Approved, reason: a.Reason})
	}
	if len(tr.decisions) == 0 {
		return refuse(http.StatusBadRequest, "the assistant's message answers no approval")
	}
	return nil
}

// maxIDBytes bounds a chat's id and an approval's.
const maxIDBytes = 128

// checkChatID checks a chat's id: 1 to 128 letters, digits, or any of
// "-_.:", and not "." or "..".
func checkChatID(id string) error {
	if id == "" || len(id) > maxIDBytes || id == "." || id == ".." {
		return refuse(http.StatusBadRequest, "the chat's id is not valid")
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-_.:", c)) {
			return refuse(http.StatusBadRequest, "the chat's id is not valid")
		}
	}
	return nil
}
