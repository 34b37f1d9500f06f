package respond

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/apierr"
)

// reply is the part of a response the loop reads. openai-go decodes its
// Response type by reflection, field by field and union by union (more
// than the rest of the request's client work together; BENCHMARKS.md has
// the figures), while the loop needs a few of its fields; a reply is
// decoded by encoding/json, several times faster, which skips the others.
type reply struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Error             replyError      `json:"error"`
	IncompleteDetails replyIncomplete `json:"incomplete_details"`
	Usage             replyUsage      `json:"usage"`
	Output            []replyItem     `json:"output"`

	// items are the output items as the service sent them (stateless
	// mode only), to be sent back with the history.
	items []json.RawMessage
}

type replyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type replyIncomplete struct {
	Reason string `json:"reason"`
}

type replyUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// replyItem is an output item of a reply: a function call, or an item
// with content (a message). Arguments is raw, as its type depends on the
// item's: a function call's is a string of JSON, a tool search call's an
// object.
type replyItem struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	CallID      string          `json:"call_id"`
	Name        string          `json:"name"`
	ServerLabel string          `json:"server_label"`
	Arguments   json.RawMessage `json:"arguments"`
	Content     []replyContent  `json:"content"`
	// Role and Phase are a message's: Phase is "commentary" for a
	// preamble to the model's calls or answer, "final_answer" or absent
	// for its answer (openai-go v3.105 responses.ResponseOutputMessage).
	Role  string `json:"role"`
	Phase string `json:"phase"`
	// Namespace is a function call's namespace, if its function is in
	// one (openai-go v3.105 responses.ResponseFunctionToolCall).
	Namespace string `json:"namespace"`
	// Execution says who runs a tool search call ("server", "client"),
	// and Environment where a shell call runs (type "local": the
	// client's; "container_reference": the service's): openai-go v3.105
	// ResponseToolSearchCall, ResponseFunctionShellToolCall.
	Execution string `json:"execution"`
	// Environment is raw: another item's member of that name may not
	// be an object (see environment).
	Environment json.RawMessage `json:"environment"`
	// ConsentLink is an OAuth consent request's link (Foundry's
	// oauth_consent_request; ServerLabel names its MCP server).
	ConsentLink string `json:"consent_link"`
}

// environment returns the type of a shell call's environment ("" when
// the item has none, or one that is not an object).
func (it *replyItem) environment() string {
	var env struct {
		Type string `json:"type"`
	}
	json.Unmarshal(it.Environment, &env)
	return env.Type
}

// commentary reports whether the item is a message of the model's
// commentary, which is no part of its answer.
func (it *replyItem) commentary() bool { return it.Type == "message" && it.Phase == "commentary" }

// arguments returns the arguments of a function call: the JSON its
// arguments string holds, or "" for none (no field, or null). Arguments
// of another type are returned as they are, for the runner to judge (and
// to refuse, as malformed, to the model).
func (it *replyItem) arguments() string {
	var s string
	if json.Unmarshal(it.Arguments, &s) == nil {
		return s
	}
	return string(it.Arguments)
}

type replyContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// text returns the reply's answer: its output text as openai-go's
// Response.OutputText gives it (the output_text parts of every item,
// joined), but for the messages of the model's commentary.
func (r *reply) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.commentary() {
			continue
		}
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// observe hands the text of each message of the reply to obs, whole,
// commentary marked as such.
func (r *reply) observe(obs driver.Observer) error {
	if obs == nil {
		return nil
	}
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		var b strings.Builder
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
		if err := obs(driver.Delta{Kind: driver.TextDone, Item: it.ID, Text: b.String(), Commentary: it.commentary()}); err != nil {
			return err
		}
	}
	return nil
}

// replyOf returns the reply of a response openai-go decoded (a streamed
// one).
func replyOf(r *responses.Response) *reply {
	rep := &reply{
		ID: r.ID, Model: string(r.Model), Status: string(r.Status),
		Error:             replyError{Code: string(r.Error.Code), Message: r.Error.Message},
		IncompleteDetails: replyIncomplete{Reason: r.IncompleteDetails.Reason},
		Usage:             replyUsage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.TotalTokens},
		Output:            make([]replyItem, len(r.Output)),
	}
	for i, o := range r.Output {
		it := &rep.Output[i]
		it.ID, it.Type, it.CallID, it.Name, it.ServerLabel = o.ID, o.Type, o.CallID, o.Name, o.ServerLabel
		it.Role, it.Phase, it.Namespace = o.Role, string(o.Phase), o.Namespace
		it.Execution = o.Execution
		if o.JSON.Environment.Valid() {
			it.Environment = json.RawMessage(o.JSON.Environment.Raw())
		}
		if o.Type == "oauth_consent_request" {
			// Foundry's item, not openai-go's: its link is in the raw JSON.
			it.ConsentLink = gjson.Get(o.RawJSON(), "consent_link").Str
		}
		if o.JSON.Arguments.Valid() {
			it.Arguments = json.RawMessage(o.JSON.Arguments.Raw())
		}
		for _, c := range o.Content {
			it.Content = append(it.Content, replyContent{Type: c.Type, Text: c.Text})
		}
	}
	return rep
}

// newReply creates a response, as Responses.New does, and returns its
// reply.
func (b *Backend) newReply(ctx context.Context, p *responses.ResponseNewParams) (*reply, error) {
	rep := new(reply)
	if _, err := b.client.Responses.New(ctx, *p, option.WithResponseBodyInto(rep)); err != nil {
		return nil, apierr.WithRefusal(err)
	}
	return rep, nil
}

// getReply reads a response, as Responses.Get does, and returns its
// reply.
func (b *Backend) getReply(ctx context.Context, id string) (*reply, error) {
	rep := new(reply)
	if _, err := b.client.Responses.Get(ctx, id, responses.ResponseGetParams{}, option.WithResponseBodyInto(rep)); err != nil {
		return nil, apierr.WithRefusal(err)
	}
	return rep, nil
}
