package foundrytest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mapItem is the map item.MarshalJSON encoded before itemWire, kept as
// the reference.
func mapItem(it *item) map[string]any {
	m := map[string]any{"type": it.Type, "id": it.ID}
	if it.Status != "" {
		m["status"] = it.Status
	}
	if it.ResponseID != "" {
		m["response_id"] = it.ResponseID
	}
	switch it.Type {
	case "message":
		m["role"] = it.Role
		if it.Role == "assistant" {
			m["content"] = []any{map[string]any{"type": "output_text", "text": it.Text, "annotations": []any{}, "logprobs": []any{}}}
		} else {
			m["content"] = []any{map[string]any{"type": "input_text", "text": it.Text}}
		}
	case "function_call":
		m["call_id"] = it.CallID
		m["name"] = it.Name
		m["arguments"] = it.Arguments
	case "function_call_output":
		m["call_id"] = it.CallID
		m["output"] = it.Output
	case "reasoning":
		m["summary"] = []any{}
	}
	return m
}

func quote(t *testing.T, s string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encode encodes v as writeJSON does.
func encode(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestWireShapes checks that items and responses encode as the maps they
// replaced (items) or that the events still use (responses).
func TestWireShapes(t *testing.T) {
	strs := []string{"", "plain", `q"uote\`, "<b>&</b>", "tab\tline\n\u2028 é"}
	var items []*item
	for _, s := range strs {
		items = append(items,
			&item{Type: "message", ID: "msg_1", Status: "completed", Role: "user", Text: s},
			&item{Type: "message", ID: "msg_2", Role: "assistant", Text: s, ResponseID: s},
			&item{Type: "message", ID: s, Status: s},
			&item{Type: "function_call", ID: "fc_1", Status: "completed", CallID: s, Name: s, Arguments: s},
			&item{Type: "function_call", ID: "fc_2"},
			&item{Type: "function_call_output", ID: "fco_1", Status: "completed", CallID: s, Output: quote(t, "<out> & "+s)},
			&item{Type: "function_call_output", ID: "fco_2", Output: json.RawMessage(`[ {"type": "input_text", "text": "x"} ]`)},
			&item{Type: "function_call_output", ID: "fco_3"},
			&item{Type: "reasoning", ID: "rs_1", ResponseID: "resp_1"},
			&item{Type: "web_search_call", ID: s},
		)
	}
	for _, it := range items {
		got, err := it.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(mapItem(it))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("item %+v (-map +itemWire):\n%s", it, diff)
		}
	}
	var responses []*response
	for i, s := range strs {
		responses = append(responses,
			&response{id: "resp_" + s, created: 12, status: "completed", model: s, output: items[i*3 : i*3+4], conversation: s, instructions: s},
			&response{id: "resp_2", created: 13, status: "failed", errCode: s, errMessage: s, previous: s, agentRef: json.RawMessage(`{"type": "agent_reference", "name": "<a>"}`)},
			&response{id: "resp_3", status: "in_progress", agentRef: json.RawMessage(`{"type":"agent_reference","name":"a","version":"1"}`)},
		)
	}
	for _, r := range responses {
		if diff := cmp.Diff(encode(t, r.json()), encode(t, r.wire())); diff != "" {
			t.Errorf("response %+v (-json +wire):\n%s", r, diff)
		}
	}
}
