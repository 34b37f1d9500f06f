package coretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/template"
)

// A Model plays a Script for one thread, as the model behind a fake
// service would. Fake servers hold one Model per thread (session,
// conversation): Begin starts a turn with the user's input, Next gives the
// model's next action, and Deliver hands it the results of that action's
// calls. A Model is not safe for concurrent use.
type Model struct {
	script *Script
	tools  map[string]ToolInfo
	loaded map[string]bool

	turn  int // index of the turn being played; -1 before the first
	step  int // index of the next step in that turn
	input string

	pending []ActionCall // calls of the last action, waiting for results
	last    []Delivered
	byName  map[string]Delivered
}

// ActionCall is one call of an Action, rendered.
type ActionCall struct {
	// Name is the function called.
	Name string
	// Arguments is the arguments' text: a JSON object, or whatever the
	// script said to send.
	Arguments string
	// AsString asks for the arguments to be sent as a JSON string where the
	// protocol allows both forms.
	AsString bool
	// ID is the call id the script fixed, or "".
	ID string
	// Approval: the service asks a person to approve this call of a tool
	// it runs itself (see [Call].Approval).
	Approval bool
	// Origin is the origin a browser asks access to (see [Call].Origin).
	Origin string
	// Consent: the service asks a person to sign in to the MCP server
	// Name (see [Call].Consent).
	Consent bool
	// Item is the type of the output item the call is, if it is not a
	// function call (see [Call].Item).
	Item string
}

// An Action is what the model does in one step.
type Action struct {
	// Calls, when not empty, are the calls the model asks for.
	Calls []ActionCall
	// Text is the model's answer when there are no calls.
	Text string
	// Search is the tool search the model ran first, if any.
	Search string
	// Loaded lists the deferred tools that search loaded.
	Loaded []string
	// Fail, when set, is a service-side failure of the turn.
	Fail *Failure
	// Reasoning is the summary of the model's reasoning, if any.
	Reasoning string
	// Commentary is the model's preamble to the step, rendered, if any
	// (see [Step].Commentary).
	Commentary string
}

// Delivered is the result of a call, as the fake service received it,
// in neutral terms.
type Delivered struct {
	CallID string `json:"call_id"`
	Name   string `json:"name,omitempty"`
	// Output is the output as text (content arrays as JSON).
	Output string `json:"output,omitempty"`
	// Failed is set when the result was marked failed (where the protocol
	// has such a flag).
	Failed bool `json:"failed,omitempty"`
	// Error is the failure message (where the protocol has one).
	Error string `json:"error,omitempty"`
}

// Text returns what the model reads of the result: its error message when it
// failed, else its output.
func (d Delivered) Text() string {
	if d.Failed {
		return d.Error
	}
	return d.Output
}

// ToolInfo describes a tool the service knows, for deferred loading.
type ToolInfo struct {
	Name        string
	Description string
	Deferred    bool
}

// NewModel returns a Model playing s from its first turn.
func (s *Script) NewModel() *Model {
	return &Model{script: s, turn: -1, byName: map[string]Delivered{}, loaded: map[string]bool{}}
}

// SetTools tells the model which tools the service has: it calls no other
// (unless the script marks the call Unoffered, a name the model made up),
// and deferred tools only after a search loaded them. Without SetTools,
// any call is allowed.
func (m *Model) SetTools(tools []ToolInfo) {
	m.tools = make(map[string]ToolInfo, len(tools))
	for _, t := range tools {
		m.tools[t.Name] = t
	}
}

// AddTools adds tools to those the model knows of, unless it knows them
// already or knows of none (then it may call any).
func (m *Model) AddTools(tools ...ToolInfo) {
	if m.tools == nil {
		return
	}
	for _, t := range tools {
		if _, ok := m.tools[t.Name]; !ok {
			m.tools[t.Name] = t
		}
	}
}

// Begin starts the next turn with the user's input.
func (m *Model) Begin(input string) error {
	if len(m.pending) > 0 {
		return fmt.Errorf("coretest: a turn is waiting for %d results", len(m.pending))
	}
	if m.turn+1 >= len(m.script.Turns) {
		return fmt.Errorf("coretest: the model script has no more steps: input %d asks for turn %d, and the script has %d", m.turn+2, m.turn+2, len(m.script.Turns))
	}
	m.turn++
	m.step = 0
	m.input = input
	if want := m.script.Turns[m.turn].Expect; want != "" && want != input {
		return fmt.Errorf("coretest: turn %d expected input %q, got %q", m.turn+1, want, input)
	}
	return nil
}

// Cancel ends the current turn: the pending calls are dropped and the
// turn's remaining steps skipped, so the next input begins the next turn.
func (m *Model) Cancel() {
	m.pending = nil
	if m.turn >= 0 {
		m.step = len(m.script.Turns[m.turn].Steps)
	}
}

// Waiting reports whether the model waits for the results of calls.
func (m *Model) Waiting() bool { return len(m.pending) > 0 }

