package web

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolrelay/toolrelay/core"
)

// A message is the assistant's message being written on a chat: the
// chunks so far (Log, replayed to a page that reconnects) and what they
// showed, so that each part is shown once when a run is resumed or an
// approval continues the message in another request, or another process.
type message struct {
	// ID is the message's id, which every response writing it starts with.
	ID string `json:"id"`
	// Log holds the content chunks written so far, as server-sent events,
	// without the start and finish of each response.
	Log []byte `json:"log,omitempty"`
	// Step is set while a step is open (start-step written, finish-step
	// not yet).
	Step bool `json:"step,omitempty"`
	// Texts and Reasons are the text and reasoning parts, by the item
	// they come from.
	Texts   map[string]*textPart `json:"texts,omitempty"`
	Reasons map[string]*textPart `json:"reasons,omitempty"`
	// Last is the key in Texts of the last text part.
	Last string `json:"last,omitempty"`
	// Reasoning is the item of the open reasoning part, if Reasoning.
	Reasoning   string `json:"reasoning,omitempty"`
	ReasoningOn bool   `json:"reasoning_on,omitempty"`
	// Calls says what was shown of each call, by call id.
	Calls map[string]shown `json:"calls,omitempty"`
	// N counts the ids made for parts that came with none.
	N int `json:"n,omitempty"`

	// limit bounds the chunks a part's output or input is shown in.
	limit int
	// resumed is set for a run that resumes what the message showed
	// part of: its texts are matched with those shown.
	resumed bool
	// held is the text of an item without a name in a resumed run,
	// held until it is whole to be matched with what was shown.
	held strings.Builder
}

// A textPart is a text or reasoning part of a message.
type textPart struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
	Done bool   `json:"done,omitempty"`
	// in counts the bytes of this item the current run delivered.
	in int
}

// shown says what was shown of a call.
type shown uint8

const (
	shownInput shown = 1 << iota
	shownApproval
	shownOutput
	// approved and denied: the page's decision, taken (see decided).
	approved
	denied
)

func newMessage(id string, limit int) *message {
	return &message{ID: id, limit: limit}
}

// resume readies the message for a run that resumes it: the runner's
// stream starts its items again, and what was shown is not shown twice.
func (m *message) resume() {
	m.resumed = true
	for _, p := range m.Texts {
		p.in = 0
	}
	for _, p := range m.Reasons {
		p.in = 0
	}
}

func (m *message) add(c any) { m.Log = appendFrame(m.Log, c) }

func (m *message) newID(prefix string) string {
	m.N++
	return prefix + strconv.Itoa(m.N)
}

func (m *message) openStep() {
	if !m.Step {
		m.add(bareChunk{Type: "start-step"})
		m.Step = true
	}
}

// closeParts ends the open reasoning part and, when the run ended, any
// text left open.
func (m *message) closeParts(all bool) {
	if m.ReasoningOn {
		p := m.Reasons[m.Reasoning]
		if p.Text != "" {
			m.add(partChunk{Type: "reasoning-end", ID: p.ID})
		}
		p.Done = true
		m.Reasoning, m.ReasoningOn = "", false
	}
	if !all {
		return
	}
	m.flushHeld()
	for _, k := range slices.Sorted(maps.Keys(m.Texts)) {
		if p := m.Texts[k]; !p.Done {
			m.endText(p)
		}
	}
}

// event adds the chunks that show ev.
func (m *message) event(ev *core.Event) {
	switch ev.Kind {
	case core.EventTextDelta:
		m.closeParts(false)
		m.text(ev.Item, ev.Text, false)
	case core.EventTextDone:
		m.text(ev.Item, ev.Text, true)
	case core.EventReasoningDelta:
		m.reasoning(ev.Item, ev.Text)
	case core.EventToolCall:
		m.closeParts(false)
		m.input(ev.Call)
	case core.EventApprovalRequested:
		m.input(ev.Call)
		if m.Calls[ev.Call.ID]&shownApproval == 0 {
			m.Calls[ev.Call.ID] |= shownApproval
			m.add(approvalRequestChunk{Type: "tool-approval-request", ApprovalID: ev.Call.ID, ToolCallID: ev.Call.ID, Reason: ev.Text})
		}
	case core.EventCallFinished, core.EventCallReused, core.EventCallInDoubt:
		if ev.Result != nil {
			m.output(ev.Call, ev)
		}
	case core.EventResultsSubmitted:
		m.closeParts(false)
		if m.Step {
			m.add(bareChunk{Type: "finish-step"})
			m.Step = false
		}
	}
}

