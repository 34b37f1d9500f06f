package a2atools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

var quiet = slog.New(slog.DiscardHandler)

// agent is a runner on the in-memory backend, served as an A2A agent on
// loopback; requests name their identity in the X-User header.
type agent struct {
	*httptest.Server
	b       *coretest.Backend
	r       *core.Runner
	refunds atomic.Int64  // refunds made
	started chan struct{} // a call of "wait" started
}

type orderArgs struct {
	Order string `json:"order"`
}

// newAgent serves a runner playing script, whose tools are refund (it
// needs approval), lookup, and wait (it runs until its context ends).
func newAgent(t *testing.T, script *coretest.Script) *agent {
	t.Helper()
	a, h, err := agentHandler(script, "")
	if err != nil {
		t.Fatal(err)
	}
	a.Server = httptest.NewServer(h)
	t.Cleanup(func() {
		a.Server.Close()
		a.r.Close()
	})
	return a
}

// agentHandler returns the agent of newAgent and its handler, serving at
// url (empty: where its card is asked for).
func agentHandler(script *coretest.Script, url string) (*agent, http.Handler, error) {
	a := &agent{started: make(chan struct{}, 4)}
	refund, err := core.NewTool("refund", "Refunds an order.", func(_ context.Context, in orderArgs) (string, error) {
		a.refunds.Add(1)
		return "refunded " + in.Order, nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("money goes out")})
	if err != nil {
		return nil, nil, err
	}
	lookup, err := core.NewTool("lookup", "Looks an order up.", func(_ context.Context, in orderArgs) (string, error) {
		return "order " + in.Order + " is shipped", nil
	}, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	wait, err := core.NewTool("wait", "Waits.", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case a.started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return "", ctx.Err()
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	tb, err := core.NewToolbox(refund, lookup, wait)
	if err != nil {
		return nil, nil, err
	}
	a.b = coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb, DeltaSize: 4})
	a.r = core.NewRunner(a.b, tb, &core.Options{Logger: quiet})
	h := a2atools.NewHandler(a.r, &a2atools.ServeOptions{
		Name:     "shop",
		URL:      url,
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:   quiet,
	})
	return a, h, nil
}

// userTransport names its identity in every request.
type userTransport struct{ user string }

func (u userTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User", u.user)
	return http.DefaultTransport.RoundTrip(r)
}

// client returns a2a-go's client of the agent, for user, from its card.
func (a *agent) client(t *testing.T, user string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), a.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(&http.Client{Transport: userTransport{user}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

func userText(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

// artifactText returns the text of a task's artifacts.
func artifactText(task *a2a.Task) string {
	var b strings.Builder
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				b.WriteString(tp.Text)
			}
		}
	}
	return b.String()
}

func statusText(task *a2a.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	var out []string
	for _, p := range task.Status.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, "")
}

// asTask returns a function returning the task of a message/send's
// result, failing t on an error or a result that is not a task.
func asTask(t *testing.T) func(a2a.SendMessageResult, error) *a2a.Task {
	return func(res a2a.SendMessageResult, err error) *a2a.Task {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("result = %T, want a task", res)
		}
		return task
	}
}

