package openai

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/defaults"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/owned"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// Defaults of [Options].
const (
	// DefaultModel is the model of an agent made from the toolbox when
	// Options.Model is empty.
	DefaultModel = "gpt-4.1-mini"
	// DefaultMaxReconnects bounds how often a dropped event stream is
	// resumed within one Start, Submit or Resume.
	DefaultMaxReconnects = 3
	// DefaultPollInterval is the pause between two reads of the session in
	// polling mode.
	DefaultPollInterval = time.Second
)

// Delivery says how a backend follows a turn.
type Delivery string

// The deliveries of the sessions API.
const (
	// Streaming follows the session's event stream (the default).
	Streaming Delivery = "streaming"
	// Polling reads the session with GET requests every PollInterval.
	Polling Delivery = "polling"
)

// Options configure a [Backend]. nil is usable: the API key and base URL
// then come from OPENAI_API_KEY and OPENAI_BASE_URL, and an agent is made
// from the toolbox with DefaultModel.
type Options struct {
	// APIKey authenticates the requests; empty means OPENAI_API_KEY.
	APIKey string
	// BaseURL is the API's base URL; empty means OPENAI_BASE_URL, or the
	// SDK's default (https://api.openai.com/v1/). With an API key it must
	// be https, or http to a loopback host (127.0.0.0/8, ::1, localhost).
	BaseURL string
	// HTTPClient sends the requests; nil means openai-go's default
	// (http.DefaultClient). Tests set the fake server's client. openai-go
	// refuses a redirect to another origin with it too.
	HTTPClient *http.Client
	// RequestOptions are passed to the SDK client after the settings above
	// (so they win): retries, headers, middleware, and so on.
	RequestOptions []option.RequestOption

	// Agent names an existing agent, whose tools are defined on the
	// service; the toolbox then supplies only their implementations. Empty
	// means an agent is made from the toolbox on first use, with Model and
	// Instructions.
	Agent string
	// Model is the model of an agent made from the toolbox; empty means
	// DefaultModel.
	Model string
	// Instructions are the instructions of an agent made from the toolbox.
	Instructions string
	// SessionID, if set, is the session used by a run that names no thread,
	// instead of a new one. It is not deleted on Close.
	SessionID string
	// Keep keeps, on Close, the agent and the sessions this backend created;
	// by default the sessions whose run is over are deleted, and the agent
	// once no session uses it (see the package doc).
	Keep bool

	// Delivery says how a turn is followed: Streaming (the default,
	// empty) reads the session's event stream; Polling reads the session
	// with GET requests every PollInterval, for environments where a
	// long-lived stream is not possible.
	Delivery Delivery
	// PollInterval is the pause between reads in polling mode; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// MaxReconnects bounds how often a dropped event stream (or a request
	// whose outcome was lost) is resumed within one Start, Submit or Resume
	// before the run fails. Zero means DefaultMaxReconnects; negative means
	// never.
	MaxReconnects int

	// MaxResponseBytes bounds a response body (other than an event
	// stream), MaxEventBytes one event of a stream; a larger one fails the
	// request with a ResourceExhausted error. IdleTimeout bounds the wait
	// for an answer's headers, then for the whole of a body that is not a
	// stream (one dripped a byte at a time is idle: no progress toward a
	// complete response), or for the next bytes of a stream; MaxSilence
	// every wait for the next complete event of a stream (one with data:
	// keep-alive comments, fields without data and an event's partial
	// bytes do not reset it). A wait past either fails with a
	// DeadlineExceeded error that a resume can follow. Zero means the
	// default (64 MiB, 16 MiB, 10m, 10m); negative, no limit.
	MaxResponseBytes, MaxEventBytes int
	IdleTimeout, MaxSilence         time.Duration

	// Logger receives the backend's own messages (a dropped stream, a tool
	// the agent declares without an implementation). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Backend is the OpenAI Agents API sessions backend: a [driver.Backend] (with
// [driver.Canceler] and [driver.CapabilityReporter]) over the SDK's
// client.Beta.Agents. A thread is a session id; a turn is the service's
// turn id. Make one with [Open]; it is safe for concurrent use by runs on
// different threads.
type Backend struct {
	client oai.Client
	tools  *core.Toolbox
	opts   Options
	log    *slog.Logger

	life context.Context // ended by Close; bounds the event streams
	stop context.CancelFunc

	agentMu    sync.Mutex
	agentModel string          // the model of an existing agent (Options.Agent)
	agentID    string          // the agent new sessions run, made or found from the toolbox
	agentTools uint64          // the toolbox's version agentID was made (or found) for
	agents     map[string]bool // agents Close may delete (see useAgent)
	missing    []string

	mu      sync.Mutex
	threads map[string]*thread
	created []string        // sessions Close deletes: created here, or taken over (adopt)
	kept    map[string]bool // sessions Close leaves (KeepThread) until their run is over
	closed  bool
}

var (
	_ driver.Backend            = (*Backend)(nil)
	_ driver.Canceler           = (*Backend)(nil)
	_ driver.CapabilityReporter = (*Backend)(nil)
	_ driver.Keeper             = (*Backend)(nil)
)

// Open returns a backend whose runs call the tools of tools (which may be
// nil). opts may be nil. With Options.Agent, Open reads the agent
// (GET agents/{id}) and reports, through the logger and
// [Backend.MissingTools], every function it declares that tools does not
// implement; an unknown agent gives an error for which ErrorCode returns
// NotFound. Without it, the agent is made from tools on the first run.
//
// The API key is sent only to the base URL's origin: a base URL (opts or
// OPENAI_BASE_URL) that is not an http or https URL, or that is plain http
// to a host other than loopback (127.0.0.0/8, ::1, localhost) while there
// is a key, gives an InvalidArgument error naming it redacted; a request
// that would carry a key over plain http to such a host (as request
// options may make one) is refused. With no key (neither APIKey nor
// OPENAI_API_KEY) and no base URL, Open fails with FailedPrecondition,
// naming OPENAI_API_KEY, rather than send requests to the OpenAI API
// without one (with RequestOptions, which may set a key, the first
// request found without one is refused before it is sent). openai-go
// refuses a redirect to
// another origin, with the HTTP client of RequestOptions too when it is an
// *http.Client (another option.HTTPClient follows redirects as it will).
// A tool named in a namespace ("crm.lookup") is refused with
// InvalidArgument: sessions have no namespaces.
func Open(ctx context.Context, tools *core.Toolbox, opts *Options) (*Backend, error) {
	b := &Backend{tools: tools, threads: map[string]*thread{}}
	if opts != nil {
		b.opts = *opts
	}
	o := &b.opts
	if o.Model == "" {
		o.Model = DefaultModel
	}
	defaults.Positive(&o.PollInterval, DefaultPollInterval)
	switch o.Delivery {
	case "":
		o.Delivery = Streaming
	case Streaming, Polling:
	default:
		return nil, errcode.Errorf(errcode.InvalidArgument, "openai: unknown delivery (transport) %q: want %q or %q", o.Delivery, Streaming, Polling)
	}
	switch {
	case o.MaxReconnects == 0:
		o.MaxReconnects = DefaultMaxReconnects
	case o.MaxReconnects < 0:
		o.MaxReconnects = 0
	}
	b.log = o.Logger
	if b.log == nil {
		b.log = slog.Default()
	}
	if err := noNamespaces(tools); err != nil {
		return nil, err
	}
	if err := origin.CheckOpenAIBaseURL("openai: base URL", o.BaseURL, o.APIKey); err != nil {
		return nil, err
	}
	if err := origin.RequireOpenAIKey("openai: open", o.BaseURL, o.APIKey, len(o.RequestOptions) > 0); err != nil {
		return nil, err
	}
	var ropts []option.RequestOption
	if o.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(o.APIKey))
	}
	if o.BaseURL != "" {
		ropts = append(ropts, option.WithBaseURL(o.BaseURL))
	}
	// Redirects to another origin refused with a *origin.RedirectError
	// (PermissionDenied), as on every client of the module, before
	// openai-go's own origin check would.
	ropts = append(ropts, option.WithHTTPClient(origin.Client(o.HTTPClient)))
	// The middleware comes last, so that it sees the request as the
	// request options left it.
	lim := wirelimit.New(o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence)
	b.client = oai.NewClient(slices.Concat(ropts, o.RequestOptions, []option.RequestOption{option.WithMiddleware(lim.Do, origin.Middleware)})...)
	b.life, b.stop = context.WithCancel(context.WithoutCancel(ctx))
	if o.Agent != "" {
		if err := b.checkAgent(ctx); err != nil {
			b.stop()
			return nil, &errcode.Error{Code: b.ErrorCode(err), Op: "openai: open", Err: err}
		}
	}
	return b, nil
}

