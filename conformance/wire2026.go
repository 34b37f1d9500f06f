package conformance

import (
	"context"
	"slices"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// The scenarios of the shapes the services' wires took in 2026: the
// model's commentary, functions in namespaces.
func init() {
	scenarios = append(scenarios,
		scenario{"Commentary", "the model's commentary (a preamble to its calls or answer) is never part of the answer, of the run or of a resume of its finished turn; streamed, its text events are marked Commentary, whole, and the unmarked ones make the answer exactly", commentary},
		scenario{"Namespace", "a call of a function in a namespace runs the tool of that namespace (\"crm.lookup\", not \"docs.lookup\" or \"lookup\"), and its result goes back under that name", namespace},
	)
}

func commentary(e *env) {
	notes := []string{"Let me look that up.", "Found it."}
	s := script(
		coretest.Step{Commentary: notes[0], Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		coretest.Step{Commentary: notes[1], Text: `Your city is {{output "getUserFavoriteCity"}}.`},
	)
	s.DeltaSize = 4
	r := e.runner(s, nil, weatherTools(e)...)
	got := e.stream(r, "Where?", nil)
	if got.err != nil {
		e.t.Fatalf("stream: %v", got.err)
	}
	const want = "Your city is Seattle, WA."
	e.wantText(got.res, want)
	var answer, marked []core.Event
	for _, ev := range got.events {
		switch {
		case ev.Kind != core.EventTextDelta && ev.Kind != core.EventTextDone:
		case ev.Commentary:
			marked = append(marked, ev)
		default:
			answer = append(answer, ev)
		}
	}
	e.wantMessages(answer, want)
	// A wire that carries no commentary (or a backend that drops it)
	// marks none; what is marked is a commentary message whole.
	for _, ev := range marked {
		if ev.Kind == core.EventTextDone && !slices.Contains(notes, ev.Text) {
			e.t.Errorf("a message %q marked Commentary, want one of %q", ev.Text, notes)
		}
	}
	res, err := r.Resume(e.t.Context(), got.res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res, want)
}

func namespace(e *env) {
	var tools []*core.Tool
	for _, name := range []string{"crm.lookup", "docs.lookup", "lookup"} {
		tools = append(tools, tool(e, name, "Looks something up.", func(context.Context, struct{}) (string, error) { return "by " + name, nil }, nil))
	}
	r := e.runner(script(calls("crm.lookup", `{}`, "docs.lookup", `{}`, "lookup", `{}`), answer("{{result 0}} | {{result 1}} | {{result 2}}")), nil, tools...)
	if !e.caps.Namespaces {
		e.t.Skip("the backend's service has no namespaces of functions (Capabilities.Namespaces): a tool named ns.name would reach it under that whole name")
	}
	e.wantText(e.run(r, "Look it up everywhere.", nil), "by crm.lookup | by docs.lookup | by lookup")
	var got []string
	for _, d := range e.results() {
		got = append(got, d.Name+": "+d.Output)
	}
	if diff := cmp.Diff([]string{"crm.lookup: by crm.lookup", "docs.lookup: by docs.lookup", "lookup: by lookup"}, got); diff != "" {
		e.t.Errorf("results the service received (-want +got):\n%s", diff)
	}
}
