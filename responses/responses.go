package responses

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oairesponses "github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/backendcfg"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/respond"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// DefaultModel is the model of the configuration's backend when none is
// set.
const DefaultModel = "gpt-4.1-mini"

// Mode says how the responses of a thread are linked.
type Mode = respond.Mode

// The three ways the responses of a thread are linked.
const (
	// Chain links each response to the one before with
	// previous_response_id; the thread is the latest response id. This
	// is the default.
	Chain = respond.Chain
	// Conversation keeps a thread in a conversation; the thread is the
	// conversation id.
	Conversation = respond.Conversation
	// Stateless stores nothing on the service (store: false): each
	// request resends the thread's history, held by the backend in
	// memory, with the reasoning items' encrypted content; for
	// organisations that cannot store conversations. A thread lives as
	// long as the backend: it cannot be resumed in another process.
	Stateless = respond.Stateless
)

// Delivery says how a backend receives a response.
type Delivery = respond.Delivery

// The deliveries of the Responses API.
const (
	// Blocking reads each response as one JSON body (the default).
	Blocking = respond.Blocking
	// Streaming receives each response as server-sent events.
	Streaming = respond.Streaming
)

// Options configure a [Backend] (see [Open]).
type Options struct {
	// BaseURL is the API's base URL; empty means what openai-go reads from
	// the OPENAI_BASE_URL environment variable, or
	// https://api.openai.com/v1/. With an API key it must be https, or
	// http to a loopback host (127.0.0.0/8, ::1, localhost).
	BaseURL string
	// APIKey is the API key, sent as a bearer token; empty means what
	// openai-go reads from the OPENAI_API_KEY environment variable.
	APIKey string
	// Model is the model every request names. Required.
	Model string
	// Instructions are sent with every request.
	Instructions string
	// Mode links the responses of a thread; empty means Chain.
	Mode Mode
	// Delivery says how a response is received; empty means Blocking.
	Delivery Delivery
	// Keep leaves the conversations the backend created on the service;
	// by default Close deletes them.
	Keep bool
	// HTTPClient sends the requests; nil means openai-go's default.
	HTTPClient *http.Client
	// RequestOptions are added to every openai-go request, after the
	// backend's own: retries, timeouts, headers.
	RequestOptions []option.RequestOption
	// MaxResponseBytes, MaxEventBytes, IdleTimeout and MaxSilence bound
	// what is read from the service, as in foundry.Options: zero means
	// the default (64 MiB, 16 MiB, 10m, 10m); negative, no limit.
	MaxResponseBytes, MaxEventBytes int
	IdleTimeout, MaxSilence         time.Duration
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Backend is the responses backend. It implements [driver.Backend],
// [driver.Canceler] and [driver.CapabilityReporter], and is safe for
// concurrent use by runs on different threads.
type Backend struct {
	loop *respond.Backend
}

var (
	_ driver.Backend            = (*Backend)(nil)
	_ driver.Canceler           = (*Backend)(nil)
	_ driver.CapabilityReporter = (*Backend)(nil)
	_ driver.Keeper             = (*Backend)(nil)
)

// Open returns a backend that runs the tool loop with the functions of
// tools over the Responses API. It returns an InvalidArgument error for
// bad options (no model, an unknown mode or transport, a base URL that
// would expose the key), and a FailedPrecondition error naming
// OPENAI_API_KEY when requests would go to the OpenAI API (no base URL)
// without a key (no APIKey, no OPENAI_API_KEY, no RequestOptions that may
// set one; a request found without one is refused before it is sent).
// The caller must Close the backend.
func Open(ctx context.Context, tools *core.Toolbox, opts *Options) (*Backend, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	mode, err := respond.CheckMode("responses", o.Mode, Chain, Chain, Conversation, Stateless)
	if err != nil {
		return nil, err
	}
	stream, err := respond.CheckDelivery("responses", o.Delivery)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "responses: no model: set the model every request names")
	}
	if err := origin.CheckOpenAIBaseURL("responses: base URL", o.BaseURL, o.APIKey); err != nil {
		return nil, err
	}
	if err := origin.RequireOpenAIKey("responses: open", o.BaseURL, o.APIKey, len(o.RequestOptions) > 0); err != nil {
		return nil, err
	}
	lim := wirelimit.New(o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence)
	var ro []option.RequestOption
	if o.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(o.BaseURL))
	}
	if o.APIKey != "" {
		ro = append(ro, option.WithAPIKey(o.APIKey))
	}
	// Redirects to another origin refused with a *origin.RedirectError
	// (PermissionDenied), as on every client of the module, before
	// openai-go's own origin check would.
	ro = append(ro, option.WithHTTPClient(origin.Client(o.HTTPClient)))
	list, version := tools.Snapshot()
	params, err := respond.ToolParams(list)
	if err != nil {
		return nil, err
	}
	offering := respond.NewOffering(tools, version, params, nil, func(_ context.Context, tools []*core.Tool) ([]oairesponses.ToolUnionParam, map[string]any, error) {
		params, err := respond.ToolParams(tools)
		return params, nil, err
	})
	return &Backend{loop: respond.New(respond.Config{
		Name: "responses",
		// The middleware comes last, so that it sees the request as the
		// request options left it.
		Client: openai.NewClient(slices.Concat(ro, o.RequestOptions, []option.RequestOption{option.WithMiddleware(lim.Do, origin.Middleware)})...),
		Mode:   mode, Stream: stream, Keep: o.Keep, Logger: o.Logger,
		Model: o.Model, Instructions: o.Instructions, Offer: offering.Offer,
	})}, nil
}