var lookupScript = &coretest.Script{Turns: []coretest.Turn{
	{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"order": "7"}`)}}},
		{Text: "Your {{output \"lookup\"}}."},
	}},
	{Steps: []coretest.Step{{Text: "You said: {{input}}"}}},
}}

// TestServeSend: the card describes the runner; message/send runs a turn
// and answers with the completed task, whose artifact is the answer;
// tasks/get returns it to its owner, and to nobody else; the context's
// next message continues the same thread.
func TestServeSend(t *testing.T) {
	a := newAgent(t, lookupScript)
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), a.URL)
	if err != nil {
		t.Fatal(err)
	}
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID)
	}
	if diff := cmp.Diff([]string{"refund", "lookup", "wait"}, skills); diff != "" {
		t.Errorf("card's skills (-want +got):\n%s", diff)
	}
	if card.Name != "shop" || !card.Capabilities.Streaming || card.URL != a.URL+"/" {
		t.Errorf("card = name %q, streaming %v, URL %q; want shop, streaming, %s/", card.Name, card.Capabilities.Streaming, card.URL, a.URL)
	}

	c := a.client(t, "ana")
	task := asTask(t)(c.SendMessage(t.Context(), userText("where is order 7?")))
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "Your order 7 is shipped." {
		t.Fatalf("task = %s %q, want completed with the answer", task.Status.State, artifactText(task))
	}
	got, err := c.GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted || artifactText(got) != artifactText(task) {
		t.Errorf("tasks/get = %s %q, want the task sent", got.Status.State, artifactText(got))
	}
	if _, err := a.client(t, "bob").GetTask(t.Context(), &a2a.TaskQueryParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another identity's tasks/get: %v, want task not found", err)
	}

	next := userText("thanks")
	next.Message.ContextID = task.ContextID
	task2 := asTask(t)(c.SendMessage(t.Context(), next))
	if task2.Status.State != a2a.TaskStateCompleted || artifactText(task2) != "You said: thanks" {
		t.Errorf("second task = %s %q", task2.Status.State, artifactText(task2))
	}
	var threads []string
	for _, r := range a.b.Received() {
		if r.Kind == "input" {
			threads = append(threads, r.Thread)
		}
	}
	if len(threads) != 2 || threads[0] != threads[1] {
		t.Errorf("threads of the context's inputs = %q, want one thread", threads)
	}
}

// TestServeStream: message/stream gives the task, working, the answer's
// pieces as artifact updates (appended, then replaced by the whole), and
// completed, final.
func TestServeStream(t *testing.T) {
	a := newAgent(t, lookupScript)
	c := a.client(t, "ana")
	var kinds []string
	var pieces strings.Builder
	var whole string
	for ev, err := range c.SendStreamingMessage(t.Context(), userText("where is order 7?")) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task "+string(ev.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, fmt.Sprintf("status %s final=%v", ev.Status.State, ev.Final))
		case *a2a.TaskArtifactUpdateEvent:
			text := ev.Artifact.Parts[0].(a2a.TextPart).Text
			if ev.LastChunk {
				whole = text
				kinds = append(kinds, "artifact whole")
				continue
			}
			pieces.WriteString(text)
			if k := "artifact pieces"; kinds[len(kinds)-1] != k {
				kinds = append(kinds, k)
			}
		}
	}
	want := []string{"task submitted", "status working final=false", "artifact pieces", "artifact whole", "status completed final=true"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if pieces.String() != "Your order 7 is shipped." || whole != pieces.String() {
		t.Errorf("pieces %q, whole %q: want the answer both", pieces.String(), whole)
	}
}

var refundScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order": "7"}`)}}},
	{Text: "Done: {{result 0}}."},
}}}}