// Name implements [driver.Backend]: "openai".
func (b *Backend) Name() string { return "openai" }

// Capabilities implements [driver.CapabilityReporter]: deferred loading (with
// tool_search), a success flag on results, content arrays (text and image
// parts), and a response format per run: a new session's agent.text
// carries it (the agent's text.format overridden for that session, the
// backend's agent or an existing one alike), and a later run on the
// session may ask for that format only.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{DeferredLoading: true, FailureFlag: true, ContentArrays: true, InputImages: true, Streams: b.opts.Delivery != Polling, ServiceApprovals: true, ResponseFormat: true}
}

// Client returns the SDK client the backend uses, for what toolrelay does
// not do (see the package documentation, SDK access).
func (b *Backend) Client() *oai.Client { return &b.client }

// Agent returns the id of the agent the sessions run: Options.Agent, or
// the agent made from the toolbox ("" until the first run made it).
func (b *Backend) Agent() string {
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	if b.opts.Agent != "" {
		return b.opts.Agent
	}
	return b.agentID
}

// MissingTools returns the functions the agent named by Options.Agent
// declares that the toolbox does not implement, sorted. A call to one gets
// a failed result saying the tool is unknown.
func (b *Backend) MissingTools() []string {
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	return slices.Clone(b.missing)
}

