package openai_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
)

// TestBudgetReached: a session that pauses on its spending limit ends the
// run with ResourceExhausted and a TurnError saying so, whether the backend
// streams or polls.
func TestBudgetReached(t *testing.T) {
	for _, transport := range []openai.Delivery{openai.Streaming, openai.Polling} {
		t.Run(string(transport), func(t *testing.T) {
			h := start(t, setup{
				script:  oneTurn(calls(call("get_weather", `{"city":"Roma"}`)), coretest.Step{Fail: &coretest.Failure{Code: "budget_reached"}}),
				backend: openai.Options{Delivery: transport},
			})
			_, err := h.runner.Run(t.Context(), "weather?", nil)
			var te *driver.TurnError
			if !errors.As(err, &te) || te.Status != "budget_reached" || errcode.Of(err) != errcode.ResourceExhausted {
				t.Fatalf("Run = %v (%v), want a budget_reached TurnError (ResourceExhausted)", err, errcode.Of(err))
			}
		})
	}
}

// TestErrorEvent: the error event the service sends before a failed turn
// does not end the stream; the turn's failure carries the service's code
// and message.
func TestErrorEvent(t *testing.T) {
	h := start(t, setup{script: oneTurn(coretest.Step{Fail: &coretest.Failure{Code: "server_error", Message: "the model crashed"}})})
	res, err := h.runner.Run(t.Context(), "hi", nil)
	var te *driver.TurnError
	if !errors.As(err, &te) || te.Status != "failed" || te.Code != "server_error" || te.Message != "the model crashed" {
		t.Fatalf("Run = %v, want the failed turn with the service's error", err)
	}
	if res == nil {
		t.Fatal("no result: want the thread")
	}
	if got := h.srv.Events(res.Thread); !strings.Contains(strings.Join(got, " "), "error agent.session.turn.failed") {
		t.Errorf("events %v: want an error event before turn.failed", got)
	}
}

// TestAsyncFunctionRefused: an existing agent that declares a function
// async is refused at Open (FailedPrecondition), naming the function: the
// backend answers every call within its turn.
func TestAsyncFunctionRefused(t *testing.T) {
	h := start(t, setup{script: oneTurn(text("hi"))})
	client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
	fn := oai.PersistedAgentToolParamFunction{Name: "get_weather", Parameters: map[string]any{"type": "object"}, Async: oai.Bool(true)}
	agent, err := client.Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m", Tools: []oai.PersistedAgentToolParamUnion{{OfParamFunction: &fn}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = openai.Open(t.Context(), h.tools, &openai.Options{Agent: agent.ID, BaseURL: h.srv.URL, APIKey: "k", Logger: slog.New(slog.DiscardHandler)})
	if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), `"get_weather" async`) {
		t.Fatalf("Open = %v, want FailedPrecondition naming the async function", err)
	}
}
