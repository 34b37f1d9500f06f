package foundry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	coredriver "github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/journal/driver"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

const weatherAnswer = "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f."

// TestResume stops a run after its first call ran (the results request
// failed, or its answer was lost after the service took it), then resumes
// the thread in a fresh backend and runner that share only the journal,
// as a new process would. The run completes, and no function whose result
// was kept runs again.
func TestResume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  foundry.Mode
		fault foundrytest.Fault
		// delivered is how many times the service received the first result.
		delivered int
	}{
		{"conversation/results refused", foundry.Conversation, foundrytest.Fault{Status: 500}, 1},
		{"conversation/answer lost", foundry.Conversation, foundrytest.Fault{Drop: true}, 1},
		{"chain/results refused", foundry.Chain, foundrytest.Fault{Status: 503}, 1},
		{"chain/answer lost", foundry.Chain, foundrytest.Fault{Drop: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			journal := driver.NewMemory() // what survives the process
			var c counter
			ctx := context.Background()

			// Process 1: the first call runs, then sending its result fails.
			tools1 := toolbox(t, &c)
			opts := options(srv, tc.mode, false)
			opts.Keep = true // the process dies: nothing is cleaned up
			opts.RequestOptions = noRetries
			b1, err := foundry.Open(ctx, tools1, opts)
			if err != nil {
				t.Fatal(err)
			}
			srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{}, tc.fault)
			res, err := newRunner(b1, tools1, journal).Run(ctx, "What's the weather like in my favorite city?", nil)
			if err == nil {
				t.Fatalf("Run succeeded: %+v", res)
			}
			if res == nil || res.Thread == "" {
				t.Fatalf("Run returned no thread to resume: %+v, %v", res, err)
			}

			// Process 2: a fresh backend on the existing agent, a fresh
			// runner, the same journal.
			var reused int
			tools2 := toolbox(t, &c)
			opts2 := options(srv, tc.mode, false)
			opts2.Definition, opts2.Agent = nil, "test-agent"
			b2 := open(t, tools2, opts2)
			r2 := core.NewRunner(b2, tools2, &core.Options{Logger: discard, Journal: journal, OnEvent: func(e core.Event) {
				if e.Kind == core.EventCallReused {
					reused++
				}
			}})
			res, err = r2.Resume(ctx, res.Thread, nil)
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if res.Text != weatherAnswer {
				t.Errorf("answer = %q, want %q", res.Text, weatherAnswer)
			}
			if diff := cmp.Diff(map[string]int{"getUserFavoriteCity": 1, "getCityNickname": 1, "getCurrentWeatherAtLocation": 1}, c.get()); diff != "" {
				t.Errorf("handler runs mismatch (-want +got):\n%s", diff)
			}
			n := 0
			for _, r := range results(srv) {
				if r == "getUserFavoriteCity: Seattle, WA" {
					n++
				}
			}
			if n != tc.delivered {
				t.Errorf("the first result was received %d times, want %d; results: %v", n, tc.delivered, results(srv))
			}
			wantReused := 1
			if tc.fault.Drop && tc.mode == foundry.Conversation {
				wantReused = 0 // the conversation had moved on: the next call was pending
			}
			if reused != wantReused {
				t.Errorf("%d results reused from the journal, want %d", reused, wantReused)
			}
		})
	}
}

// TestResumeFinished resumes a thread whose turn has ended: the last
// answer comes back without a new response.
func TestResumeFinished(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			var c counter
			tools := toolbox(t, &c)
			b := open(t, tools, options(srv, mode, false))
			r := newRunner(b, tools, nil)
			res, err := r.Run(context.Background(), "weather?", nil)
			if err != nil {
				t.Fatal(err)
			}
			before := len(srv.Requests())
			got, err := r.Resume(context.Background(), res.Thread, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != weatherAnswer || got.Steps != 0 {
				t.Errorf("Resume = %+v, want the answer and no steps", got)
			}
			for _, q := range srv.Requests()[before:] {
				if q.Op == foundrytest.OpCreateResponse {
					t.Errorf("Resume created a response")
				}
			}
		})
	}
}

