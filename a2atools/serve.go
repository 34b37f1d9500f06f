package a2atools

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/defaults"
	"github.com/toolrelay/toolrelay/internal/inflight"
	"github.com/toolrelay/toolrelay/internal/usertext"
)

// Defaults of [ServeOptions].
const (
	DefaultMaxBodyBytes  = 1 << 20 // 1 MiB
	DefaultMaxInputBytes = 32 << 10
	DefaultMaxInFlight   = 4
	DefaultMaxTasks      = 10000
)

// A Runner runs the turns of the tasks an A2A agent is sent: a
// *core.Runner, a *temporal.Runner, or any runner with their methods, as
// [core.Runner] documents them.
type Runner interface {
	// Stream starts a run of input, streamed.
	Stream(ctx context.Context, input string, opts *core.RunOptions) *core.Stream
	// ResumeStream resumes, streamed, the run left on thread.
	ResumeStream(ctx context.Context, thread string, opts *core.RunOptions) *core.Stream
	// Approvals lists the approvals of thread's calls.
	Approvals(ctx context.Context, thread string) ([]core.Approval, error)
	// Decide records a decision about a call awaiting one.
	Decide(ctx context.Context, thread, callID string, d core.Decision) error
	// Cancel abandons the turn waiting on thread.
	Cancel(ctx context.Context, thread string) error
}

var _ Runner = (*core.Runner)(nil)

// ServeOptions configure the A2A agent [NewHandler] serves. Identity is
// required; the rest may be left zero.
type ServeOptions struct {
	// Identity names the caller of a request, as the program
	// authenticated it (a bearer token, its proxy's header, …); the
	// handler authenticates nothing itself. A request whose identity is
	// empty, or whose Identity fails, is refused (401) before its body
	// is read. A task, and its context, belong to the identity that
	// created it: to any other, it does not exist (task not found).
	// Identity also names who decided an approval (core.Decision.Actor).
	Identity func(*http.Request) (string, error)
	// Name and Description name the agent in its card; empty means
	// "toolrelay agent" and a sentence naming its tools.
	Name, Description string
	// Version is the agent's version in its card; empty means "1".
	Version string
	// URL is where the agent is served (the JSON-RPC endpoint, as the
	// card says); empty means the URL each card request was made to,
	// its path that of the handler's mount (the card's path cut off).
	URL string
	// Skills are the skills the card lists; nil means one per tool of
	// the runner's toolbox, for a runner that has one (a Toolbox()
	// *core.Toolbox method, as core's).
	Skills []a2a.AgentSkill
	// TrustedOrigins are origins ("https://app.example.com") whose pages
	// may POST to the agent from a browser. Cross-origin requests from
	// browsers are refused (403) otherwise (see
	// http.CrossOriginProtection); clients that are not browsers are
	// not affected.
	TrustedOrigins []string
	// MaxBodyBytes bounds a request's body (413 past it). Zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInputBytes bounds the text of a message (an InvalidParams
	// error past it). Zero means DefaultMaxInputBytes.
	MaxInputBytes int
	// MaxInFlight bounds the requests of one identity being served at
	// once, streams included (429 past it). Zero means
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxTasks bounds the tasks the handler keeps: past it, the oldest
	// task that ended is forgotten, and a new task is refused while
	// every task kept is still going on. Zero means DefaultMaxTasks.
	MaxTasks int
	// RunOptions, if set, returns the options of each run (its time
	// limit, step limit, budget); the handler sets their Thread and
	// NoWait.
	RunOptions func(ctx context.Context) *core.RunOptions
	// ErrorText returns the text a client is told for a run that
	// failed. It must hold nothing internal: nil means a message by the
	// error's code, such as "The agent's service is unavailable. Try
	// again later. (Unavailable)".
	ErrorText func(error) string
	// Logger receives what the client is not told: the errors behind
	// failed runs. Nil means slog.Default().
	Logger *slog.Logger
}

