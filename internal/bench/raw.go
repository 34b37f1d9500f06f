package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// RawSession runs one turn of an Agents API session the way the service's
// documentation does, on openai-go alone: with session "" it creates a
// session of agent with the input and follows its creation stream;
// otherwise it subscribes to the session's events and posts the input.
// On agent.session.requires_action it runs each function call of
// session.required_actions in turn and posts its result; it returns the
// session and the assistant's last message once the turn completed and
// the session is idle. Arguments are passed to the function as they
// arrive, unvalidated.
func RawSession(ctx context.Context, c *oai.Client, agent, session, input string, fns map[string]Func) (id, text string, err error) {
	var stream *ssestream.Stream[oai.AgentSessionEventUnion]
	if session == "" {
		stream = c.Beta.Agents.Sessions.NewStreaming(ctx, oai.BetaAgentSessionNewParams{
			Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
			AgentID:     oai.String(agent),
			Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String(input)},
		})
	} else {
		stream = c.Beta.Agents.Sessions.Events.StreamStreaming(ctx, session)
		msg := oai.AgentSessionInputParamOfParamAgentSessionInputMessage([]oai.AgentSessionInputMessageParam{{
			Content: []oai.InputContentParamUnion{oai.InputContentParamOfParamInputText(input)},
		}})
		if err := c.Beta.Agents.Sessions.Events.New(ctx, session, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{msg}}); err != nil {
			stream.Close()
			return session, "", err
		}
	}
	defer stream.Close()
	id = session
	var turn string
	completed := false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "agent.session.created":
			id = ev.Session.ID
		case "agent.session.turn.created":
			if turn == "" {
				turn = ev.TurnID
			}
		case "agent.session.turn.item.done":
			if ev.Item.Type == "message" && ev.Item.Role == "assistant" {
				var e struct {
					Item oai.AgentSessionMessage `json:"item"`
				}
				if err := json.Unmarshal([]byte(ev.RawJSON()), &e); err != nil {
					return id, "", err
				}
				text = e.Item.OutputText()
			}
		case "agent.session.requires_action":
			for _, a := range ev.Session.RequiredActions {
				if a.Type != "function_call" {
					return id, "", fmt.Errorf("unsupported action %q", a.Type)
				}
				if err := runAction(ctx, c, id, a, fns); err != nil {
					return id, "", err
				}
			}
		case "agent.session.turn.completed":
			completed = ev.TurnID == turn
		case "agent.session.turn.failed", "agent.session.turn.cancelled", "agent.session.failed":
			return id, "", fmt.Errorf("session %s: %s", id, ev.Type)
		case "agent.session.idle":
			if completed {
				return id, text, nil
			}
		}
	}
	if err := stream.Err(); err != nil {
		return id, "", err
	}
	return id, "", errors.New("the event stream ended before the turn")
}

// runAction runs one function call and posts its result.
func runAction(ctx context.Context, c *oai.Client, session string, a oai.AgentSessionRequiredActionUnion, fns map[string]Func) error {
	args := json.RawMessage(a.JSON.Arguments.Raw())
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	result := &oai.AgentSessionInputParamAgentSessionInputToolResult{TurnID: a.TurnID, CallID: a.CallID}
	if fn := fns[a.Name]; fn == nil {
		result.Error = oai.String("unknown function " + a.Name)
	} else if out, err := fn(ctx, args); err != nil {
		result.Error = oai.String(err.Error())
	} else {
		result.Success = true
		result.Output = oai.AgentFunctionCallOutputParamUnion{OfString: oai.String(out)}
	}
	return c.Beta.Agents.Sessions.Events.New(ctx, session, oai.BetaAgentSessionEventNewParams{
		Events: []oai.AgentSessionInputParamUnion{{OfParamAgentSessionInputToolResult: result}},
	})
}

// RawFoundry runs one turn of a Foundry agent the way the service's
// documentation does, on openai-go alone: with conversation "" it creates
// a conversation; then it creates a response that names the agent and the
// conversation, with the input; while the response's output holds
// function_call items, it runs each in turn and creates the next response
// with their function_call_output items. It returns the conversation and
// the final output text.
func RawFoundry(ctx context.Context, c *oai.Client, agent, conversation, input string, fns map[string]Func) (id, text string, err error) {
	if conversation == "" {
		conv, err := c.Conversations.New(ctx, conversations.ConversationNewParams{})
		if err != nil {
			return "", "", err
		}
		conversation = conv.ID
	}
	items := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(input, responses.EasyInputMessageRoleUser)}
	for {
		p := responses.ResponseNewParams{
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: oai.String(conversation)},
		}
		p.SetExtraFields(map[string]any{"agent_reference": map[string]any{"type": "agent_reference", "name": agent}})
		r, err := c.Responses.New(ctx, p)
		if err != nil {
			return conversation, "", err
		}
		items = items[:0]
		for _, o := range r.Output {
			if o.Type != "function_call" {
				continue
			}
			fc := o.AsFunctionCall()
			var out string
			if fn := fns[fc.Name]; fn == nil {
				out = "unknown function " + fc.Name
			} else if out, err = fn(ctx, json.RawMessage(fc.Arguments)); err != nil {
				out = "error: " + err.Error()
			}
			it := responses.ResponseInputItemParamOfFunctionCallOutput(out)
			it.OfFunctionCallOutput.CallID = oai.String(fc.CallID)
			items = append(items, it)
		}
		if len(items) == 0 {
			return conversation, r.OutputText(), nil
		}
	}
}