// input shows call c's input, once.
func (m *message) input(c *core.Call) {
	if m.Calls == nil {
		m.Calls = map[string]shown{}
	}
	if m.Calls[c.ID]&shownInput != 0 {
		return
	}
	m.Calls[c.ID] |= shownInput
	m.openStep()
	provider := c.Kind == core.ServiceApproval
	m.add(toolInputStartChunk{Type: "tool-input-start", ToolCallID: c.ID, ToolName: c.Name, ProviderExecuted: provider})
	m.add(toolInputChunk{Type: "tool-input-available", ToolCallID: c.ID, ToolName: c.Name, Input: m.inputJSON(c.Arguments), ProviderExecuted: provider})
}

// output shows the result of the call ev is about, once.
func (m *message) output(c *core.Call, ev *core.Event) {
	m.input(c)
	if m.Calls[c.ID]&shownOutput != 0 {
		return
	}
	m.Calls[c.ID] |= shownOutput
	switch tr := ev.Result; {
	case tr.Outcome == core.Denied:
		m.add(toolDeniedChunk{Type: "tool-output-denied", ToolCallID: c.ID})
	case tr.Failed:
		m.add(errorChunk{Type: "tool-output-error", ToolCallID: c.ID, ErrorText: truncate(tr.Error, m.limit)})
	default:
		m.add(toolOutputChunk{Type: "tool-output-available", ToolCallID: c.ID, Output: m.outputJSON(tr.Output)})
	}
	m.closeAsked(c.ID)
}

// closeAsked ends the parts of what call id asked people while it ran
// (core.Ask; an agent tool's child's approvals whose result the run did
// not show), shown as approvals under "<id>/…", that the page decided,
// once the call has its result: an approved one with the decision as its
// output, a denied one denied. The others end with the message (see end).
func (m *message) closeAsked(id string) {
	var asked []string
	for q, s := range m.Calls {
		if s&shownOutput == 0 && s&(approved|denied) != 0 && len(q) > len(id) && q[len(id)] == '/' && strings.HasPrefix(q, id) {
			asked = append(asked, q)
		}
	}
	slices.Sort(asked) // the chunks' order is the ids'
	for _, q := range asked {
		s := m.Calls[q]
		m.Calls[q] |= shownOutput
		if s&denied != 0 {
			m.add(toolDeniedChunk{Type: "tool-output-denied", ToolCallID: q})
		} else {
			m.add(toolOutputChunk{Type: "tool-output-available", ToolCallID: q, Output: json.RawMessage(`{"approved":true}`)})
		}
	}
}

// child shows, of ev, an event of an agent tool's child run
// (core.Event.Path), the result of a call of the child's whose approval
// the message shows under the run's id for it (the ids of the agent
// calls and of the child's call, joined by "/", as core keeps the copy),
// and reports whether it showed it. The rest of the child's run is the
// output of the run's call of the agent tool.
func (m *message) child(ev *core.Event) bool {
	switch ev.Kind {
	case core.EventCallFinished, core.EventCallReused, core.EventCallInDoubt:
	default:
		return false
	}
	if ev.Call == nil || ev.Result == nil {
		return false
	}
	ids := make([]string, 0, len(ev.Path)+1)
	for _, p := range ev.Path {
		ids = append(ids, p.ID)
	}
	c := *ev.Call
	c.ID = strings.Join(append(ids, c.ID), "/")
	if m.Calls[c.ID]&(shownInput|shownOutput) != shownInput {
		return false
	}
	m.output(&c, ev)
	return true
}

// decided shows a person's decision, as the page sent it.
func (m *message) decided(approvalID string, yes bool, reason string) {
	if s, ok := m.Calls[approvalID]; ok {
		// A call shown: closeAsked shows its decision.
		if yes {
			m.Calls[approvalID] = s | approved
		} else {
			m.Calls[approvalID] = s | denied
		}
	}
	m.add(approvalResponseChunk{Type: "tool-approval-response", ApprovalID: approvalID, Approved: yes, Reason: truncate(reason, m.limit)})
}

// text shows a piece (or, done, the whole) of the text of item.
func (m *message) text(item, text string, done bool) {
	if item == "" && m.resumed {
		// A resumed run's answer without an item (a backend that gives
		// it whole) is matched, once whole, with what was shown.
		if !done {
			m.held.WriteString(text)
			return
		}
		m.held.Reset()
		m.resumedText(text)
		return
	}
	if m.Texts == nil {
		m.Texts = map[string]*textPart{}
	}
	p := m.Texts[item]
	if p == nil || (p.Done && item == "") {
		p = &textPart{ID: item}
		if item == "" {
			p.ID = m.newID("text-")
		}
		m.Texts[item] = p
	}
	if p.Done {
		return // a repeat
	}
	if done {
		if rest := m.skip(p, text[min(p.in, len(text)):]); rest != "" {
			m.write(item, p, rest) // never delivered in pieces
		}
		m.endText(p)
		return
	}
	if rest := m.skip(p, text); rest != "" {
		m.write(item, p, rest)
	}
}