// TestResumeUnanswered resumes a conversation whose last input the model
// has not answered (the response failed after the results were taken):
// the backend asks for the model's next step.
func TestResumeUnanswered(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Fail: &coretest.Failure{Code: "server_error", Message: "the model crashed"}},
		{Text: `Your favorite city is {{output "getUserFavoriteCity"}}.`},
	}}}}
	srv := newFake(t, script, nil)
	var c counter
	tools := toolbox(t, &c)
	b := open(t, tools, options(srv, foundry.Conversation, false))
	r := newRunner(b, tools, nil)
	res, err := r.Run(context.Background(), "city?", nil)
	var te *coredriver.TurnError
	if !errors.As(err, &te) || te.Code != "server_error" || te.Message != "the model crashed" || errcode.Of(err) != errcode.Internal {
		t.Fatalf("Run = %v, want a TurnError server_error (Internal)", err)
	}
	res, err = r.Resume(context.Background(), res.Thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Your favorite city is Seattle, WA." {
		t.Errorf("answer = %q", res.Text)
	}
	if c.get()["getUserFavoriteCity"] != 1 {
		t.Errorf("runs = %v", c.get())
	}
	checkNoRefusals(t, srv)
}

// TestResumeUnknownThread checks that an unknown thread is NotFound.
func TestResumeUnknownThread(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		srv := newFake(t, weatherScript(), nil)
		b := open(t, nil, options(srv, mode, false))
		_, err := newRunner(b, nil, nil).Resume(context.Background(), "conv_or_resp_nope", nil)
		if errcode.Of(err) != errcode.NotFound {
			t.Errorf("%s: Resume = %v, want NotFound", mode, err)
		}
	}
}

// TestLostAnswerRetried drops the answer to a request the service acted
// on; openai-go sends it again. In a conversation the second attempt is
// refused (the calls it answers, or the turn it starts, were already
// taken) and the backend picks the conversation up where the first left
// it; in a chain the second attempt continues from the same response. No
// function runs twice.
func TestLostAnswerRetried(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		for _, n := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/request %d", mode, n), func(t *testing.T) {
				srv := newFake(t, weatherScript(), nil)
				faults := make([]foundrytest.Fault, n)
				faults[n-1] = foundrytest.Fault{Drop: true}
				srv.InjectFault(foundrytest.OpCreateResponse, faults...)
				var c counter
				tools := toolbox(t, &c)
				b := open(t, tools, options(srv, mode, false))
				res, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if res.Text != weatherAnswer {
					t.Errorf("answer = %q", res.Text)
				}
				if diff := cmp.Diff(map[string]int{"getUserFavoriteCity": 1, "getCityNickname": 1, "getCurrentWeatherAtLocation": 1}, c.get()); diff != "" {
					t.Errorf("handler runs mismatch (-want +got):\n%s", diff)
				}
				// A chain's second attempt forks from the same response: the
				// service takes its results again (but nothing runs twice).
				want := 3
				if mode == foundry.Chain && n > 1 {
					want = 4
				}
				if got := len(results(srv)); got != want {
					t.Errorf("the service received %d results, want %d: %v", got, want, results(srv))
				}
			})
		}
	}
}

// TestCancel stops a run at its step limit; the thread stays usable for
// the next user message.
func TestCancel(t *testing.T) {
	script := weatherScript()
	script.Turns = append(script.Turns, coretest.Turn{Steps: []coretest.Step{{Text: "Hello again."}}})
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newFake(t, script, nil)
			var c counter
			tools := toolbox(t, &c)
			b := open(t, tools, options(srv, mode, false))
			r := core.NewRunner(b, tools, &core.Options{Logger: discard, MaxSteps: 1})
			res, err := r.Run(context.Background(), "weather?", nil)
			if !errors.Is(err, core.ErrMaxSteps) {
				t.Fatalf("Run = %v, want ErrMaxSteps", err)
			}
			res, err = r.Run(context.Background(), "hello", &core.RunOptions{Thread: res.Thread})
			if err != nil {
				t.Fatalf("second Run: %v", err)
			}
			if res.Text != "Hello again." {
				t.Errorf("answer = %q", res.Text)
			}
			want := []string{"getUserFavoriteCity: Seattle, WA", "getCityNickname: " + foundry.CanceledOutputForTest}
			if diff := cmp.Diff(want, results(srv)); diff != "" {
				t.Errorf("results mismatch (-want +got):\n%s", diff)
			}
			checkNoRefusals(t, srv)
		})
	}
}

