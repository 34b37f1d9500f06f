package openai_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

const (
	rootAnswer = "All done."
	subSaid    = "A subagent's finding."
)

// manySubagentTurns delegates to 3 subagents of 8 turns each before every
// answer: 24 subagent turns follow the root turn, more than a page of the
// turns list (20 by default).
func manySubagentTurns() *openaitest.Options {
	return &openaitest.Options{Subagents: &openaitest.Subagents{Count: 3, Turns: 8, Text: subSaid}}
}

// TestSubagentTurnsPolling: in polling mode, a turn followed by more
// subagent turns than a page of the turns list holds ends with the root
// agent's answer (the backend pages past the subagents' turns to find the
// root turn), rather than polling forever.
func TestSubagentTurnsPolling(t *testing.T) {
	h := start(t, setup{
		script:  oneTurn(text(rootAnswer)),
		server:  manySubagentTurns(),
		backend: openai.Options{Delivery: openai.Polling, PollInterval: time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := h.runner.Run(ctx, "hi", nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Text != rootAnswer {
		t.Errorf("answer = %q, want %q", res.Text, rootAnswer)
	}
}

// TestSubagentTurnsResume: a resume of a session whose last root turn is
// followed by more subagent turns than a page of the turns list holds
// returns that turn's answer, not an empty one; so does a resume in a new
// process, whether it streams or polls.
func TestSubagentTurnsResume(t *testing.T) {
	for _, transport := range []openai.Delivery{openai.Streaming, openai.Polling} {
		t.Run(string(transport), func(t *testing.T) {
			h := start(t, setup{script: oneTurn(text(rootAnswer)), server: manySubagentTurns(), backend: openai.Options{Keep: true}})
			first, err := h.runner.Run(t.Context(), "hi", nil)
			if err != nil {
				t.Fatal(err)
			}
			if first.Text != rootAnswer {
				t.Fatalf("Run: answer = %q, want %q", first.Text, rootAnswer)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := h.runner.Resume(ctx, first.Thread, nil)
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if res.Text != rootAnswer {
				t.Errorf("Resume: answer = %q, want %q", res.Text, rootAnswer)
			}
			other := core.NewRunner(h.open(openai.Options{Delivery: transport, PollInterval: time.Millisecond}), h.tools, &core.Options{Logger: discard()})
			res, err = other.Resume(ctx, first.Thread, nil)
			if err != nil {
				t.Fatalf("Resume in a new process: %v", err)
			}
			if res.Text != rootAnswer {
				t.Errorf("Resume in a new process: answer = %q, want %q", res.Text, rootAnswer)
			}
		})
	}
}

// TestSubagentTurnsBounded: past maxTurnSearch turns of subagents since
// the latest root turn, the backend stops reading the turns list and the
// run fails with ResourceExhausted, rather than read without end.
func TestSubagentTurnsBounded(t *testing.T) {
	h := start(t, setup{
		script:  oneTurn(text(rootAnswer)),
		server:  &openaitest.Options{Subagents: &openaitest.Subagents{Count: 1, Turns: 1001, Text: subSaid}},
		backend: openai.Options{Delivery: openai.Polling, PollInterval: time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := h.runner.Run(ctx, "hi", nil)
	if errcode.Of(err) != errcode.ResourceExhausted || !strings.Contains(err.Error(), "subagents'") {
		t.Fatalf("Run = %v (%v), want ResourceExhausted saying the turns are subagents'", err, errcode.Of(err))
	}
	pages := 0
	for _, r := range h.srv.Requests() {
		if strings.HasSuffix(r.Path, "/turns") {
			pages++
		}
	}
	if pages != 10 {
		t.Errorf("%d requests for pages of turns, want 10 (of 100 turns)", pages)
	}
}

// TestSubagentActivity: a streamed run whose agent delegates to
// subagents answers with the root agent's text only; what the subagents
// and the agent did with them reaches the stream's reader as agent
// activity events naming who acted, never as text events.
func TestSubagentActivity(t *testing.T) {
	h := start(t, setup{
		script: oneTurn(calls(call("get_weather", `{"city":"Roma"}`)), text(rootAnswer)),
		server: &openaitest.Options{Subagents: &openaitest.Subagents{Count: 1, Turns: 2, Text: subSaid}, DeltaSize: 5},
	})
	st := h.runner.Stream(t.Context(), "hi", nil)
	var got []string
	var text strings.Builder
	for ev, err := range st.Events() {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch ev.Kind {
		case core.EventAgentActivity:
			if ev.Agent == "" || ev.Item == "" {
				t.Errorf("activity %+v: want who acted, and the item", ev)
			}
			got = append(got, ev.Agent+" "+ev.Activity+": "+ev.Text)
		case core.EventTextDelta, core.EventTextDone:
			if strings.Contains(ev.Text, subSaid) {
				t.Errorf("text event %+v carries a subagent's text", ev)
			}
			if ev.Kind == core.EventTextDelta {
				text.WriteString(ev.Text)
			}
		}
	}
	res, err := st.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != rootAnswer || text.String() != rootAnswer {
		t.Errorf("answer = %q, streamed text %q; want %q", res.Text, text.String(), rootAnswer)
	}
	// The agent made from the toolbox is agent_1; its subagent, subagent_1.
	want := []string{
		"agent_1 create_subagent_call: Subtask 1.", "subagent_1 subagent.created: helper-1",
		"subagent_1 message: " + subSaid, "subagent_1 agent_message: " + subSaid,
		"agent_1 close_subagent_call: ", "subagent_1 subagent.closed: helper-1",
		"agent_1 resume_subagent_call: ", "subagent_1 subagent.active: helper-1",
		"agent_1 send_subagent_input_call: Go on.", "subagent_1 message: " + subSaid, "subagent_1 agent_message: " + subSaid,
		"agent_1 wait_for_subagents_call: ", "agent_1 interrupt_subagent_call: ",
		"agent_1 close_subagent_call: ", "subagent_1 subagent.closed: helper-1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent activity (-want +got):\n%s", diff)
	}
}