// Close implements [driver.Backend]. It ends the event streams (runs still in
// progress then fail) and, unless Options.Keep is set, deletes the sessions
// whose run is over that this backend created or took over (a session
// marked disposable in its metadata, made by a backend in another process
// and resumed here), cancelling a turn still active first; then the agents
// made from a toolbox (here or in another process: the agent of the same
// definition is shared) that no session uses any more. A session paused
// for a decision ([Backend.KeepThread]) stays, and with it its agent,
// until a run of any process finishes it. It returns the errors of those
// deletions, joined; a session or agent already gone is not an error.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	created := slices.DeleteFunc(slices.Clone(b.created), func(id string) bool { return b.kept[id] })
	active := map[string]bool{}
	for id, st := range b.threads {
		if st.active.Load() {
			active[id] = true
		}
	}
	b.mu.Unlock()
	b.stop()
	if b.opts.Keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, id := range created {
		if active[id] {
			_ = b.postCancel(ctx, id)
		}
		if _, err := b.client.Beta.Agents.Sessions.Delete(ctx, id); err != nil && !isNotFound(err) {
			errs = append(errs, apiError("delete session "+id, err))
		}
	}
	errs = append(errs, b.closeAgents(ctx))
	return errors.Join(errs...)
}

// KeepThread implements [driver.Keeper]: Close leaves session id, and the
// agent it uses, on the service, until a run finishes its turn (in this
// process, or in another that takes it over and then deletes it).
func (b *Backend) KeepThread(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept == nil {
		b.kept = map[string]bool{}
	}
	b.kept[id] = true
}

// settle notes that a step ended its session's turn (no call waits for a
// result): a session kept for a decision no longer needs keeping, and
// Close deletes it as any other it created or took over.
func (b *Backend) settle(step *driver.Step) {
	if step == nil || len(step.Calls) > 0 {
		return
	}
	b.mu.Lock()
	delete(b.kept, step.Thread)
	b.mu.Unlock()
}

// adopt takes over a session read on a resume: one a backend marked
// disposable (made in another process, whose run this backend now
// carries on) is deleted by this backend's Close once its run is over, and
// its agent is considered there too.
func (b *Backend) adopt(sess *oai.AgentSession) {
	if b.opts.Keep || sess == nil || sess.ID == b.opts.SessionID || !owned.IsDisposable(sess.Metadata) {
		return
	}
	b.mu.Lock()
	if !slices.Contains(b.created, sess.ID) {
		b.created = append(b.created, sess.ID)
	}
	b.mu.Unlock()
	if a := sess.Agent.ID; a != "" && a != b.opts.Agent {
		b.agentMu.Lock()
		b.useAgent(a, false)
		b.agentMu.Unlock()
	}
}

var errClosed = errcode.Errorf(errcode.FailedPrecondition, "openai: the backend is closed")

// thread returns the state of session id, making it if needed.
func (b *Backend) thread(id string) (*thread, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	st := b.threads[id]
	if st == nil {
		st = newThread(b, id)
		b.threads[id] = st
	}
	return st, nil
}

// register records a session this backend created, once its id is known.
func (st *thread) register() {
	b := st.b
	b.mu.Lock()
	b.threads[st.id] = st
	if st.id != b.opts.SessionID {
		b.created = append(b.created, st.id)
	}
	b.mu.Unlock()
	if st.created != nil {
		st.created(st.id) // StartRequest.Created
		st.created = nil
	}
}

func (b *Backend) checkClosed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	return nil
}

// noNamespaces refuses a toolbox with a tool of a namespace ("ns.name",
// see driver.Capabilities.Namespaces): sessions have no namespaces, and
// the service refuses a function named with a dot.
func noNamespaces(tools *core.Toolbox) error {
	if tools == nil {
		return nil
	}
	for _, t := range tools.Tools() {
		if strings.Contains(t.Name(), ".") {
			return errcode.Errorf(errcode.InvalidArgument, "openai: tool %q is named in a namespace, which Agents API sessions do not have: name it without a dot", t.Name())
		}
	}
	return nil
}