// server is the A2A agent of a runner; see [NewHandler].
type server struct {
	r    Runner
	opts ServeOptions
	reg  *registry
	cop  *http.CrossOriginProtection
	rpc  http.Handler
	card http.Handler

	inFlight inflight.Limits // per identity
}

// NewHandler returns an http.Handler serving runner as an A2A agent over
// JSON-RPC (a2a-go's server, protocol 0.3): its agent card at
// /.well-known/agent-card.json below the mount, and message/send,
// message/stream, tasks/get, tasks/cancel and tasks/resubscribe at the
// mount itself:
//
//	mux.Handle("/agent/", http.StripPrefix("/agent", a2atools.NewHandler(runner, &a2atools.ServeOptions{Identity: userOf})))
//
// Each A2A context is a thread of the runner, its first message starting
// it; each task is a turn on it, one at a time: a message for a new task
// on a context whose task is still going on or awaits input is refused.
// A message's text parts (and its data parts, as JSON) are the run's
// input; a file part is refused. The run's text comes as artifacts, one
// per message of the model (streamed in pieces to message/stream, whole
// in the task); the task then completes, or fails with a message by
// error code (ServeOptions.ErrorText), or is canceled (tasks/cancel
// stops the run and abandons the turn: core.Runner.Cancel).
//
// A run that pauses for a person's approval (core.ErrAwaitingApproval)
// leaves its task input-required, its status message naming the calls
// awaiting a decision, as text and as a data part
// {"approvals": [{"callId", "name", "arguments", "why"}]}. The next
// message on the task decides them: a data part {"approve": true|false,
// "reason": "…"} (every call), or {"decisions": [{"callId", "approve",
// "reason"}]}, or the text "approve" or "deny" (every call); the
// handler records the decisions (core.Runner.Decide, by the request's
// identity) and resumes the run on the same task.
//
// NewHandler panics if opts or opts.Identity is nil, or on a trusted
// origin that is not one.
func NewHandler(runner Runner, opts *ServeOptions) http.Handler {
	if opts == nil || opts.Identity == nil {
		panic("a2atools: NewHandler needs ServeOptions.Identity")
	}
	s := &server{r: runner, opts: *opts}
	o := &s.opts
	defaults.Positive(&o.MaxBodyBytes, DefaultMaxBodyBytes)
	defaults.Positive(&o.MaxInputBytes, DefaultMaxInputBytes)
	defaults.Positive(&o.MaxInFlight, DefaultMaxInFlight)
	defaults.Positive(&o.MaxTasks, DefaultMaxTasks)
	if o.ErrorText == nil {
		o.ErrorText = usertext.Of
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s.cop = http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := s.cop.AddTrustedOrigin(origin); err != nil {
			panic("a2atools: ServeOptions.TrustedOrigins: " + err.Error())
		}
	}
	s.reg = newRegistry(o.MaxTasks)
	ex := &executor{s: s}
	rh := a2asrv.NewHandler(ex, a2asrv.WithTaskStore(s.reg), a2asrv.WithLogger(o.Logger))
	s.rpc = a2asrv.NewJSONRPCHandler(&guard{RequestHandler: rh, s: s})
	s.card = a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(s.agentCard))
	return s
}

// identityKey carries a request's identity in its context, and so in the
// contexts of the runs it starts.
type identityKey struct{}

// endpointKey carries the URL a card request was made to, its card path
// cut off.
type endpointKey struct{}

func identity(ctx context.Context) string {
	who, _ := ctx.Value(identityKey{}).(string)
	return who
}

