package coretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"
)

// A Script says what a fake model does, turn by turn. Each user input
// starts the next Turn; each Turn is a list of Steps the model takes in
// order, the last of which answers with text. Scripts are plain data: they
// can be written in Go or loaded from JSON (see [LoadScript]):
//
//	{"turns": [{"steps": [
//	  {"calls": [{"name": "get_horoscope", "arguments": {"sign": "Aquarius"}}]},
//	  {"text": "Your horoscope: {{output \"get_horoscope\"}}"}
//	]}]}
//
// Arguments and texts are Go templates (text/template) evaluated when the
// step is played, with these functions:
//
//	output "name"   the output of the latest call of that tool (for a failed
//	                call, its error message)
//	result N        the output (or error message) of call N (from 0) of the
//	                previous step
//	failed "name"   whether the latest call of that tool failed
//	input           the user's input that started the turn
//	json            a value as a JSON literal (to quote an output inside
//	                arguments)
type Script struct {
	// Turns are played one per user input, in order.
	Turns []Turn `json:"turns"`
	// DeltaSize asks a fake that streams to send each text in pieces of at
	// most that many runes, unless its own options say otherwise; zero
	// leaves it to the fake.
	DeltaSize int `json:"delta_size,omitempty"`
	// DeltaPauseMS asks a fake that streams to pause that many
	// milliseconds before each piece of text, as a model writing slowly
	// does (for demonstrations of streaming).
	DeltaPauseMS int `json:"delta_pause_ms,omitempty"`
}

// DeltaPause returns the pause DeltaPauseMS asks for (zero for a nil
// script).
func (s *Script) DeltaPause() time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(s.DeltaPauseMS) * time.Millisecond
}

// A Turn is the model's side of one user input.
type Turn struct {
	// Expect, if set, is the input the model expects; another input fails
	// the turn.
	Expect string `json:"expect,omitempty"`
	// Steps are the model's steps, in order. The last one should answer
	// with Text.
	Steps []Step `json:"steps"`
}

// A Step is one thing the model does: ask for calls (several at once when
// Calls has several), or answer with Text, or fail.
type Step struct {
	// Search, if set, is a tool search the model runs before its calls: the
	// deferred tools whose name or description contains it (ignoring case)
	// are loaded. Calling a deferred tool that no search loaded fails the
	// turn.
	Search string `json:"search,omitempty"`
	// Calls are the function calls of the step.
	Calls []Call `json:"calls,omitempty"`
	// Text is the answer, when there are no calls.
	Text string `json:"text,omitempty"`
	// Fail, if set, fails the turn on the service side.
	Fail *Failure `json:"fail,omitempty"`
	// Reasoning, if set, is a summary of the model's reasoning, which a
	// fake that streams sends before the step's calls or answer.
	Reasoning string `json:"reasoning,omitempty"`
	// Commentary, if set, is a preamble the model writes before the
	// step's calls or answer, which is no part of its answer: a fake
	// whose wire marks it sends it so (Foundry and the Responses API: an
	// assistant message of phase "commentary" before the step's items,
	// its answer then of phase "final_answer"; the in-memory Backend: a
	// message streamed marked as commentary). Fakes of other wires leave
	// it out.
	Commentary string `json:"commentary,omitempty"`
}

