package openai_test

import (
	"context"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/openai"
)

// TestSharedAgent (issue 30, item 9): backends (processes) of one toolbox
// share one agent, found by the digest in its metadata rather than made
// again; an agent stays while a session uses it, whoever closes; a backend
// whose agent another process deleted makes one again and goes on; the
// last Close leaves no session and no agent.
func TestSharedAgent(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hello"))})
	second := h.open(openai.Options{})
	other := core.NewRunner(second, h.tools, &core.Options{Logger: discard()})
	for _, r := range []*core.Runner{h.runner, other} {
		if _, err := r.Run(t.Context(), "hi", nil); err != nil {
			t.Fatal(err)
		}
	}
	agents := h.srv.Agents()
	if len(agents) != 1 {
		t.Fatalf("agents after a run in each of two processes: %v, want one", agents)
	}
	if err := h.backend.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := h.srv.Agents(); len(got) != 1 || len(h.srv.Sessions()) != 1 {
		t.Fatalf("after the first Close: agents %v, sessions %v; want the agent the second process's session uses, and that session", got, h.srv.Sessions())
	}
	// Another process deletes the agent (it found no session of it).
	client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
	if _, err := client.Beta.Agents.Delete(t.Context(), agents[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Run(t.Context(), "hi", nil); err != nil {
		t.Fatalf("a run after another process deleted the agent: %v", err)
	}
	if got := h.srv.Agents(); len(got) != 1 || got[0] == agents[0] {
		t.Errorf("agents %v, want one made again", got)
	}
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if a, s := h.srv.Agents(), h.srv.Sessions(); len(a) != 0 || len(s) != 0 {
		t.Errorf("left after the last Close: agents %v, sessions %v; want none", a, s)
	}
}

// TestCallersSessionStays: a session the program did not create (not
// marked disposable) is not deleted by a backend that resumed it, nor is
// its agent; one a backend created is deleted by the backend of another
// process that resumed it, with its agent.
func TestCallersSessionStays(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hello"))})
	client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
	agent, err := client.Beta.Agents.New(context.Background(), oai.BetaAgentNewParams{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := client.Beta.Agents.Sessions.New(context.Background(), oai.BetaAgentSessionNewParams{
		Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
		AgentID:     oai.String(agent.ID),
		Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	made, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.backend.KeepThread(made.Thread) // as a run paused for a decision would
	if err := h.backend.Close(); err != nil {
		t.Fatal(err)
	}
	second := h.open(openai.Options{})
	r := core.NewRunner(second, h.tools, &core.Options{Logger: discard()})
	for _, thread := range []string{mine.ID, made.Thread} {
		if _, err := r.Resume(t.Context(), thread, nil); err != nil {
			t.Fatalf("Resume %s: %v", thread, err)
		}
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if s, a := h.srv.Sessions(), h.srv.Agents(); len(s) != 1 || s[0] != mine.ID || len(a) != 1 || a[0] != agent.ID {
		t.Errorf("left: sessions %v, agents %v; want only the caller's session %s and agent %s", s, a, mine.ID, agent.ID)
	}
}
