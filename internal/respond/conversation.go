package respond

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/apierr"
)

// history is what a conversation's items say about its last turn.
type history struct {
	// pending are the function calls, MCP approval requests and OAuth
	// consent requests without an answer, in order.
	pending []conversations.ConversationItemUnion
	// answered holds the call ids that have an answer: an output (of a
	// call of any kind), an approval response, or, for a consent
	// request, anything of a later response.
	answered map[string]bool
	// links holds the links of the consent requests, by id.
	links map[string]string
	// client holds the items since the last input that the client is to
	// run and the loop cannot (see clientItems), each its type and id.
	client [][2]string
	// last is the last message or function output: what the model
	// answered, or what waits for its answer.
	last *conversations.ConversationItemUnion
	// lastUser is the text of the last user message.
	lastUser string
}

// openConsent is an OAuth consent request of a conversation that nothing
// of a later response followed yet.
type openConsent struct {
	id, response string // its id, and the response that made it, if said
}

// followedBy reports whether item it, of response rid ("" if the item does
// not say), comes from a response after the one that made consent request
// c: a consent request has no reply item, so what the service made once
// asked to go on is its answer. Foundry's items name their response
// (response_id, Microsoft's reference: AgentResponseItem.ResponseId);
// without it, an item that a response makes beside a consent request
// (calls and requests, reasoning, commentary) is taken as of its response,
// and anything else as of a later one.
func (c openConsent) followedBy(it *conversations.ConversationItemUnion, rid string) bool {
	if c.response != "" && rid != "" {
		return rid != c.response
	}
	switch it.Type {
	case "function_call", "mcp_approval_request", "oauth_consent_request", "reasoning", "mcp_list_tools":
		return false
	case "message":
		return it.Role != "assistant" || it.Phase != conversations.MessagePhaseCommentary
	}
	return true
}

// readConversation lists all the items of a conversation, oldest first.
func (b *Backend) readConversation(ctx context.Context, conv string) (*history, error) {
	pager := b.client.Conversations.Items.ListAutoPaging(ctx, conv, conversations.ItemListParams{
		Order: conversations.ItemListParamsOrderAsc,
		Limit: openai.Int(100),
	})
	var (
		calls    []conversations.ConversationItemUnion
		consents []openConsent
		client   []replyItem // since the last input
	)
	h := &history{answered: map[string]bool{}, links: map[string]string{}}
	for pager.Next() {
		it := pager.Current()
		// Foundry's own fields, which openai-go does not decode.
		extra := gjson.GetMany(it.RawJSON(), "response_id", "consent_link")
		consents = slices.DeleteFunc(consents, func(c openConsent) bool {
			h.answered[c.id] = h.answered[c.id] || c.followedBy(&it, extra[0].Str)
			return h.answered[c.id]
		})
		switch it.Type {
		case "function_call":
			calls = append(calls, it)
		case "mcp_approval_request":
			it.CallID = it.ID // answered by its id
			calls = append(calls, it)
		case "oauth_consent_request":
			it.CallID = it.ID
			calls = append(calls, it)
			consents = append(consents, openConsent{id: it.ID, response: extra[0].Str})
			h.links[it.ID] = extra[1].Str
		case "function_call_output":
			h.answered[it.CallID] = true
			h.last = &it
			client = nil
		case "mcp_approval_response":
			h.answered[it.ApprovalRequestID] = true
			h.last = &it
			client = nil
		case "message":
			if it.Role == "assistant" && it.Phase == conversations.MessagePhaseCommentary {
				continue // the model's preamble: neither an answer nor input
			}
			h.last = &it
			if it.Role != "assistant" {
				client = nil
			}
			if it.Role == "user" {
				h.lastUser = messageText(it)
			}
		default:
			if strings.HasSuffix(it.Type, "_output") && it.CallID != "" {
				h.answered[it.CallID] = true // a call of another kind, answered
				continue
			}
			if _, ok := clientItems[it.Type]; ok {
				client = append(client, replyItem{ID: it.ID, Type: it.Type, CallID: it.CallID, Execution: it.Execution,
					Environment: json.RawMessage(it.JSON.Environment.Raw())})
			}
		}
	}
	if err := pager.Err(); err != nil {
		return nil, apierr.WithRefusal(err)
	}
	for _, c := range calls {
		if !h.answered[c.CallID] {
			h.pending = append(h.pending, c)
		}
	}
	for i := range client {
		if _, ok := client[i].clientItem(h.answered); ok {
			h.client = append(h.client, [2]string{client[i].Type, cmp.Or(client[i].CallID, client[i].ID)})
		}
	}
	return h, nil
}