// A Call is one function call in a Step.
type Call struct {
	// Name is the function called.
	Name string `json:"name"`
	// Arguments are the call's arguments. A JSON object's string values
	// are templates. A JSON string is the raw arguments text (a template):
	// it is sent as it is, so it may be invalid JSON on purpose.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// AsString asks a server that can send arguments either as an object or
	// as a JSON string (the OpenAI sessions protocol) for the string form.
	AsString bool `json:"as_string,omitempty"`
	// ID, if set, is the call id to use instead of a generated one (to
	// script a misbehaving service that repeats call ids).
	ID string `json:"id,omitempty"`
	// Approval makes the call one of a tool the service runs itself (an
	// MCP server's), for which it asks a person's approval first: a fake
	// that can sends an approval request (Foundry and the Responses API:
	// an mcp_approval_request item), and the model receives the decision
	// as the call's result: "approved", or failed with the reason.
	Approval bool `json:"approval,omitempty"`
	// Origin, with Approval, makes the request one for a browser's access
	// to this origin (an OpenAI session's computer-use approval request,
	// browser_origin_access) rather than an MCP tool's; fakes of other
	// services send an MCP approval request.
	Origin string `json:"origin,omitempty"`
	// Unoffered marks a call of a tool the service was not given (a name
	// the model made up): a fake that knows the tools it was given plays
	// it anyway, where it refuses any other such call as the sign of a
	// backend that failed to offer a tool.
	Unoffered bool `json:"unoffered,omitempty"`
	// Consent makes the call the service's request that a person sign in
	// to the MCP server Name (OAuth consent) before it runs that server's
	// tools: a fake whose service asks for it (Foundry) sends an
	// oauth_consent_request item with a consent link, and the model
	// receives, once the client asks the service to go on, the result
	// "consented", or a failure holding what the client said instead (a
	// developer message); other fakes play it as an Approval call.
	Consent bool `json:"consent,omitempty"`
	// Item, if set, makes the call an output item of that type which the
	// client is to run, other than a function call: "custom_tool_call",
	// "computer_call", "local_shell_call", "shell_call",
	// "apply_patch_call", "tool_search_call" (executed by the client),
	// "program", or Foundry's "workflow_action" and "structured_outputs".
	// A fake whose wire has items sends one, filled from Name and
	// Arguments where its shape has room; the model waits for its output,
	// which a client that cannot run it never sends. Fakes of other wires
	// play it as a function call.
	Item string `json:"item,omitempty"`
}

// A Failure is a service-side failure of a turn.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// LoadScript reads a Script from a JSON file.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScript(b)
}

// ParseScript parses a Script from JSON. Unknown fields are an error.
func ParseScript(b []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("coretest: parse script: %w", err)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check reports the first problem with s: a turn without steps, a step that
// both calls and answers, a call without a name, a template that does not
// parse.
func (s *Script) Check() error {
	for ti, t := range s.Turns {
		if len(t.Steps) == 0 {
			return fmt.Errorf("coretest: turn %d has no steps", ti)
		}
		for si, st := range t.Steps {
			where := fmt.Sprintf("coretest: turn %d step %d", ti, si)
			if len(st.Calls) > 0 && st.Text != "" {
				return fmt.Errorf("%s: a step either calls or answers", where)
			}
			if _, err := parseTemplate(st.Text); err != nil {
				return fmt.Errorf("%s: text: %w", where, err)
			}
			if _, err := parseTemplate(st.Commentary); err != nil {
				return fmt.Errorf("%s: commentary: %w", where, err)
			}
			for ci, c := range st.Calls {
				if c.Name == "" {
					return fmt.Errorf("%s call %d: no name", where, ci)
				}
				if kinds := btoi(c.Approval) + btoi(c.Consent) + btoi(c.Item != ""); kinds > 1 {
					return fmt.Errorf("%s call %d: a call is one of an approval request, a consent request, an item", where, ci)
				}
				if err := checkArgs(c.Arguments); err != nil {
					return fmt.Errorf("%s call %d: arguments: %w", where, ci, err)
				}
			}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkArgs checks that the arguments are JSON and their templates parse.
func checkArgs(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case string:
			_, err := parseTemplate(v)
			return err
		case map[string]any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v)
}

// Simple returns a one-turn script: the model calls name with args (a JSON
// object) and then answers with text (a template).
func Simple(name, args, text string) *Script {
	return &Script{Turns: []Turn{{Steps: []Step{
		{Calls: []Call{{Name: name, Arguments: json.RawMessage(args)}}},
		{Text: text},
	}}}}
}

// Answer returns a one-turn script in which the model answers with text.
func Answer(text string) *Script {
	return &Script{Turns: []Turn{{Steps: []Step{{Text: text}}}}}
}

var funcStubs = template.FuncMap{
	"output": func(string) string { return "" },
	"result": func(int) string { return "" },
	"failed": func(string) bool { return false },
	"input":  func() string { return "" },
	"json":   jsonLiteral,
}

func parseTemplate(text string) (*template.Template, error) {
	return template.New("").Funcs(funcStubs).Option("missingkey=error").Parse(text)
}

func jsonLiteral(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
