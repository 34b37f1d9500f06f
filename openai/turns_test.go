package openai_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// TestCommentary: the answer is the final messages, without commentary,
// whether read from the stream or, after a cut, from the turn's items.
func TestCommentary(t *testing.T) {
	for _, cut := range []int{0, 17} { // 17: after the final message began, the commentary done
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			opts := &openaitest.Options{Commentary: "Let me look that up."}
			if cut > 0 {
				opts.Fault = cutStream(anyRequest, cut)
			}
			h := start(t, setup{script: oneTurn(twoSteps()...), server: opts})
			res, err := h.runner.Run(t.Context(), "hi", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != twoStepsAnswer {
				t.Errorf("answer = %q, want %q (no commentary)", res.Text, twoStepsAnswer)
			}
		})
	}
}

// TestSessionFailed: a session the service marks failed ends the run with
// a *SessionError.
func TestSessionFailed(t *testing.T) {
	var failed bool
	var mu sync.Mutex
	h := start(t, setup{
		script: oneTurn(text("hi")),
		server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			mu.Lock()
			defer mu.Unlock()
			if failed && r.Method == "GET" && r.Path == "agents/sessions/sess_1" {
				return &openaitest.Fault{Status: 200, Body: `{"id":"sess_1","object":"agent.session","status":"failed","error":"environment lost","required_actions":[]}`}
			}
			return nil
		}},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	failed = true
	mu.Unlock()
	_, err = h.runner.Resume(t.Context(), first.Thread, nil)
	var se *openai.SessionError
	if !errors.As(err, &se) || se.Message != "environment lost" || errcode.Of(err) != errcode.Internal {
		t.Errorf("err = %v, want an Internal *SessionError with the service's message", err)
	}
}

// TestCancelDuringStart: when the caller's context ends while Start waits
// for the turn, the turn is left on the service, and a resume finishes it.
func TestCancelDuringStart(t *testing.T) {
	arrived := make(chan struct{})
	var once sync.Once
	var resuming atomic.Bool
	subscription := func(r *openaitest.Request) bool { return r.Method == "GET" }
	cut := cutStream(subscription, 0)
	h := start(t, setup{
		script: &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("Hello.")}}, {Steps: twoSteps()}}},
		server: &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
			if r.Method == "GET" && r.Path == "agents/sessions/sess_1" && !resuming.Load() {
				once.Do(func() { close(arrived) })
				return &openaitest.Fault{Delay: time.Hour}
			}
			return cut(r)
		}},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	_, err = h.runner.Run(ctx, "again", &core.RunOptions{Thread: first.Thread})
	if errcode.Of(err) != errcode.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
	rec := h.srv.Received()
	if last := rec[len(rec)-1]; last.Kind != "input" {
		t.Errorf("last received = %+v, want the input (the turn left running)", last)
	}
	resuming.Store(true)
	res, err := h.runner.Resume(t.Context(), first.Thread, nil)
	if err != nil || res.Text != twoStepsAnswer {
		t.Fatalf("Resume = %+v, %v; want the turn finished", res, err)
	}
	h.checkOnce()
}

// TestReuseSession: Options.SessionID runs threadless runs on an existing
// session, which Close does not delete.
func TestReuseSession(t *testing.T) {
	h := start(t, setup{
		script:  &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{text("one")}}, {Steps: []coretest.Step{text("two")}}}},
		backend: openai.Options{Keep: true},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := h.open(openai.Options{SessionID: first.Thread})
	res, err := core.NewRunner(b, h.tools, &core.Options{Logger: discard()}).Run(t.Context(), "again", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "two" || res.Thread != first.Thread {
		t.Errorf("run = %q on %s, want two on %s", res.Text, res.Thread, first.Thread)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.SessionStatus(first.Thread); got != "idle" {
		t.Errorf("the reused session is %q after Close, want it kept (idle)", got)
	}
}

// TestResumePolling: a new process in polling mode resumes a session whose
// results request failed, without any event stream.
func TestResumePolling(t *testing.T) {
	journal := driver.NewMemory()
	h := start(t, setup{
		script:  oneTurn(twoSteps()...),
		server:  &openaitest.Options{Fault: onFirst(resultsPost, openaitest.Fault{Status: 500, RetryAfter: time.Millisecond})},
		backend: openai.Options{RequestOptions: []option.RequestOption{option.WithMaxRetries(0)}, MaxReconnects: -1, Keep: true},
		runner:  core.Options{Journal: journal},
	})
	first, err := h.runner.Run(t.Context(), "hi", nil)
	if err == nil {
		t.Fatal("the first run succeeded; want it to fail on the 500")
	}
	h.backend.Close()
	n := len(h.srv.Requests())
	b2 := h.open(openai.Options{Delivery: openai.Polling, PollInterval: time.Millisecond})
	res, err := core.NewRunner(b2, h.tools, &core.Options{Journal: journal, Logger: discard()}).Resume(t.Context(), first.Thread, nil)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Text != twoStepsAnswer {
		t.Errorf("answer = %q", res.Text)
	}
	for _, r := range h.srv.Requests()[n:] {
		if r.Stream {
			t.Errorf("request %d opened a stream while polling", r.N)
		}
	}
	h.checkOnce()
}
