package openaitest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppendJSON checks that the appendJSON methods write what
// encoding/json writes for the same values.
func TestAppendJSON(t *testing.T) {
	strs := []string{"", "plain", `q"uote\back`, "<b>&amp;</b>", "tab\tnew\nline\r\b\f\x01", "é ü 日本", "sep\u2028\u2029", "bad\xffutf8", "\x7f"}
	raws := []json.RawMessage{
		nil,
		json.RawMessage(`{"a":1}`),
		json.RawMessage(`{ "a" : [1, 2],
	"b": "x y" }`),
		json.RawMessage(`"<tag> & more"`),
		json.RawMessage(`"line\u2028sep é"`),
		json.RawMessage(`null`),
		json.RawMessage(`[{"type":"input_text","text":"hi"}]`),
		json.RawMessage(`{"d":"Look up a record, by ID.","q":"a \" b","e":"end\\"}`),
		json.RawMessage(`{"q":"\"<"}`),
		json.RawMessage(`["a\\", 1]`),
	}
	one, zero := int64(7), 0
	sp := func(s string) *string { return &s }
	usage := Usage{InputTokens: 10, OutputTokens: 5}.json()

	var items []itemJSON
	for i, s := range strs {
		r := raws[i%len(raws)]
		items = append(items,
			itemJSON{ID: s, Type: "message", TurnID: s, Role: s, Phase: s, Status: s, Content: []contentJSON{{Type: "input_text", Text: s}}},
			itemJSON{ID: "fc_1", Type: "function_call", TurnID: "turn_1", CallID: s, Name: s, Arguments: r, Status: "completed"},
			itemJSON{ID: "fco_1", Type: "function_call_output", TurnID: "turn_1", CallID: "c", Output: r, Error: sp(s), Status: "completed", Content: []contentJSON{}},
			itemJSON{ID: "m", Type: "message", TurnID: "t", Status: "completed", Content: []contentJSON{
				{Type: "output_text", Text: s, Annotations: &[]string{}},
				{Type: "output_text", Text: s, Annotations: &[]string{s, "a"}},
				{Type: "output_text", Text: s, Annotations: new([]string)},
			}},
		)
	}
	var events []eventJSON
	for i, s := range strs {
		r := raws[i%len(raws)]
		sess := &sessionJSON{ID: s, Object: "agent.session", Status: s, RequiredActions: []requiredActionJSON{},
			Agent: json.RawMessage(`{"id":"agent_1","tools":[ {"type":"function"} ]}`), Environment: environmentJSON{Type: "none"},
			CreatedAt: 1, LastActiveAt: 2, VaultIDs: []string{}}
		if i%2 == 1 {
			sess.Error, sess.Usage = sp(s), usage
			sess.RequiredActions = append(sess.RequiredActions,
				requiredActionJSON{Type: "function_call", TurnID: s, CallID: s, Name: s, Arguments: json.RawMessage(`{"id":"r-1-0"}`)},
				requiredActionJSON{Type: "function_call", TurnID: "t", CallID: "c", Name: "n", Arguments: r})
			sess.VaultIDs, sess.PromptCacheOptions = []string{s}, &struct{}{}
		}
		if i%3 == 2 {
			sess.RequiredActions, sess.VaultIDs = nil, nil
		}
		if i%4 == 3 {
			sess.Environment = environmentJSON{Type: "self_hosted", ID: s, RemoteURL: s, WorkspaceDirectory: s}
			sess.RequiredActions = []requiredActionJSON{{Type: "environment_connection", EnvironmentID: s + "env"},
				{Type: "computer_use_approval_request", TurnID: s, RequestID: s, Request: r}}
		}
		turn := &turnJSON{ID: s, Object: "agent.session.turn", AgentID: s, SessionID: s, Status: s, CreatedAt: 3, StartedAt: 3}
		if i%2 == 0 {
			turn.SubagentID, turn.CompletedAt, turn.Error, turn.Usage = sp(s), &one, &turnErrorJSON{Code: s, Message: s}, usage
			turn.PromptCacheOptions = &struct{}{}
		}
		events = append(events,
			eventJSON{Type: "agent.session.idle", EventID: s, Session: sess},
			eventJSON{Type: s, EventID: "evt_1", SessionID: s, TurnID: s, Turn: turn, Usage: usage},
			eventJSON{Type: "agent.session.turn.output_text.delta", EventID: "evt_2", SessionID: "x", TurnID: "t", ItemID: s, OutputIndex: &zero, ContentIndex: &zero, Delta: s},
			eventJSON{Type: "agent.session.turn.item.done", EventID: "evt_3", OutputIndex: &i, Item: r},
			eventJSON{Type: "error", EventID: "evt_4", SessionID: s, Error: &errorJSON{Code: s, Message: s, Type: "server_error"}},
			eventJSON{Type: "agent.session.turn.reasoning_summary_text.delta", EventID: "evt_5", ItemID: s, SummaryIndex: &zero, Delta: s, Text: &s, Part: &contentJSON{Type: "summary_text", Text: s}},
			eventJSON{Type: "agent.session.subagent.created", EventID: s, Subagent: r},
		)
	}
	for _, it := range items {
		want, err := json.Marshal(itemRef(it))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(it.json())); diff != "" {
			t.Errorf("item %+v (-json.Marshal +appendJSON):\n%s", it, diff)
		}
	}
	for _, ev := range events {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want = append(append([]byte("data: "), want...), "\n\n"...)
		if diff := cmp.Diff(string(want), string(ev.frame())); diff != "" {
			t.Errorf("event %+v (-json.Marshal +appendJSON):\n%s", ev, diff)
		}
	}
}

// itemRef is an item as the wire has it, for json.Marshal: a message has
// content and a phase (null for a user's), a function_call_output an
// output and an error (null when it has none).
func itemRef(it itemJSON) any {
	raw := func(v json.RawMessage, null bool) json.RawMessage {
		if len(v) == 0 && null {
			return json.RawMessage("null")
		}
		return v
	}
	var phase, errv json.RawMessage
	if it.Phase != "" {
		phase, _ = json.Marshal(it.Phase)
	}
	if it.Error != nil {
		errv, _ = json.Marshal(*it.Error)
	}
	var content *[]contentJSON
	if len(it.Content) > 0 || it.Type == "message" {
		c := it.Content
		if c == nil {
			c = []contentJSON{}
		}
		content = &c
	}
	var summary *[]contentJSON
	if it.Summary != nil {
		summary = &it.Summary
	}
	output := it.Type == "function_call_output"
	return struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		TurnID    string          `json:"turn_id"`
		Role      string          `json:"role,omitempty"`
		Phase     json.RawMessage `json:"phase,omitempty"`
		CallID    string          `json:"call_id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Output    json.RawMessage `json:"output,omitempty"`
		Error     json.RawMessage `json:"error,omitempty"`
		Status    string          `json:"status"`
		Content   *[]contentJSON  `json:"content,omitempty"`
		Summary   *[]contentJSON  `json:"summary,omitempty"`
	}{it.ID, it.Type, it.TurnID, it.Role, raw(phase, it.Type == "message"), it.CallID, it.Name, it.Arguments,
		raw(it.Output, output), raw(errv, output), it.Status, content, summary}
}
