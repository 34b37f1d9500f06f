package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
)

// The scenarios of the shapes the services' wires took in 2026: the
// model's commentary, functions in namespaces, output items the loop
// cannot run, OAuth consent requests.
func init() {
	scenarios = append(scenarios,
		scenario{"ClientItems", "an output item the client is to run that the loop cannot (a computer-use action, a shell command, a custom tool's call, …) is never an answer: the run ends with an error (Unimplemented or FailedPrecondition) naming the item's kind, and nothing of its step runs or is sent", clientItems},
		scenario{"OAuthConsent", "the service's request that a person sign in to a tool's server pauses the run as a service approval carrying the consent link; approved, the step's other results go and the service goes on, once", oauthConsent},
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
	r, err := e.tryRunner(script(calls("crm.lookup", `{}`, "docs.lookup", `{}`, "lookup", `{}`), answer("{{result 0}} | {{result 1}} | {{result 2}}")), nil, tools...)
	switch {
	case err != nil && errcode.Of(err) == errcode.InvalidArgument:
		e.t.Skipf("the backend refuses tools named in a namespace, its service having none: %v", err)
	case err != nil:
		e.t.Fatalf("MakeBackend: %v", err)
	}
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

func clientItems(e *env) {
	sender, ok := e.h.(ClientItemSender)
	if !ok {
		e.t.Skip("the fake sends no output items for the client to run but function calls (its service's wire has none, or the backend reads them as it reads function calls)")
	}
	kinds := sender.ClientItems()
	st := coretest.Step{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}}
	for _, k := range kinds {
		st.Calls = append(st.Calls, coretest.Call{Name: "tool", Arguments: json.RawMessage(`{"query":"weather"}`), Item: k})
	}
	var runs atomic.Int32
	r := e.runner(script(st, answer("unreachable")), nil, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	res, err := r.Run(e.t.Context(), "Do it all.", nil)
	if err == nil {
		e.t.Fatalf("Run = %q, nil; want an error naming the items %q", res.Text, kinds)
	}
	if code := errcode.Of(err); code != errcode.Unimplemented && code != errcode.FailedPrecondition {
		e.t.Errorf("Run = %v (%v), want Unimplemented or FailedPrecondition", err, code)
	}
	for _, k := range kinds {
		if !strings.Contains(err.Error(), k) {
			e.t.Errorf("the error %q does not name %s", err, k)
		}
	}
	if runs.Load() != 0 || len(e.results()) != 0 {
		e.t.Errorf("the step's function ran %d times, %d results sent; want none (the step cannot be answered)", runs.Load(), len(e.results()))
	}
}

func oauthConsent(e *env) {
	s := script(
		coretest.Step{Calls: []coretest.Call{{Name: "github", Consent: true}, {Name: "getUserFavoriteCity"}}},
		answer("{{result 0}} | {{result 1}}"),
	)
	var runs atomic.Int32
	r := e.runner(s, nil, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	if !e.caps.OAuthConsent {
		e.t.Skip("the service never asks a person to sign in to a tool's server (Capabilities.OAuthConsent): an oauth_consent_request is Foundry's")
	}
	res, err := r.Run(e.t.Context(), "List my issues.", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		e.t.Fatalf("Run = %v (%d pending), want a pause on the consent request", err, len(res.Pending))
	}
	a := res.Pending[0]
	var args struct {
		ConsentLink string `json:"consent_link"`
	}
	if json.Unmarshal(a.Arguments, &args) != nil || args.ConsentLink == "" || !strings.HasPrefix(a.Tool, "github") {
		e.t.Errorf("pending %s %s, want github's consent request carrying its link", a.Tool, a.Arguments)
	}
	if err := r.Decide(e.t.Context(), res.Thread, a.Key.Call, core.Decision{Approved: true, Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res, "consented | Seattle, WA")
	got := e.results()
	if runs.Load() != 1 || len(got) != 1 || got[0].Output != "Seattle, WA" {
		e.t.Errorf("the function ran %d times, results received %+v; want it once, its result alone (a consent request has no reply item)", runs.Load(), got)
	}
}