// ServeHTTP implements http.Handler.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, a2asrv.WellKnownAgentCardPath) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		// The path as the client asked for it (RequestURI), which
		// http.StripPrefix leaves whole, the handler's mount included.
		path := r.URL.Path
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil && strings.HasSuffix(u.Path, a2asrv.WellKnownAgentCardPath) {
			path = u.Path
		}
		base := scheme + "://" + r.Host + strings.TrimSuffix(path, a2asrv.WellKnownAgentCardPath)
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		s.card.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), endpointKey{}, base)))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: A2A's JSON-RPC requests are POSTs", http.StatusMethodNotAllowed)
		return
	}
	if err := s.cop.Check(r); err != nil {
		http.Error(w, "Forbidden: a cross-origin request from a page of an untrusted origin (see a2atools.ServeOptions.TrustedOrigins)", http.StatusForbidden)
		return
	}
	who, err := s.opts.Identity(r)
	if err != nil || who == "" {
		if err != nil {
			s.opts.Logger.InfoContext(r.Context(), "a2atools: no identity", "error", err)
		}
		http.Error(w, "Unauthorized: no identity", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		http.Error(w, fmt.Sprintf("Request Entity Too Large: the body is bounded to %d bytes", s.opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	if !s.inFlight.Enter(who, s.opts.MaxInFlight) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too Many Requests: too many requests of this identity at once", http.StatusTooManyRequests)
		return
	}
	defer s.inFlight.Leave(who)
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	s.rpc.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, who)))
}

// agentCard returns the agent's card.
func (s *server) agentCard(ctx context.Context) (*a2a.AgentCard, error) {
	o := &s.opts
	endpoint := o.URL
	if endpoint == "" {
		endpoint, _ = ctx.Value(endpointKey{}).(string)
	}
	skills := o.Skills
	var names []string
	if tb, ok := s.r.(interface{ Toolbox() *core.Toolbox }); ok && tb.Toolbox() != nil {
		for _, t := range tb.Toolbox().Tools() {
			names = append(names, t.Name())
			if o.Skills == nil {
				skills = append(skills, a2a.AgentSkill{ID: t.Name(), Name: t.Name(), Description: t.Description(), Tags: []string{"tool"}})
			}
		}
	}
	desc := o.Description
	if desc == "" {
		desc = "An agent served by toolrelay."
		if len(names) > 0 {
			desc = "An agent served by toolrelay, whose tools are " + strings.Join(names, ", ") + "."
		}
	}
	if skills == nil {
		skills = []a2a.AgentSkill{{ID: "chat", Name: "chat", Description: desc, Tags: []string{"chat"}}}
	}
	return &a2a.AgentCard{
		Name:               cmpOr(o.Name, "toolrelay agent"),
		Description:        desc,
		Version:            cmpOr(o.Version, "1"),
		ProtocolVersion:    "0.3.0",
		URL:                endpoint,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain"},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		Skills:             skills,
	}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// guard checks, before a2a-go's handler sees a request, that the task it
// names belongs to the caller, and refuses what the agent does not do
// (push notifications).
type guard struct {
	a2asrv.RequestHandler
	s *server
}

// errNotYours is the error of a request naming a task of another
// identity, or one the handler does not know: the same to the caller.
func errNoTask(id a2a.TaskID) error {
	return fmt.Errorf("task %q: %w", id, a2a.ErrTaskNotFound)
}

func (g *guard) owned(ctx context.Context, id a2a.TaskID) error {
	if id == "" {
		return fmt.Errorf("no task id: %w", a2a.ErrInvalidParams)
	}
	if !g.s.reg.owns(identity(ctx), id) {
		return errNoTask(id)
	}
	return nil
}

// OnGetTask implements a2asrv.RequestHandler.
func (g *guard) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q == nil {
		return nil, a2a.ErrInvalidParams
	}
	if err := g.owned(ctx, q.ID); err != nil {
		return nil, err
	}
	return g.RequestHandler.OnGetTask(ctx, q)
}

// OnCancelTask implements a2asrv.RequestHandler.
func (g *guard) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	if p == nil {
		return nil, a2a.ErrInvalidParams
	}
	if err := g.owned(ctx, p.ID); err != nil {
		return nil, err
	}
	return g.RequestHandler.OnCancelTask(ctx, p)
}

// OnResubscribeToTask implements a2asrv.RequestHandler.
func (g *guard) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	if p == nil {
		return single(a2a.ErrInvalidParams)
	}
	if err := g.owned(ctx, p.ID); err != nil {
		return single(err)
	}
	return g.RequestHandler.OnResubscribeToTask(ctx, p)
}