// TestCancelApproval abandons (Runner.Cancel) a run paused on the
// service's MCP approval request: the request is answered with its denial
// (an mcp_approval_response, approve false, the stop as its reason), never
// with a function_call_output, which the service refuses for want of a
// function call of that id; the thread then takes new input. So it is in
// a stateless thread of the responses backend, whose history the next
// request resends.
func TestCancelApproval(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "delete_repo", Arguments: []byte(`{"repo":"old"}`), Approval: true}}},
			{Text: "Deleted: {{result 0}}"},
		}},
		{Steps: []coretest.Step{{Text: "Hello again."}}},
	}}
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain, trresponses.Stateless} {
		t.Run(string(mode), func(t *testing.T) {
			plain := mode == trresponses.Stateless // the responses backend's own mode
			srv := newFake(t, script, &foundrytest.Options{Plain: plain})
			tools := toolbox(t, &counter{})
			var b coredriver.Backend
			if plain {
				rb, err := trresponses.Open(t.Context(), tools, &trresponses.Options{BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test", Model: "gpt-4.1-mini",
					Mode: mode, HTTPClient: srv.Client(), RequestOptions: fast, Logger: discard})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rb.Close() })
				b = rb
			} else {
				b = open(t, tools, options(srv, mode, false))
			}
			r := newRunner(b, tools, nil)
			res, err := r.Run(t.Context(), "clean up", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
				t.Fatalf("Run = %v, want a pause on the approval request", err)
			}
			request := res.Pending[0].Key.Call
			if err := r.Cancel(t.Context(), res.Thread); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			res, err = r.Run(t.Context(), "hello", &core.RunOptions{Thread: res.Thread})
			if err != nil {
				t.Fatalf("Run after Cancel: %v", err)
			}
			if res.Text != "Hello again." {
				t.Errorf("answer = %q, want the next turn's", res.Text)
			}
			var got []coretest.Delivered
			for _, rec := range srv.Received() {
				got = append(got, rec.Results...)
			}
			want := []coretest.Delivered{{CallID: request, Name: "delete_repo", Failed: true, Error: foundry.CanceledReasonForTest}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answers the service received (-want +got):\n%s", diff)
			}
			checkNoRefusals(t, srv)
		})
	}
}

// TestStartOnPendingConversation starts a new turn, with other input, on a
// conversation whose calls are still pending (an earlier run stopped
// before sending their results): the service refuses it, and the refusal
// is returned. The backend's recovery of a lost Start (the conversation
// holds the calls an earlier attempt of the same input asked for) must
// not take the earlier turn's calls for this input's.
func TestStartOnPendingConversation(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	var c counter
	ctx := context.Background()
	tools := toolbox(t, &c)
	opts := options(srv, foundry.Conversation, false)
	opts.Keep = true
	opts.RequestOptions = noRetries
	b := open(t, tools, opts)
	srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{}, foundrytest.Fault{Status: 500})
	res, err := newRunner(b, tools, nil).Run(ctx, "What's the weather like in my favorite city?", nil)
	if err == nil || res == nil || res.Thread == "" {
		t.Fatalf("Run = %+v, %v; want an error and a thread", res, err)
	}
	res, err = newRunner(b, tools, nil).Run(ctx, "Tell me a joke.", &core.RunOptions{Thread: res.Thread})
	if err == nil {
		t.Fatalf("Run on a conversation with pending calls succeeded: %+v", res)
	}
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("Run = %v, want the service's refusal (InvalidArgument)", err)
	}
	if diff := cmp.Diff(map[string]int{"getUserFavoriteCity": 1}, c.get()); diff != "" {
		t.Errorf("handler runs mismatch (-want +got):\n%s", diff)
	}
}