// Name implements [driver.Backend]: "responses".
func (b *Backend) Name() string { return b.loop.Name() }

// Capabilities implements [driver.CapabilityReporter]: inputs may carry
// images and files, outputs may be content arrays, a run may ask for a
// response format, deferred tools are loaded by the service's tool search
// (defer_loading, and a tool_search tool); there is no failure flag.
func (b *Backend) Capabilities() driver.Capabilities { return b.loop.Capabilities() }

// Mode returns how the backend links the responses of a thread.
func (b *Backend) Mode() Mode { return b.loop.Mode() }

// Client returns the openai-go client the backend sends its requests with.
func (b *Backend) Client() *openai.Client { return b.loop.Client() }

// Start implements [driver.Backend]: see the package doc.
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return b.loop.Start(ctx, req)
}

// Submit implements [driver.Backend]: the results go back as
// function_call_output items of the next response.
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	return b.loop.Submit(ctx, req)
}

// Resume implements [driver.Backend]: it reads the thread's latest
// response (or conversation) for the calls still waiting for a result.
func (b *Backend) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return b.loop.Resume(ctx, thread)
}

// Cancel implements [driver.Canceler]: the calls left waiting get a
// failure output saying the run stopped.
func (b *Backend) Cancel(ctx context.Context, thread string) error { return b.loop.Cancel(ctx, thread) }

// ErrorCode implements [driver.Backend]: a turn error by the service's
// code, an *openai.Error by its HTTP status ([errcode.FromHTTPStatus]).
func (b *Backend) ErrorCode(err error) errcode.Code { return respond.ErrorCode(err) }

// Close deletes, unless the backend keeps them (Options.Keep), the
// conversations it created.
func (b *Backend) Close() error { return b.loop.Close() }

// KeepThread implements [driver.Keeper]: Close leaves thread on the service.
func (b *Backend) KeepThread(thread string) { b.loop.KeepThread(thread) }

// Settings are the configuration settings of the responses backend:
// section "responses" of the configuration file, and the environment
// variables of the package doc's table. A program may also set them in
// code, as a Settings value (or a pointer to one) in
// adapter.Options.BackendSettings, whose non-zero fields win over the file
// and the environment.
type Settings struct {
	// APIKey is the API key, sent as a bearer token.
	APIKey string `json:"api_key,omitempty" env:"OPENAI_API_KEY"`
	// BaseURL is the API's base URL (default https://api.openai.com/v1/).
	BaseURL string `json:"base_url,omitempty" env:"OPENAI_BASE_URL"`
	// Model is the model every request names; empty means DefaultModel.
	Model string `json:"model,omitempty" env:"TOOLRELAY_RESPONSES_MODEL"`
	// Mode links the responses of a thread: "previous_response_id" (the
	// default) or "conversation".
	Mode string `json:"mode,omitempty" env:"TOOLRELAY_RESPONSES_MODE"`
	// Delivery is how responses are received (file key and variable say
	// "transport"): "blocking" (the default)
	// or "streaming" (server-sent events).
	Delivery string `json:"transport,omitempty" env:"TOOLRELAY_RESPONSES_TRANSPORT"`
	// Keep leaves the conversations the backend created on the service
	// at Close.
	Keep bool `json:"keep,omitempty" env:"TOOLRELAY_RESPONSES_KEEP"`
}

func init() { backendcfg.Register("responses", OptionsFor, Open) }

// OptionsFor returns the options the configuration of req gives the
// backend: the shared settings, and the [Settings] of section "responses".
func OptionsFor(req *adapter.OpenRequest) (*Options, error) {
	var s Settings
	if err := req.BackendSettings("responses", &s); err != nil {
		return nil, err
	}
	if s.Model == "" {
		s.Model = DefaultModel
	}
	o := &Options{
		BaseURL: s.BaseURL, APIKey: s.APIKey, Model: s.Model, Instructions: req.Settings.Instructions,
		Mode: Mode(s.Mode), Delivery: Delivery(s.Delivery), Keep: s.Keep, Logger: req.Logger, HTTPClient: req.Client(nil),
	}
	o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence = backendcfg.Limits(req.Settings)
	return o, nil
}
