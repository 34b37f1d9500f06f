package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The floor clients run the loops of RawSession and RawFoundry on an
// existing thread with nothing but net/http, a hand read of the event
// stream, and encoding/json into the few fields the loop needs: no SDK
// decodes a value, nothing is validated. They are the least a client of
// these wires can spend per step, so that P1 states toolrelay's cost as
// a ratio to the floor (issue 48, item 6), not a guess. A program should
// use the SDKs: these are measures, not clients.

// floorEvent is what FloorSession reads of a session event.
type floorEvent struct {
	Type    string `json:"type"`
	TurnID  string `json:"turn_id"`
	Session struct {
		RequiredActions []struct {
			Type      string          `json:"type"`
			TurnID    string          `json:"turn_id"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"required_actions"`
	} `json:"session"`
	Item struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"item"`
}

// floorPost posts body to url with the bearer token and reads the answer
// into into (nil: drained), failing on a status that is not 2xx.
func floorPost(ctx context.Context, hc *http.Client, url, token string, body []byte, header http.Header, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	if into == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// sessionHeader is the header of every sessions request.
var sessionHeader = http.Header{"Openai-Beta": {"agents=v1"}}

// FloorSession runs one turn of the existing session of the Agents API at
// base as RawSession does (subscribe to the session's events, post the
// input, run each required function call in turn and post its result,
// return the assistant's last message once the turn completed and the
// session is idle), with net/http and a hand-read event stream.
func FloorSession(ctx context.Context, hc *http.Client, base, token, session, input string, fns map[string]Func) (string, error) {
	events := strings.TrimSuffix(base, "/") + "/agents/sessions/" + session + "/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, events, nil)
	if err != nil {
		return "", err
	}
	req.Header = sessionHeader.Clone()
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", events, resp.Status)
	}
	in, _ := json.Marshal(input)
	msg := []byte(`{"events":[{"input":[{"content":[{"text":` + string(in) + `,"type":"input_text"}],"role":"user"}],"type":"agent.session.input.message"}]}`)
	if err := floorPost(ctx, hc, events, token, msg, sessionHeader, nil); err != nil {
		return "", err
	}
	var (
		turn, text string
		completed  bool
		ev         floorEvent
	)
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", errors.New("the event stream ended before the turn")
			}
			return "", err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // an event's name, its id, a blank line
		}
		ev = floorEvent{}
		if err := json.Unmarshal(bytes.TrimSpace(data), &ev); err != nil {
			return "", err
		}
		switch ev.Type {
		case "agent.session.turn.created":
			if turn == "" {
				turn = ev.TurnID
			}
		case "agent.session.turn.item.done":
			if ev.Item.Type == "message" && ev.Item.Role == "assistant" {
				text = ""
				for _, c := range ev.Item.Content {
					if c.Type == "output_text" {
						text += c.Text
					}
				}
			}
		case "agent.session.requires_action":
			for _, a := range ev.Session.RequiredActions {
				if a.Type != "function_call" {
					return "", fmt.Errorf("unsupported action %q", a.Type)
				}
				args := a.Arguments
				var s string
				if json.Unmarshal(args, &s) == nil {
					args = json.RawMessage(s)
				}
				result := map[string]any{"type": "agent.session.input.tool_result", "turn_id": a.TurnID, "call_id": a.CallID}
				if fn := fns[a.Name]; fn == nil {
					result["success"], result["error"] = false, "unknown function "+a.Name
				} else if out, err := fn(ctx, args); err != nil {
					result["success"], result["error"] = false, err.Error()
				} else {
					result["success"], result["output"] = true, out
				}
				body, _ := json.Marshal(map[string]any{"events": []any{result}})
				if err := floorPost(ctx, hc, events, token, body, sessionHeader, nil); err != nil {
					return "", err
				}
			}
		case "agent.session.turn.completed":
			completed = ev.TurnID == turn
		case "agent.session.turn.failed", "agent.session.turn.cancelled", "agent.session.failed":
			return "", fmt.Errorf("session %s: %s", session, ev.Type)
		case "agent.session.idle":
			if completed {
				return text, nil
			}
		}
	}
}

// floorResponse is what FloorFoundry reads of a response.
type floorResponse struct {
	Output []struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

// FloorFoundry runs one turn of the existing conversation of the Foundry
// project at base as RawFoundry does (create a response naming the agent
// and the conversation with the input; while its output holds
// function_call items, run each in turn and create the next response with
// their function_call_output items), with net/http alone.
func FloorFoundry(ctx context.Context, hc *http.Client, base, token, agent, conversation, input string, fns map[string]Func) (string, error) {
	url := strings.TrimSuffix(base, "/") + "/openai/v1/responses"
	type item map[string]any
	items := []item{{"role": "user", "content": input}}
	for {
		body, _ := json.Marshal(map[string]any{
			"conversation":    conversation,
			"input":           items,
			"agent_reference": map[string]any{"type": "agent_reference", "name": agent},
		})
		var r floorResponse
		if err := floorPost(ctx, hc, url, token, body, nil, &r); err != nil {
			return "", err
		}
		items = items[:0]
		text := ""
		for _, o := range r.Output {
			switch o.Type {
			case "function_call":
				var out string
				var err error
				if fn := fns[o.Name]; fn == nil {
					out = "unknown function " + o.Name
				} else if out, err = fn(ctx, json.RawMessage(o.Arguments)); err != nil {
					out = "error: " + err.Error()
				}
				items = append(items, item{"type": "function_call_output", "call_id": o.CallID, "output": out})
			case "message":
				for _, c := range o.Content {
					if c.Type == "output_text" {
						text += c.Text
					}
				}
			}
		}
		if len(items) == 0 {
			return text, nil
		}
	}
}