// TestServeApproval: a run that pauses for approval leaves its task
// input-required, naming the call; an answer that is not understood
// keeps it so; "approve" on the task resumes the run, the refund made
// once, the task completed. A denial tells the model.
func TestServeApproval(t *testing.T) {
	for _, tc := range []struct {
		answer      a2a.Part
		wantText    string
		wantRefunds int64
	}{
		{a2a.TextPart{Text: "approve"}, "Done: refunded 7.", 1},
		{a2a.DataPart{Data: map[string]any{"approve": false, "reason": "too much"}}, "too much", 0},
	} {
		t.Run(fmt.Sprint(tc.wantRefunds), func(t *testing.T) {
			a := newAgent(t, refundScript)
			c := a.client(t, "ana")
			task := asTask(t)(c.SendMessage(t.Context(), userText("refund order 7")))
			if task.Status.State != a2a.TaskStateInputRequired || !strings.Contains(statusText(task), `refund {"order":"7"} (money goes out)`) {
				t.Fatalf("task = %s %q, want input-required naming the refund", task.Status.State, statusText(task))
			}
			data := task.Status.Message.Parts[1].(a2a.DataPart).Data["approvals"].([]any)[0].(map[string]any)
			if data["name"] != "refund" || data["callId"] == "" {
				t.Errorf("approval data = %v", data)
			}

			answer := func(p a2a.Part) *a2a.Task {
				m := a2a.NewMessage(a2a.MessageRoleUser, p)
				m.TaskID = task.ID
				return asTask(t)(c.SendMessage(t.Context(), &a2a.MessageSendParams{Message: m}))
			}
			if again := answer(a2a.TextPart{Text: "hmm"}); again.Status.State != a2a.TaskStateInputRequired || !strings.HasPrefix(statusText(again), "The answer was not understood.") {
				t.Errorf("after an answer not understood: %s %q", again.Status.State, statusText(again))
			}
			if pending, err := a.r.Approvals(t.Context(), a.b.Received()[0].Thread); err != nil || len(pending) != 1 || pending[0].Decision != nil {
				t.Errorf("approvals after an answer not understood = %+v, %v; want one pending", pending, err)
			}
			done := answer(tc.answer)
			if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(done), tc.wantText) {
				t.Errorf("after the decision: %s %q, want completed with %q", done.Status.State, artifactText(done), tc.wantText)
			}
			if got := a.refunds.Load(); got != tc.wantRefunds {
				t.Errorf("refunds = %d, want %d", got, tc.wantRefunds)
			}
		})
	}
}

var waitScript = &coretest.Script{Turns: []coretest.Turn{
	{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "wait"}}},
		{Text: "never said"},
	}},
	{Steps: []coretest.Step{{Text: "back: {{input}}"}}},
}}

// TestServeCancel: tasks/cancel of a task whose run goes on stops the
// run and abandons the turn (the service is told), the task canceled;
// the context then takes a new task on the same thread.
func TestServeCancel(t *testing.T) {
	a := newAgent(t, waitScript)
	c := a.client(t, "ana")
	type outcome struct {
		task *a2a.Task
		err  error
	}
	sent := make(chan outcome, 1)
	ctxID := a2a.NewContextID()
	go func() {
		p := userText("wait for it")
		p.Message.ContextID = ctxID
		res, err := c.SendMessage(t.Context(), p)
		task, _ := res.(*a2a.Task)
		sent <- outcome{task, err}
	}()
	select {
	case <-a.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait call did not start")
	}
	taskID := waitTask(t, a, c, ctxID)
	canceled, err := c.CancelTask(t.Context(), &a2a.TaskIDParams{ID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if canceled.Status.State != a2a.TaskStateCanceled {
		t.Errorf("tasks/cancel = %s, want canceled", canceled.Status.State)
	}
	if o := <-sent; o.err != nil || o.task.Status.State != a2a.TaskStateCanceled {
		t.Errorf("message/send of the canceled task = %v, %v; want the task canceled", o.task, o.err)
	}
	var kinds []string
	for _, r := range a.b.Received() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]string{"input", "cancel"}, kinds); diff != "" {
		t.Errorf("the service received (-want +got):\n%s", diff)
	}
	p := userText("hello")
	p.Message.ContextID = ctxID
	if next := asTask(t)(c.SendMessage(t.Context(), p)); artifactText(next) != "back: hello" {
		t.Errorf("next task = %s %q", next.Status.State, artifactText(next))
	}
	if again, err := c.CancelTask(t.Context(), &a2a.TaskIDParams{ID: taskID}); err != nil || again.Status.State != a2a.TaskStateCanceled {
		t.Errorf("cancel of a canceled task = %v, %v; want it canceled still", again, err)
	}
	if n := len(a.b.Received()); n != 3 {
		t.Errorf("the service received %d requests, want 3 (a second cancel sends nothing)", n)
	}
}