// Pending returns the calls waiting for results.
func (m *Model) Pending() []ActionCall { return m.pending }

// Next plays the next step of the current turn.
func (m *Model) Next() (*Action, error) {
	if m.turn < 0 {
		return nil, fmt.Errorf("coretest: no turn begun")
	}
	if len(m.pending) > 0 {
		return nil, fmt.Errorf("coretest: waiting for %d results", len(m.pending))
	}
	steps := m.script.Turns[m.turn].Steps
	if m.step >= len(steps) {
		return nil, fmt.Errorf("coretest: the model script has no more steps: turn %d has %d", m.turn+1, len(steps))
	}
	st := steps[m.step]
	m.step++
	a := &Action{Search: st.Search, Fail: st.Fail, Reasoning: st.Reasoning}
	if st.Fail != nil {
		return a, nil
	}
	commentary, err := m.render(st.Commentary)
	if err != nil {
		return nil, fmt.Errorf("coretest: commentary: %w", err)
	}
	a.Commentary = commentary
	if st.Search != "" {
		q := strings.ToLower(st.Search)
		for _, t := range m.tools {
			if t.Deferred && (strings.Contains(strings.ToLower(t.Name), q) || strings.Contains(strings.ToLower(t.Description), q)) {
				m.loaded[t.Name] = true
				a.Loaded = append(a.Loaded, t.Name)
			}
		}
		if m.tools != nil && len(a.Loaded) == 0 {
			// The service searches deferred tools only: the tool the
			// script looks for was not offered as deferred.
			return nil, fmt.Errorf("coretest: the tool search %q found no deferred tool (offered: %d tools, none deferred that matches)", st.Search, len(m.tools))
		}
		sort.Strings(a.Loaded)
	}
	for _, c := range st.Calls {
		t, ok := m.tools[c.Name]
		if ok && t.Deferred && !m.loaded[c.Name] {
			return nil, fmt.Errorf("coretest: tool %q is deferred and no tool search loaded it", c.Name)
		}
		if m.tools != nil && !ok && !c.Unoffered && !c.Approval && !c.Consent && c.Item == "" {
			return nil, fmt.Errorf("coretest: the model calls %q, a tool the service was not given", c.Name)
		}
		args, err := m.renderArgs(c.Arguments)
		if err != nil {
			return nil, fmt.Errorf("coretest: call %q: %w", c.Name, err)
		}
		a.Calls = append(a.Calls, ActionCall{Name: c.Name, Arguments: args, AsString: c.AsString, ID: c.ID, Approval: c.Approval, Origin: c.Origin, Consent: c.Consent, Item: c.Item})
	}
	if len(a.Calls) > 0 {
		m.pending = a.Calls
		return a, nil
	}
	text, err := m.render(st.Text)
	if err != nil {
		return nil, fmt.Errorf("coretest: text: %w", err)
	}
	a.Text = text
	return a, nil
}

// Deliver gives the model the results of the pending calls, in call order.
func (m *Model) Deliver(results []Delivered) error {
	if len(results) != len(m.pending) {
		return fmt.Errorf("coretest: %d results for %d pending calls", len(results), len(m.pending))
	}
	for i, r := range results {
		if r.Name == "" {
			r.Name = m.pending[i].Name
			results[i] = r
		}
		m.byName[r.Name] = r
	}
	m.last = results
	m.pending = nil
	return nil
}

func (m *Model) renderArgs(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "{}", nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return m.render(s)
	}
	v, err := m.renderValue(v)
	if err != nil {
		return "", err
	}
	return jsonLiteral(v)
}

func (m *Model) renderValue(v any) (any, error) {
	switch v := v.(type) {
	case string:
		return m.render(v)
	case map[string]any:
		for k, e := range v {
			r, err := m.renderValue(e)
			if err != nil {
				return nil, err
			}
			v[k] = r
		}
	case []any:
		for i, e := range v {
			r, err := m.renderValue(e)
			if err != nil {
				return nil, err
			}
			v[i] = r
		}
	}
	return v, nil
}

func (m *Model) render(text string) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New("").Option("missingkey=error").Funcs(template.FuncMap{
		"output": func(name string) (string, error) {
			d, ok := m.byName[name]
			if !ok {
				return "", fmt.Errorf("no result of %q yet", name)
			}
			return d.Text(), nil
		},
		"result": func(i int) (string, error) {
			if i < 0 || i >= len(m.last) {
				return "", fmt.Errorf("no result %d in the previous step", i)
			}
			return m.last[i].Text(), nil
		},
		"failed": func(name string) bool { return m.byName[name].Failed },
		"input":  func() string { return m.input },
		"json":   jsonLiteral,
	}).Parse(text)
	if err != nil {
		return "", err
	}
	var buf strings.Builder
	if err := t.Execute(&buf, nil); err != nil {
		return "", err
	}
	return buf.String(), nil
}