func messageText(it conversations.ConversationItemUnion) string {
	var texts []string
	for _, c := range it.AsMessage().Content {
		switch c.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "")
}

// pendingStep returns the step of a conversation's pending calls.
func (b *Backend) pendingStep(conv string, h *history) *driver.Step {
	s := &driver.Step{Thread: conv}
	for _, c := range h.pending {
		switch c.Type {
		case "mcp_approval_request":
			s.Calls = append(s.Calls, approvalCall(conv, c.ID, c.ServerLabel, c.Name, c.Arguments.OfString))
		case "oauth_consent_request":
			s.Calls = append(s.Calls, consentCall(conv, c.ID, c.ServerLabel, h.links[c.ID]))
		default:
			s.Calls = append(s.Calls, newCall(conv, c.CallID, qualifiedName(c.Namespace, c.Name), c.Arguments.OfString))
		}
	}
	return s
}

// resumeConversation returns the current step of a conversation.
func (b *Backend) resumeConversation(ctx context.Context, conv string) (*driver.Step, error) {
	b.adopt(ctx, conv)
	h, err := b.readConversation(ctx, conv)
	if err != nil {
		return nil, err
	}
	return b.continueConversation(ctx, conv, h)
}

// continueConversation returns the step a conversation is at: its pending
// calls, or its last answer, or (when the last message or output waits
// for the model) the model's next step; an error when the last response
// asked the client for items the loop cannot run, as its step was.
func (b *Backend) continueConversation(ctx context.Context, conv string, h *history) (*driver.Step, error) {
	switch {
	case len(h.client) > 0:
		return nil, b.clientItemsError(conv, "", h.client)
	case len(h.pending) > 0:
		return b.pendingStep(conv, h), nil
	case h.last == nil:
		return &driver.Step{Thread: conv}, nil
	case h.last.Type == "message" && h.last.Role == "assistant":
		return &driver.Step{Thread: conv, Text: messageText(*h.last)}, nil
	}
	return b.respond(ctx, conv, nil, nil)
}

// recoverStart is called when a Start on conv was refused: if the
// conversation shows that the user's input was taken and the model asked
// for calls (an earlier attempt whose answer was lost), it returns their
// step.
func (b *Backend) recoverStart(ctx context.Context, conv, input string) (*driver.Step, bool) {
	h, err := b.readConversation(ctx, conv)
	if err != nil || len(h.pending) == 0 || h.lastUser != input {
		return nil, false
	}
	return b.pendingStep(conv, h), true
}

// recoverSubmit is called when a Submit was refused: if the conversation
// holds an output for every call of the step (an earlier attempt
// delivered them and its answer was lost), it returns the step the
// conversation is at.
func (b *Backend) recoverSubmit(ctx context.Context, step *driver.Step) (*driver.Step, bool) {
	h, err := b.readConversation(ctx, step.Thread)
	if err != nil {
		return nil, false
	}
	for _, c := range step.Calls {
		if !h.answered[c.ID] {
			return nil, false
		}
	}
	s, err := b.continueConversation(ctx, step.Thread, h)
	return s, err == nil
}

// cancelConversation answers each pending call of conv as stopped (see
// canceledItem), so that the conversation can take new input.
func (b *Backend) cancelConversation(ctx context.Context, conv string) error {
	h, err := b.readConversation(ctx, conv)
	if err != nil {
		return err
	}
	// One answer per call id: a step that repeats one (which the runner
	// refuses, and cancels) still gets each id answered once.
	var items []responses.ResponseInputItemUnionParam
	var ids []string
	for _, c := range h.pending {
		if c.Type == "oauth_consent_request" {
			continue // it needs no answer
		}
		if !slices.Contains(ids, c.CallID) {
			ids = append(ids, c.CallID)
			items = append(items, canceledItem(c.CallID, qualifiedName(c.Namespace, c.Name), c.Type == "mcp_approval_request"))
		}
	}
	for len(items) > 0 {
		n := min(len(items), 20)
		if _, err := b.client.Conversations.Items.New(ctx, conv, conversations.ItemNewParams{Items: items[:n]}); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}
