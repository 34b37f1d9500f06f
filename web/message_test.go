package web

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// TestEventChunks maps every kind of the runner's event (after the events
// before it, which set the message's state) to its chunks.
func TestEventChunks(t *testing.T) {
	refund := &core.Call{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"7"}`)}
	mcp := &core.Call{ID: "a1", Name: "search_docs", Arguments: json.RawMessage(`"{\"q\":\"x\"}"`), Kind: core.ServiceApproval}
	result := func(c *core.Call, o core.Outcome, out core.Output, failed bool, msg string) *driver.ToolResult {
		return &driver.ToolResult{Call: *c, Output: out, Outcome: o, Failed: failed, Error: msg}
	}
	text := func(item, s string) core.Event { return core.Event{Kind: core.EventTextDelta, Item: item, Text: s} }
	call := core.Event{Kind: core.EventToolCall, Call: refund}
	for _, tc := range []struct {
		name   string
		before []core.Event
		ev     core.Event
		want   []string
	}{
		{"text_delta opens the step and the part", nil, text("m1", "Hi"),
			[]string{`{"type":"start-step"}`, `{"type":"text-start","id":"m1"}`, `{"type":"text-delta","id":"m1","delta":"Hi"}`}},
		{"text_delta goes on", []core.Event{text("m1", "Hi")}, text("m1", " there"),
			[]string{`{"type":"text-delta","id":"m1","delta":" there"}`}},
		{"text_done ends the part", []core.Event{text("m1", "Hi")}, core.Event{Kind: core.EventTextDone, Item: "m1", Text: "Hi"},
			[]string{`{"type":"text-end","id":"m1"}`}},
		{"text_delta of an unnamed item gets an id", nil, text("", "Hi"),
			[]string{`{"type":"start-step"}`, `{"type":"text-start","id":"text-1"}`, `{"type":"text-delta","id":"text-1","delta":"Hi"}`}},
		{"reasoning_delta", nil, core.Event{Kind: core.EventReasoningDelta, Item: "r1", Text: "hmm"},
			[]string{`{"type":"start-step"}`, `{"type":"reasoning-start","id":"r1"}`, `{"type":"reasoning-delta","id":"r1","delta":"hmm"}`}},
		{"text after reasoning ends it", []core.Event{{Kind: core.EventReasoningDelta, Item: "r1", Text: "hmm"}}, text("m1", "So"),
			[]string{`{"type":"reasoning-end","id":"r1"}`, `{"type":"text-start","id":"m1"}`, `{"type":"text-delta","id":"m1","delta":"So"}`}},
		{"tool_call", nil, call,
			[]string{`{"type":"start-step"}`, `{"type":"tool-input-start","toolCallId":"c1","toolName":"refund"}`, `{"type":"tool-input-available","toolCallId":"c1","toolName":"refund","input":{"order":"7"}}`}},
		{"tool_call of the service's approval, arguments as a string", nil, core.Event{Kind: core.EventToolCall, Call: mcp},
			[]string{`{"type":"start-step"}`, `{"type":"tool-input-start","toolCallId":"a1","toolName":"search_docs","providerExecuted":true}`, `{"type":"tool-input-available","toolCallId":"a1","toolName":"search_docs","input":{"q":"x"},"providerExecuted":true}`}},
		{"tool_call repeated (a resume)", []core.Event{call}, call, nil},
		{"step_started", []core.Event{call}, core.Event{Kind: core.EventStepStarted, Calls: 1}, nil},
		{"call_started", []core.Event{call}, core.Event{Kind: core.EventCallStarted, Call: refund}, nil},
		{"approval_requested", []core.Event{call}, core.Event{Kind: core.EventApprovalRequested, Call: refund, Text: "over 100"},
			[]string{`{"type":"tool-approval-request","approvalId":"c1","toolCallId":"c1","reason":"over 100"}`}},
		{"call_finished with text", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Outcome: core.OK, Result: result(refund, core.OK, core.Output{Text: "done"}, false, "")},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":"done"}`}},
		{"call_finished with a JSON object", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Result: result(refund, core.OK, core.Output{Text: `{"a":1}`}, false, "")},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":{"a":1}}`}},
		{"call_finished with nil", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Result: result(refund, core.OK, core.Output{Null: true}, false, "")},
			[]string{`{"type":"tool-output-available","toolCallId":"c1","output":null}`}},
		{"call_finished failed", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Outcome: core.ToolError, Result: result(refund, core.ToolError, core.Output{}, true, "no such order")},
			[]string{`{"type":"tool-output-error","toolCallId":"c1","errorText":"no such order"}`}},
		{"call_finished denied", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Outcome: core.Denied, Result: result(refund, core.Denied, core.Output{}, true, "a person denied this call")},
			[]string{`{"type":"tool-output-denied","toolCallId":"c1"}`}},
		{"call_finished interrupted (no result)", []core.Event{call}, core.Event{Kind: core.EventCallFinished, Call: refund, Outcome: core.Interrupted}, nil},
		{"call_reused, its input not shown yet", nil, core.Event{Kind: core.EventCallReused, Call: refund, Result: result(refund, core.OK, core.Output{Text: "done"}, false, "")},
			[]string{`{"type":"start-step"}`, `{"type":"tool-input-start","toolCallId":"c1","toolName":"refund"}`, `{"type":"tool-input-available","toolCallId":"c1","toolName":"refund","input":{"order":"7"}}`, `{"type":"tool-output-available","toolCallId":"c1","output":"done"}`}},
		{"call_reused, its output shown", []core.Event{call, {Kind: core.EventCallFinished, Call: refund, Result: result(refund, core.OK, core.Output{Text: "done"}, false, "")}},
			core.Event{Kind: core.EventCallReused, Call: refund, Result: result(refund, core.OK, core.Output{Text: "done"}, false, "")}, nil},
		{"call_in_doubt", []core.Event{call}, core.Event{Kind: core.EventCallInDoubt, Call: refund, Outcome: core.InDoubt, Result: result(refund, core.InDoubt, core.Output{}, true, "the outcome is unknown")},
			[]string{`{"type":"tool-output-error","toolCallId":"c1","errorText":"the outcome is unknown"}`}},
		{"call_in_doubt, to run again", []core.Event{call}, core.Event{Kind: core.EventCallInDoubt, Call: refund, Outcome: core.OK}, nil},
		{"results_submitted ends the step", []core.Event{call}, core.Event{Kind: core.EventResultsSubmitted, Calls: 1},
			[]string{`{"type":"finish-step"}`}},
		{"results_submitted with no step open", nil, core.Event{Kind: core.EventResultsSubmitted, Calls: 1}, nil},
		{"usage", nil, core.Event{Kind: core.EventUsage, Usage: core.Usage{InputTokens: 3}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("msg", 1<<10)
			for _, ev := range tc.before {
				m.event(&ev)
			}
			n := len(m.Log)
			m.event(&tc.ev)
			if diff := cmp.Diff(tc.want, chunks(string(m.Log[n:]))); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnd checks the chunks and finish reason of a run's end.
func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantReason string
		want       []string
	}{
		{"answered", nil, "stop", []string{`{"type":"text-end","id":"m1"}`, `{"type":"finish-step"}`}},
		{"paused", core.ErrAwaitingApproval, "tool-calls", []string{`{"type":"text-end","id":"m1"}`, `{"type":"finish-step"}`}},
		{"failed", errBoom, "error", []string{`{"type":"text-end","id":"m1"}`, `{"type":"finish-step"}`, `{"type":"error","errorText":"safe"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("msg", 1<<10)
			m.event(&core.Event{Kind: core.EventTextDelta, Item: "m1", Text: "cut sh"})
			n := len(m.Log)
			if got := m.end(tc.err, "safe"); got != tc.wantReason {
				t.Errorf("finish reason %q, want %q", got, tc.wantReason)
			}
			if diff := cmp.Diff(tc.want, chunks(string(m.Log[n:]))); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		})
	}
}

// resumedTextCases are what a run showed of a message, and what the run
// resuming it gives, with the text shown in all.
var resumedTextCases = []struct {
	name    string
	shown   []core.Event
	resumed []core.Event
	want    string // the text shown in all
}{
	{"the rest of a message cut short",
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hello, w"}},
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hello"}, {Kind: core.EventTextDelta, Item: "m1", Text: ", world."}, {Kind: core.EventTextDone, Item: "m1", Text: "Hello, world."}},
		"Hello, world."},
	{"a message shown whole",
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hi."}, {Kind: core.EventTextDone, Item: "m1", Text: "Hi."}},
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hi."}, {Kind: core.EventTextDone, Item: "m1", Text: "Hi."}},
		"Hi."},
	{"an answer given whole, cut short before",
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hello, w"}},
		[]core.Event{{Kind: core.EventTextDelta, Text: "Hello, world."}, {Kind: core.EventTextDone, Text: "Hello, world."}},
		"Hello, world."},
	{"an answer given whole, shown whole before",
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Hello."}, {Kind: core.EventTextDone, Item: "m1", Text: "Hello."}},
		[]core.Event{{Kind: core.EventTextDelta, Text: "Hello."}, {Kind: core.EventTextDone, Text: "Hello."}},
		"Hello."},
	{"a new answer",
		[]core.Event{{Kind: core.EventTextDelta, Item: "m1", Text: "Looking."}, {Kind: core.EventTextDone, Item: "m1", Text: "Looking."}},
		[]core.Event{{Kind: core.EventTextDelta, Text: "Found it."}, {Kind: core.EventTextDone, Text: "Found it."}},
		"Looking.Found it."},
}

// TestResumedText checks that a resumed run's text shows only what was not
// shown: the rest of a message cut short, nothing of one shown whole, and
// an answer given whole (no item) matched with the text shown.
func TestResumedText(t *testing.T) {
	for _, tc := range resumedTextCases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("msg", 1<<10)
			for _, ev := range tc.shown {
				m.event(&ev)
			}
			// Through the journal's record, as another process would.
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			m = &message{limit: 1 << 10}
			if err := json.Unmarshal(b, m); err != nil {
				t.Fatal(err)
			}
			m.resume()
			for _, ev := range tc.resumed {
				m.event(&ev)
			}
			m.end(nil, "")
			if got := texts(string(m.Log)); got != tc.want {
				t.Errorf("text shown %q, want %q\n%s", got, tc.want, m.Log)
			}
			if starts, ends := strings.Count(string(m.Log), `"text-start"`), strings.Count(string(m.Log), `"text-end"`); starts != ends {
				t.Errorf("%d text-start, %d text-end:\n%s", starts, ends, m.Log)
			}
		})
	}
}

// TestResumedTextShownOnce checks that a run resumed in the same process,
// its message kept in memory (not read back from the journal, which
// starts every part's count of what the run delivered again), shows what
// was shown once: the resumed run's stream starts its items again.
func TestResumedTextShownOnce(t *testing.T) {
	for _, tc := range resumedTextCases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("msg", 1<<10)
			for _, ev := range tc.shown {
				m.event(&ev)
			}
			m.resume()
			for _, ev := range tc.resumed {
				m.event(&ev)
			}
			m.end(nil, "")
			if got := texts(string(m.Log)); got != tc.want {
				t.Errorf("text shown %q, want %q\n%s", got, tc.want, m.Log)
			}
			if starts, ends := strings.Count(string(m.Log), `"text-start"`), strings.Count(string(m.Log), `"text-end"`); starts != ends {
				t.Errorf("%d text-start, %d text-end:\n%s", starts, ends, m.Log)
			}
		})
	}
}

// TestShownLimit checks that what a page is shown of a call (its input,
// its output, a failure's error, a person's reason), past MaxShownBytes,
// is cut short to a string of at most that many bytes, saying so, the
// cut never inside a character (which JSON would show as U+FFFD); JSON
// too, which is shown as such only within the limit.
func TestShownLimit(t *testing.T) {
	const limit = 64
	big := strings.Repeat("é", 100)
	obj := `{"q":"` + big + `"}`
	c := &core.Call{ID: "c1", Name: "t", Arguments: json.RawMessage(obj)}
	for _, tc := range []struct {
		name  string
		field string // the chunk's field that must be cut
		show  func(m *message)
	}{
		{"input, JSON", "input", func(m *message) { m.event(&core.Event{Kind: core.EventToolCall, Call: c}) }},
		{"output, text", "output", func(m *message) {
			m.event(&core.Event{Kind: core.EventCallFinished, Call: c, Result: &driver.ToolResult{Output: core.Output{Text: big}}})
		}},
		{"output, JSON", "output", func(m *message) {
			m.event(&core.Event{Kind: core.EventCallFinished, Call: c, Result: &driver.ToolResult{Output: core.Output{Text: obj}}})
		}},
		{"error", "errorText", func(m *message) {
			m.event(&core.Event{Kind: core.EventCallFinished, Call: c, Result: &driver.ToolResult{Failed: true, Error: big, Outcome: core.ToolError}})
		}},
		{"reason", "reason", func(m *message) { m.decided("c1", false, big) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("msg", limit)
			tc.show(m)
			found := false
			for _, ch := range chunks(string(m.Log)) {
				var v map[string]any
				if err := json.Unmarshal([]byte(ch), &v); err != nil {
					t.Fatalf("%s: %v", ch, err)
				}
				x, ok := v[tc.field]
				if !ok {
					continue
				}
				found = true
				if s, ok := x.(string); !ok || len(s) > limit || !strings.Contains(s, "cut: ") || !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
					t.Errorf("%s shown %#v, want a valid string of at most %d bytes saying it was cut", tc.field, x, limit)
				}
			}
			if !found {
				t.Errorf("no chunk with %s:\n%s", tc.field, m.Log)
			}
		})
	}
}
