package a2atools_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/a2atools"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// remoteAgent is an a2a-go server whose agent answers by the message's
// text: "hello" completes; "ask" asks which order, and an answer on its
// task completes with it; "fail" fails; "slow" works until release is
// closed; "big" answers 64 KiB.
type remoteAgent struct {
	*httptest.Server
	mu       sync.Mutex
	received []string // the texts received, in order
	headers  []string // the Authorization header of each request
	started  chan struct{}
	release  chan struct{}
}

func (ra *remoteAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	text := ""
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	ra.mu.Lock()
	ra.received = append(ra.received, text)
	ra.mu.Unlock()
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	// A status update before any artifact: a2a-go (v0.3.3) appends an
	// artifact to the task event last written, which its stream may be
	// encoding (a data race); a status update replaces it by a copy.
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	end := func(state a2a.TaskState, said string) error {
		var msg *a2a.Message
		if said != "" {
			msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: said})
		}
		ev := a2a.NewStatusUpdateEvent(rc, state, msg)
		ev.Final = true
		return q.Write(ctx, ev)
	}
	answer := func(s string) error {
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: s})); err != nil {
			return err
		}
		return end(a2a.TaskStateCompleted, "")
	}
	switch {
	case rc.StoredTask != nil:
		return answer("refunded order " + text)
	case text == "hello":
		return answer("hi there")
	case text == "ask":
		return end(a2a.TaskStateInputRequired, "Which order?")
	case text == "fail":
		return end(a2a.TaskStateFailed, "no such order")
	case text == "big":
		return answer(strings.Repeat("x", 64<<10))
	case text == "slow":
		ra.started <- struct{}{}
		<-ra.release
		return answer("slow answer")
	}
	return end(a2a.TaskStateRejected, "what?")
}

func (ra *remoteAgent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// newRemoteAgent serves a remoteAgent on loopback, its card saying
// whether it streams; its endpoint is endpoint if set.
func newRemoteAgent(t *testing.T, streaming bool, endpoint func(self string) string) *remoteAgent {
	t.Helper()
	ra := &remoteAgent{started: make(chan struct{}, 1), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(settling{a2asrv.NewHandler(ra, a2asrv.WithLogger(quiet))}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) {
		url := ra.URL + "/rpc"
		if endpoint != nil {
			url = endpoint(ra.URL)
		}
		return &a2a.AgentCard{
			Name: "Refund Desk", Description: "Refunds orders.", URL: url, Version: "1", ProtocolVersion: "0.3.0",
			PreferredTransport: a2a.TransportProtocolJSONRPC, Capabilities: a2a.AgentCapabilities{Streaming: streaming},
			DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		}, nil
	})))
	ra.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ra.mu.Lock()
		ra.headers = append(ra.headers, r.Header.Get("Authorization"))
		ra.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		select {
		case <-ra.release:
		default:
			close(ra.release)
		}
		ra.Server.Close()
	})
	return ra
}

// settling tries a message on a task again while a2a-go (v0.3.3) still
// holds the task's execution that just ended (an answer sent at once to
// an input-required task is refused "already in progress" otherwise), as
// NewHandler's server does.
type settling struct{ a2asrv.RequestHandler }