// endText ends text part p (which, if it holds no text, was never
// started).
func (m *message) endText(p *textPart) {
	p.Done = true
	if p.Text != "" {
		m.add(partChunk{Type: "text-end", ID: p.ID})
	}
}

// skip returns what of the run's next piece of p was not shown yet.
func (m *message) skip(p *textPart, piece string) string {
	shown := len(p.Text) - p.in
	p.in += len(piece)
	if shown <= 0 {
		return piece
	}
	if shown >= len(piece) {
		return ""
	}
	return piece[shown:]
}

// write shows piece as the next of text part p (of item).
func (m *message) write(item string, p *textPart, piece string) {
	if p.Text == "" {
		m.openStep()
		m.add(partChunk{Type: "text-start", ID: p.ID})
	}
	p.Text += piece
	m.Last = item
	m.add(deltaChunk{Type: "text-delta", ID: p.ID, Delta: piece})
}

// resumedText shows the whole text of a resumed run's unnamed item: the
// rest of the last text shown if it begins with it, nothing if it is
// that text, else a new part.
func (m *message) resumedText(text string) {
	if last := m.Texts[m.Last]; last != nil && strings.HasPrefix(text, last.Text) {
		if text == last.Text {
			if !last.Done {
				m.endText(last)
			}
			return
		}
		if !last.Done {
			m.write(m.Last, last, text[len(last.Text):])
			m.endText(last)
			return
		}
	}
	m.resumed = false
	m.text("", text, false)
	m.text("", text, true)
	m.resumed = true
}

func (m *message) flushHeld() {
	if m.held.Len() > 0 {
		m.resumedText(m.held.String())
		m.held.Reset()
	}
}

// reasoning shows a piece of the reasoning of item.
func (m *message) reasoning(item, text string) {
	if m.Reasons == nil {
		m.Reasons = map[string]*textPart{}
	}
	p := m.Reasons[item]
	if !m.ReasoningOn || m.Reasoning != item || p == nil {
		m.closeParts(false)
		if p == nil || (p.Done && item == "") {
			p = &textPart{ID: item}
			if item == "" {
				p.ID = m.newID("reasoning-")
			}
			m.Reasons[item] = p
		}
		if p.Done {
			return // a repeat
		}
		m.Reasoning = item
	}
	m.ReasoningOn = true
	if rest := m.skip(p, text); rest != "" {
		if p.Text == "" {
			m.openStep()
			m.add(partChunk{Type: "reasoning-start", ID: p.ID})
		}
		p.Text += rest
		m.add(deltaChunk{Type: "reasoning-delta", ID: p.ID, Delta: rest})
	}
}

// end closes the message's parts and step for the end of a run that ended
// with err, and returns the finish reason; a run that failed adds an
// error chunk with text.
func (m *message) end(err error, text string) string {
	m.closeParts(true)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		// A call whose run was stopped, and whose result the run did
		// not report after (a backend that answered it as stopped).
		for _, id := range slices.Sorted(maps.Keys(m.Calls)) {
			if m.Calls[id]&shownOutput == 0 {
				m.Calls[id] |= shownOutput
				m.add(errorChunk{Type: "tool-output-error", ToolCallID: id, ErrorText: "stopped before it finished"})
			}
		}
	}
	if m.Step {
		m.add(bareChunk{Type: "finish-step"})
		m.Step = false
	}
	switch {
	case err == nil:
		return "stop"
	case errors.Is(err, core.ErrAwaitingApproval):
		return "tool-calls"
	}
	m.add(errorChunk{Type: "error", ErrorText: text})
	return "error"
}

// inputJSON returns a call's arguments as the JSON value the page shows:
// the object (also when sent as a JSON string holding one), {} for none,
// else the arguments as a string; past the limit, a string cut short.
func (m *message) inputJSON(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	var s string
	if args[0] == '"' && json.Unmarshal(args, &s) == nil {
		if json.Valid([]byte(s)) && len(s) <= m.limit {
			return json.RawMessage(s)
		}
		return quote(truncate(s, m.limit))
	}
	if len(args) <= m.limit && json.Valid(args) {
		return args
	}
	return quote(truncate(string(args), m.limit))
}

// outputJSON returns a call's output as the JSON value the page shows: a
// JSON object or array as itself, any other text as a string, null for
// nil, a content array's parts as the model reads them; past the limit,
// a string cut short.
func (m *message) outputJSON(o core.Output) json.RawMessage {
	if o.Null {
		return json.RawMessage("null")
	}
	s := o.String()
	if t := strings.TrimSpace(s); len(s) <= m.limit && t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return quote(truncate(s, m.limit))
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// truncate cuts s to at most limit bytes, never inside a UTF-8 sequence,
// saying so.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	note := "… (cut: " + strconv.Itoa(len(s)) + " bytes in all)"
	cut := max(limit-len(note), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}