// OnSendMessage implements a2asrv.RequestHandler.
func (g *guard) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	if err := g.admit(ctx, p); err != nil {
		return nil, err
	}
	for pause := time.Duration(0); ; {
		res, err := g.RequestHandler.OnSendMessage(ctx, p)
		if pause = g.again(ctx, p, err, pause); pause == 0 {
			return res, err
		}
	}
}

// OnSendMessageStream implements a2asrv.RequestHandler.
func (g *guard) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	if err := g.admit(ctx, p); err != nil {
		return single(err)
	}
	return func(yield func(a2a.Event, error) bool) {
		for pause := time.Duration(0); ; {
			first := true
			retry := false
			for ev, err := range g.RequestHandler.OnSendMessageStream(ctx, p) {
				if first && err != nil {
					if pause = g.again(ctx, p, err, pause); pause != 0 {
						retry = true
						break
					}
				}
				first = false
				if !yield(ev, err) {
					return
				}
			}
			if !retry {
				return
			}
		}
	}
}

// maxSettle bounds the wait for a2a-go to let a task go after its run.
const maxSettle = 2 * time.Second

// again reports, for a message on a task refused with err, how long to
// pause before trying again (0: not again). a2a-go (v0.3.3) lets a task's
// execution go a moment after its last event was sent: a message that
// answers an input-required task at once can find it "already in
// progress" though its run ended. Such a message is tried again, after a
// growing pause, for at most maxSettle in all; not when the task's run
// really goes on.
func (g *guard) again(ctx context.Context, p *a2a.MessageSendParams, err error, waited time.Duration) time.Duration {
	if err == nil || p.Message.TaskID == "" || waited >= maxSettle || !strings.Contains(err.Error(), "task execution is already in progress") || g.s.reg.running(p.Message.TaskID) {
		return 0
	}
	pause := min(max(2*waited, 5*time.Millisecond), 100*time.Millisecond)
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0
	case <-t.C:
	}
	return waited + pause
}

// OnSetTaskPushConfig implements a2asrv.RequestHandler: the agent sends
// no push notifications.
func (g *guard) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

// admit checks a message before a2a-go's handler makes or loads its task:
// its size and parts, its task (the caller's) or its context (the
// caller's, with no task going on), and that a new task can be kept.
func (g *guard) admit(ctx context.Context, p *a2a.MessageSendParams) error {
	if p == nil || p.Message == nil {
		return fmt.Errorf("no message: %w", a2a.ErrInvalidParams)
	}
	if p.Config != nil && p.Config.PushConfig != nil {
		return a2a.ErrPushNotificationNotSupported
	}
	m := p.Message
	if _, err := input(m, g.s.opts.MaxInputBytes); err != nil {
		return err
	}
	who := identity(ctx)
	if m.TaskID != "" {
		return g.owned(ctx, m.TaskID)
	}
	return g.s.reg.admit(who, m.ContextID)
}

// single returns a sequence of err alone.
func single(err error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
}

// input returns the run's input of message m: its text parts, and its
// data parts as JSON, a line each; an error for a file part, for no text,
// or for more than max bytes.
func input(m *a2a.Message, max int) (string, error) {
	var lines []string
	n := 0
	for _, p := range m.Parts {
		var s string
		switch p := p.(type) {
		case a2a.TextPart:
			s = p.Text
		case a2a.DataPart:
			b, err := json.Marshal(p.Data)
			if err != nil {
				return "", fmt.Errorf("a data part that is not JSON: %w", a2a.ErrInvalidParams)
			}
			s = string(b)
		default:
			return "", fmt.Errorf("a %T: this agent takes text and data parts only: %w", p, a2a.ErrUnsupportedContentType)
		}
		if n += len(s); n > max {
			return "", fmt.Errorf("the message's text is longer than %d bytes: %w", max, a2a.ErrInvalidParams)
		}
		lines = append(lines, s)
	}
	text := strings.Join(lines, "\n")
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("the message has no text: %w", a2a.ErrInvalidParams)
	}
	return text, nil
}
