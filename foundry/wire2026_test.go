package foundry_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// commentaryScript is a weather turn whose every step begins with the
// model's commentary (a message of phase "commentary"), its answer then
// of phase "final_answer".
func commentaryScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Commentary: "Let me look up your city.", Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Commentary: "Now the weather there.", Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
		{Commentary: "Here it is.", Text: `It is {{output "getCurrentWeatherAtLocation"}} in {{output "getUserFavoriteCity"}}.`},
	}}}}
}

// TestCommentary: the model's commentary (messages of phase "commentary")
// is never part of the answer, of a run or of a resume of its finished
// turn by another process; streamed, or handed over whole when blocking,
// its text events are marked Commentary, and the unmarked ones make the
// answer exactly.
func TestCommentary(t *testing.T) {
	const answer = "It is 70f in Seattle, WA."
	commentary := []string{"Let me look up your city.", "Now the weather there.", "Here it is."}
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		for _, stream := range []bool{false, true} {
			t.Run(string(mode)+map[bool]string{true: "/stream"}[stream], func(t *testing.T) {
				srv := newFake(t, commentaryScript(), &foundrytest.Options{DeltaSize: 4})
				tools := toolbox(t, &counter{})
				opts := options(srv, mode, stream)
				opts.Keep = true
				r := newRunner(open(t, tools, opts), tools, nil)
				st := r.Stream(t.Context(), "What's the weather in my city?", nil)
				var marked, unmarked []string // TextDone texts
				var deltas strings.Builder    // unmarked TextDelta pieces
				for ev, err := range st.Events() {
					if err != nil {
						t.Fatalf("stream: %v", err)
					}
					switch {
					case ev.Kind == core.EventTextDone && ev.Commentary:
						marked = append(marked, ev.Text)
					case ev.Kind == core.EventTextDone:
						unmarked = append(unmarked, ev.Text)
					case ev.Kind == core.EventTextDelta && !ev.Commentary:
						deltas.WriteString(ev.Text)
					}
				}
				res, err := st.Result()
				if err != nil {
					t.Fatal(err)
				}
				if res.Text != answer {
					t.Errorf("answer = %q, want %q (no commentary)", res.Text, answer)
				}
				if diff := cmp.Diff(commentary, marked); diff != "" {
					t.Errorf("messages marked Commentary (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{answer}, unmarked); diff != "" || deltas.String() != answer {
					t.Errorf("unmarked messages (-want +got):\n%s\nunmarked pieces %q, want the answer", diff, deltas.String())
				}
				// Another process resumes the finished turn: the answer,
				// still without commentary.
				again := newRunner(open(t, tools, opts), tools, nil)
				got, err := again.Resume(t.Context(), res.Thread, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got.Text != answer {
					t.Errorf("resumed answer = %q, want %q", got.Text, answer)
				}
				checkNoRefusals(t, srv)
			})
		}
	}
}