// waitTask returns the id of the task going on in context ctxID, found by
// a message refused for it.
func waitTask(t *testing.T, a *agent, c *a2aclient.Client, ctxID string) a2a.TaskID {
	t.Helper()
	p := userText("another")
	p.Message.ContextID = ctxID
	_, err := c.SendMessage(t.Context(), p)
	if err == nil || !strings.Contains(err.Error(), "going on") {
		t.Fatalf("a second task on a busy context: %v, want it refused", err)
	}
	i := strings.Index(err.Error(), `task "`)
	rest := err.Error()[i+len(`task "`):]
	return a2a.TaskID(rest[:strings.IndexByte(rest, '"')])
}

// TestServeBadInput: malformed and refused requests get clear errors.
func TestServeBadInput(t *testing.T) {
	a := newAgent(t, lookupScript)
	post := func(user, body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.Header.Set("X-User", user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := func(parts string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[` + parts + `]}}}`
	}
	for _, tc := range []struct {
		name, user, body string
		wantStatus       int
		want             string
	}{
		{"malformed", "ana", `{"jsonrpc":"2.0","id":1,"method":`, 200, `"code":-32700`},
		{"no identity", "", send(`{"kind":"text","text":"hi"}`), 401, "no identity"},
		{"oversized", "ana", send(`{"kind":"text","text":"` + strings.Repeat("x", 2<<20) + `"}`), 413, "bounded to 1048576 bytes"},
		{"long text", "ana", send(`{"kind":"text","text":"` + strings.Repeat("x", 40<<10) + `"}`), 200, "longer than 32768 bytes"},
		{"file part", "ana", send(`{"kind":"file","file":{"uri":"https://example.com/a.pdf"}}`), 200, "text and data parts only"},
		{"empty", "ana", send(`{"kind":"text","text":"  "}`), 200, "no text"},
		{"unknown task", "ana", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`, 200, `task \"nope\": task not found`},
		{"unknown method", "ana", `{"jsonrpc":"2.0","id":1,"method":"tasks/nope","params":{}}`, 200, `"code":-32601`},
		{"push config", "ana", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"x","pushNotificationConfig":{"url":"https://example.com"}}}`, 200, "push notification not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.user, tc.body)
			if status != tc.wantStatus || !strings.Contains(body, tc.want) {
				t.Errorf("= %d %s, want %d with %q", status, body, tc.wantStatus, tc.want)
			}
		})
	}
	if n := len(a.b.Received()); n != 0 {
		t.Errorf("the service received %d requests, want none", n)
	}
}

// TestServeCard: the card names the handler's mount, under
// http.StripPrefix too, or ServeOptions.URL; Skills replace the tools'.
func TestServeCard(t *testing.T) {
	_, h, err := agentHandler(lookupScript, "")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/agents/shop/", http.StripPrefix("/agents/shop", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), srv.URL+"/agents/shop")
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.URL + "/agents/shop/"; card.URL != want {
		t.Errorf("card URL = %q, want %q", card.URL, want)
	}

	given := a2atools.NewHandler(&core.Runner{}, &a2atools.ServeOptions{
		Identity: func(*http.Request) (string, error) { return "x", nil },
		URL:      "https://agents.example.com/shop",
		Skills:   []a2a.AgentSkill{{ID: "refunds", Name: "Refunds"}},
	})
	srv2 := httptest.NewServer(given)
	t.Cleanup(srv2.Close)
	card, err = agentcard.DefaultResolver.Resolve(t.Context(), srv2.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != "https://agents.example.com/shop" || len(card.Skills) != 1 || card.Skills[0].ID != "refunds" {
		t.Errorf("card = URL %q, skills %+v; want the options'", card.URL, card.Skills)
	}
}

// TestServeIdentities: another identity can neither get, cancel nor
// answer a task, nor continue its context; a browser's page of another
// origin is refused; an identity's requests in flight are bounded.
func TestServeIdentities(t *testing.T) {
	a := newAgent(t, refundScript)
	task := asTask(t)(a.client(t, "ana").SendMessage(t.Context(), userText("refund order 7")))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("task = %s, want input-required", task.Status.State)
	}
	bob := a.client(t, "bob")
	if _, err := bob.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's cancel: %v, want task not found", err)
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "approve"})
	m.TaskID = task.ID
	if _, err := bob.SendMessage(t.Context(), &a2a.MessageSendParams{Message: m}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's approval: %v, want task not found", err)
	}
	p := userText("hello")
	p.Message.ContextID = task.ContextID
	if _, err := bob.SendMessage(t.Context(), p); err == nil || !strings.Contains(err.Error(), "belongs to another caller") {
		t.Errorf("bob's message on ana's context: %v, want it refused", err)
	}
	if a.refunds.Load() != 0 {
		t.Error("a refund was made")
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL, strings.NewReader(`{}`))
	req.Header.Set("X-User", "ana")
	req.Header.Set("Origin", "https://evil.example.com")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site page's request = %d, want 403", resp.StatusCode)
	}
}

// TestServeInFlight: past MaxInFlight requests of one identity at once,
// the next is refused (429); another identity is served.
func TestServeInFlight(t *testing.T) {
	wa := newAgent(t, waitScript)
	h := a2atools.NewHandler(wa.r, &a2atools.ServeOptions{
		Identity:    func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		MaxInFlight: 1,
		Logger:      quiet,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	post := func(ctx context.Context, user, body string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		if user == "ana" && resp.StatusCode == 200 {
			// The stream goes on until ctx ends.
			io.Copy(io.Discard, resp.Body)
		}
		return resp.StatusCode
	}
	go post(ctx, "ana", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"wait"}]}}}`)
	select {
	case <-wa.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait call did not start")
	}
	get := `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"x"}}`
	if got := post(t.Context(), "ana", get); got != http.StatusTooManyRequests {
		t.Errorf("ana's second request = %d, want 429", got)
	}
	if got := post(t.Context(), "bob", get); got != http.StatusOK {
		t.Errorf("bob's request = %d, want 200", got)
	}
}

