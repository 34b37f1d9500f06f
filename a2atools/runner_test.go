package a2atools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/corestream"
)

// echoRunner is a Runner other than core's, as temporal.Runner is: it
// names a new run's thread before the run (w1, w2, …), its events carry
// the service's thread (svc), and it has no toolbox.
type echoRunner struct {
	mu      sync.Mutex
	threads []string // the thread each run was asked to continue ("" for new)
}

func (e *echoRunner) Stream(ctx context.Context, input string, opts *core.RunOptions) *core.Stream {
	e.mu.Lock()
	e.threads = append(e.threads, opts.Thread)
	thread := opts.Thread
	if thread == "" {
		thread = fmt.Sprintf("w%d", len(e.threads))
	}
	e.mu.Unlock()
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		text := "echo: " + input
		yield(core.Event{Kind: core.EventTextDelta, Thread: "svc", Item: "m", Text: text}, nil)
		yield(core.Event{Kind: core.EventTextDone, Thread: "svc", Item: "m", Text: text}, nil)
		yield(core.Event{Kind: core.EventRunFinished, Thread: "svc"}, nil)
		return &core.Result{Thread: thread, Text: text}, nil
	})
}

func (e *echoRunner) ResumeStream(ctx context.Context, thread string, opts *core.RunOptions) *core.Stream {
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		return &core.Result{Thread: thread}, nil
	})
}

func (e *echoRunner) Approvals(context.Context, string) ([]core.Approval, error) { return nil, nil }

func (e *echoRunner) Decide(context.Context, string, string, core.Decision) error { return nil }

func (e *echoRunner) Cancel(context.Context, string) error { return nil }

// TestServeOtherRunner: NewHandler serves a Runner that is not core's:
// the task's answer is the runner's, and the context's next message
// continues the thread the runner named before the run, not the
// service's its events carry; its card has one skill, chat.
func TestServeOtherRunner(t *testing.T) {
	r := &echoRunner{}
	srv := httptest.NewServer(a2atools.NewHandler(r, &a2atools.ServeOptions{
		Identity: func(*http.Request) (string, error) { return "ana", nil },
		Logger:   quiet,
	}))
	t.Cleanup(srv.Close)
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(card.Skills) != 1 || card.Skills[0].ID != "chat" {
		t.Errorf("skills = %+v, want one, chat", card.Skills)
	}
	c := (&agent{Server: srv}).client(t, "ana")
	ctxID := a2a.NewContextID()
	for _, text := range []string{"hello", "again"} {
		p := userText(text)
		p.Message.ContextID = ctxID
		if task := asTask(t)(c.SendMessage(t.Context(), p)); artifactText(task) != "echo: "+text {
			t.Errorf("answer to %q = %q, want the runner's echo", text, artifactText(task))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if diff := cmp.Diff([]string{"", "w1"}, r.threads); diff != "" {
		t.Errorf("threads the runs continued (-want +got):\n%s", diff)
	}
}

// TestServeFailed: a run that fails leaves its task failed, its status
// message a sentence by the error's code, never the error's text.
func TestServeFailed(t *testing.T) {
	const secret = "password=hunter2 at 10.0.0.7"
	a := newAgent(t, &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Fail: &coretest.Failure{Code: "server_error", Message: secret}},
	}}}})
	task := asTask(t)(a.client(t, "ana").SendMessage(t.Context(), userText("hello")))
	if task.Status.State != a2a.TaskStateFailed || statusText(task) != "The agent could not answer. (Internal)" {
		t.Errorf("task = %s %q, want failed with the code's sentence", task.Status.State, statusText(task))
	}
	b, _ := json.Marshal(task)
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("the task shows the error's text: %s", b)
	}
}