func (s settling) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	for i := 0; ; i++ {
		res, err := s.RequestHandler.OnSendMessage(ctx, p)
		if err == nil || i == 100 || !strings.Contains(err.Error(), "already in progress") {
			return res, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s settling) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for i := 0; ; i++ {
			first, again := true, false
			for ev, err := range s.RequestHandler.OnSendMessageStream(ctx, p) {
				if first && err != nil && i < 100 && strings.Contains(err.Error(), "already in progress") {
					again = true
					break
				}
				first = false
				if !yield(ev, err) {
					return
				}
			}
			if !again {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (ra *remoteAgent) texts() []string {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return append([]string(nil), ra.received...)
}

// callTool answers one call of tool with args, as a run's step would,
// through a runner whose toolbox holds it.
func callTool(t *testing.T, r *core.Runner, id, args string, again bool) (string, bool) {
	t.Helper()
	res, err := r.Call(t.Context(), &core.CallRequest{
		Call:  core.Call{Thread: "th", Turn: "tu", ID: id, Name: r.Toolbox().Tools()[0].Name(), Arguments: json.RawMessage(args)},
		Again: again,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed {
		return res.Error, true
	}
	return res.Output.Text, false
}

func runnerOf(t *testing.T, tool *core.Tool, j journaldriver.Journal) *core.Runner {
	t.Helper()
	tb, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, nil), tb, &core.Options{Logger: quiet, Journal: j})
	t.Cleanup(func() { r.Close() })
	return r
}

// TestTool: a remote agent's tool, named and described from its card,
// answers with the task's artifact, over message/stream and over
// message/send with tasks/get; a question of the agent is a failed call
// naming the task, and a call with its task_id answers it on the same
// task; a failed task and an unknown task are failed calls saying so.
func TestTool(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "send"}[streaming], func(t *testing.T) {
			ra := newRemoteAgent(t, streaming, nil)
			tool, err := a2atools.NewTool(t.Context(), ra.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name() != "refund_desk" || tool.Description() != "Refunds orders." {
				t.Errorf("tool = %q %q, want the card's name and description", tool.Name(), tool.Description())
			}
			r := runnerOf(t, tool, nil)
			if out, failed := callTool(t, r, "c1", `{"message": "hello"}`, false); failed || out != "hi there" {
				t.Errorf("hello = %q (failed %v), want hi there", out, failed)
			}
			out, failed := callTool(t, r, "c2", `{"message": "ask"}`, false)
			if !failed || !strings.Contains(out, "needs more input before it goes on: Which order?") {
				t.Fatalf("ask = %q (failed %v), want the agent's question", out, failed)
			}
			i := strings.Index(out, `task_id "`) + len(`task_id "`)
			taskID := out[i : i+strings.IndexByte(out[i:], '"')]
			args, _ := json.Marshal(map[string]string{"message": "7", "task_id": taskID})
			if out, failed := callTool(t, r, "c3", string(args), false); failed || out != "refunded order 7" {
				t.Errorf("the answer = %q (failed %v), want the task completed", out, failed)
			}
			for _, tc := range []struct{ args, want string }{
				{`{"message": "fail"}`, `could not do it (failed): no such order`},
				{`{"message": "7", "task_id": "nope"}`, "does not know the task"},
				{`{"message": " "}`, "the message is empty"},
			} {
				if out, failed := callTool(t, r, "c4", tc.args, false); !failed || !strings.Contains(out, tc.want) {
					t.Errorf("%s = %q (failed %v), want a failure with %q", tc.args, out, failed, tc.want)
				}
			}
			if diff := cmp.Diff([]string{"hello", "ask", "7", "fail"}, ra.texts()); diff != "" {
				t.Errorf("the agent received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToolResume: a call whose run ended while the agent worked on its
// task (a crash, a takeover) is found started and not finished: with the
// journal's notes, it asks the agent about the same task and gets its
// answer, the message sent once; without them, its outcome is unknown and
// nothing is sent again.
func TestToolResume(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "send"}[streaming], func(t *testing.T) {
			ra := newRemoteAgent(t, streaming, nil)
			j := journaldriver.NewMemory()
			tool, err := a2atools.NewTool(t.Context(), ra.URL, &a2atools.ToolOptions{Notes: j, PollInterval: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			r := runnerOf(t, tool, j)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := r.Call(ctx, &core.CallRequest{Call: core.Call{Thread: "th", Turn: "tu", ID: "c1", Name: tool.Name(), Arguments: json.RawMessage(`{"message": "slow"}`)}})
				done <- err
			}()
			<-ra.started
			// The call notes its task's id as soon as the agent names it.
			for deadline := time.Now().Add(10 * time.Second); ; {
				if _, ok, _ := j.Note(t.Context(), "a2atools", "th", "task/tu/c1"); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the call's task was not noted")
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the interrupted call: no error")
			}
			close(ra.release)
			if out, failed := callTool(t, r, "c1", `{"message": "slow"}`, true); failed || out != "slow answer" {
				t.Errorf("the call again = %q (failed %v), want the task's answer", out, failed)
			}
			if diff := cmp.Diff([]string{"slow"}, ra.texts()); diff != "" {
				t.Errorf("the agent received (-want +got):\n%s", diff)
			}

			// A noted task the agent forgot: the outcome is unknown, and
			// nothing is sent.
			if err := j.SetNote(t.Context(), "a2atools", "th", "task/tu/c9", "forgotten"); err != nil {
				t.Fatal(err)
			}
			if out, failed := callTool(t, r, "c9", `{"message": "slow"}`, false); !failed || !strings.Contains(out, "no longer knows the task") {
				t.Errorf("a forgotten task = %q (failed %v), want its outcome unknown", out, failed)
			}

			// Without notes, the call's outcome is unknown.
			bare, err := a2atools.NewTool(t.Context(), ra.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if out, failed := callTool(t, runnerOf(t, bare, nil), "c1", `{"message": "slow"}`, true); !failed || !strings.Contains(out, "outcome of this call") {
				t.Errorf("without notes = %q (failed %v), want its outcome unknown", out, failed)
			}
			if n := len(ra.texts()); n != 1 {
				t.Errorf("the agent received %d messages, want 1", n)
			}
		})
	}
}

// TestToolOrigins: headers go to the card's origin only, over https or
// loopback: a card naming an endpoint on another origin, a redirect to
// another origin (of the card, or of a call) send nothing there.
func TestToolOrigins(t *testing.T) {
	auth := &a2atools.ToolOptions{Headers: map[string]string{"Authorization": "Bearer s3cret"}}
	other := newRemoteAgent(t, false, nil)

	if _, err := a2atools.NewTool(t.Context(), "http://agents.example.com", auth); errcode.Of(err) != errcode.InvalidArgument || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("headers over plain http: %v, want InvalidArgument without the secret", err)
	}

	elsewhere := newRemoteAgent(t, false, func(string) string { return other.URL + "/rpc" })
	if _, err := a2atools.NewTool(t.Context(), elsewhere.URL, auth); errcode.Of(err) != errcode.PermissionDenied {
		t.Errorf("a card naming another origin: %v, want PermissionDenied", err)
	}

	redirector := httptest.NewServer(http.RedirectHandler(other.URL+a2asrv.WellKnownAgentCardPath, http.StatusFound))
	t.Cleanup(redirector.Close)
	if _, err := a2atools.NewTool(t.Context(), redirector.URL, auth); errcode.Of(err) != errcode.PermissionDenied {
		t.Errorf("a card redirected to another origin: %v, want PermissionDenied", err)
	}

	// An endpoint that redirects the call to another origin.
	var self string
	mux := http.NewServeMux()
	mux.Handle("/rpc", http.RedirectHandler(other.URL+"/rpc", http.StatusTemporaryRedirect))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2a.AgentCard, error) {
		return &a2a.AgentCard{Name: "hop", URL: self + "/rpc", PreferredTransport: a2a.TransportProtocolJSONRPC}, nil
	})))
	hop := httptest.NewServer(mux)
	t.Cleanup(hop.Close)
	self = hop.URL
	tool, err := a2atools.NewTool(t.Context(), hop.URL, auth)
	if err != nil {
		t.Fatal(err)
	}
	if out, failed := callTool(t, runnerOf(t, tool, nil), "c1", `{"message": "hello"}`, false); !failed || !strings.Contains(out, "redirected the call to another origin") {
		t.Errorf("a call redirected = %q (failed %v), want it refused", out, failed)
	}
	other.mu.Lock()
	if len(other.headers) != 0 {
		t.Errorf("the other origin got %d requests, want none", len(other.headers))
	}
	other.mu.Unlock()

	// The card's own origin gets the headers.
	own := newRemoteAgent(t, true, nil)
	tool, err = a2atools.NewTool(t.Context(), own.URL+a2asrv.WellKnownAgentCardPath, auth)
	if err != nil {
		t.Fatal(err)
	}
	if out, failed := callTool(t, runnerOf(t, tool, nil), "c1", `{"message": "hello"}`, false); failed || out != "hi there" {
		t.Errorf("hello = %q (failed %v)", out, failed)
	}
	own.mu.Lock()
	defer own.mu.Unlock()
	for _, h := range own.headers {
		if h != "Bearer s3cret" {
			t.Errorf("a request to the card's origin had Authorization %q", h)
		}
	}
}

// TestToolLimits: an answer larger than MaxResponseBytes is a failed
// call saying so; a card that cannot be read is an error with a code.
func TestToolLimits(t *testing.T) {
	ra := newRemoteAgent(t, false, nil)
	tool, err := a2atools.NewTool(t.Context(), ra.URL, &a2atools.ToolOptions{MaxResponseBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if out, failed := callTool(t, runnerOf(t, tool, nil), "c1", `{"message": "big"}`, false); !failed || !strings.Contains(out, "more than this program reads") {
		t.Errorf("big = %q (failed %v), want it refused", out, failed)
	}
	if _, err := a2atools.NewTool(t.Context(), ra.URL+"/nope.json", nil); errcode.Of(err) != errcode.NotFound {
		t.Errorf("no card there: %v, want NotFound", err)
	}
}

// TestToolAgainstServe: a runner served by NewHandler is the remote agent
// of another runner's tool.
func TestToolAgainstServe(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "send"}[noStream], func(t *testing.T) {
			a := newAgent(t, lookupScript)
			tool, err := a2atools.NewTool(t.Context(), a.URL, &a2atools.ToolOptions{
				Headers: map[string]string{"X-User": "ana"}, NoStream: noStream, PollInterval: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if out, failed := callTool(t, runnerOf(t, tool, nil), "c1", `{"message": "where is order 7?"}`, false); failed || out != "Your order 7 is shipped." {
				t.Errorf("= %q (failed %v), want the served runner's answer", out, failed)
			}
		})
	}
}

// TestToolRunResumed: a run stopped while the remote agent works on its
// call's task (as a crash would), resumed by another runner on the same
// journal and service, gets the task's answer: the agent received the
// message once.
func TestToolRunResumed(t *testing.T) {
	ra := newRemoteAgent(t, true, nil)
	j := journaldriver.NewMemory()
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund_desk", Arguments: json.RawMessage(`{"message": "slow"}`)}}},
		{Text: `The desk says: {{output "refund_desk"}}`},
	}}}}
	service := coretest.NewBackend(script, nil)
	noted := make(chan struct{}, 1)
	newRunner := func() *core.Runner {
		tool, err := a2atools.NewTool(t.Context(), ra.URL, &a2atools.ToolOptions{Notes: signalNotes{j, noted}, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := core.NewToolbox(tool)
		if err != nil {
			t.Fatal(err)
		}
		return core.NewRunner(service, tb, &core.Options{Logger: quiet, Journal: j})
	}
	first := newRunner()
	ctx, cancel := context.WithCancel(t.Context())
	type outcome struct {
		res *core.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := first.Run(ctx, "refund order 7", nil)
		done <- outcome{res, err}
	}()
	<-ra.started
	select {
	case <-noted:
	case <-time.After(10 * time.Second):
		t.Fatal("the call's task was not noted")
	}
	cancel()
	o := <-done
	if o.err == nil || o.res == nil || o.res.Thread == "" {
		t.Fatalf("the stopped run = %+v, %v; want an error and its thread", o.res, o.err)
	}
	close(ra.release)
	second := newRunner()
	t.Cleanup(func() { second.Close() })
	res, err := second.Resume(t.Context(), o.res.Thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "The desk says: slow answer" {
		t.Errorf("the resumed run's answer = %q", res.Text)
	}
	if diff := cmp.Diff([]string{"slow"}, ra.texts()); diff != "" {
		t.Errorf("the agent received (-want +got):\n%s", diff)
	}
}

// signalNotes tells noted when a note is set.
type signalNotes struct {
	journaldriver.Notes
	noted chan struct{}
}

func (n signalNotes) SetNote(ctx context.Context, backend, thread, name, value string) error {
	err := n.Notes.SetNote(ctx, backend, thread, name, value)
	select {
	case n.noted <- struct{}{}:
	default:
	}
	return err
}