// TestServeMaxTasks: past MaxTasks, the oldest task that ended is
// forgotten; while every task kept goes on, a new one is refused.
func TestServeMaxTasks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script *coretest.Script
		want   string // what becomes of the third task
	}{
		{"ended", lookupScript, "the first forgotten"},
		{"going on", refundScript, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := newAgent(t, tc.script)
			srv := httptest.NewServer(a2atools.NewHandler(ag.r, &a2atools.ServeOptions{
				Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
				MaxTasks: 2,
				Logger:   quiet,
			}))
			t.Cleanup(srv.Close)
			ag.Server.URL = srv.URL // the client reads this server's card
			c := ag.client(t, "ana")
			var ids []a2a.TaskID
			for range 2 {
				ids = append(ids, asTask(t)(c.SendMessage(t.Context(), userText("where is order 7?"))).ID)
			}
			res, err := c.SendMessage(t.Context(), userText("where is order 7?"))
			got := ""
			switch {
			case err != nil && strings.Contains(err.Error(), "too many tasks going on"):
				got = "refused"
			case err == nil:
				if _, gerr := c.GetTask(t.Context(), &a2a.TaskQueryParams{ID: ids[0]}); errors.Is(gerr, a2a.ErrTaskNotFound) {
					if _, gerr := c.GetTask(t.Context(), &a2a.TaskQueryParams{ID: res.(*a2a.Task).ID}); gerr == nil {
						got = "the first forgotten"
					}
				}
			}
			if got != tc.want {
				t.Errorf("the third task: %v, %v; want %s", res, err, tc.want)
			}
		})
	}
}
