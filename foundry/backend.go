package foundry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
)

// Backend runs the tool loop of a Foundry agent (see [Open]), or of a
// plain Responses API model (see [OpenResponses]). It implements
// [driver.Backend], [driver.Canceler] and [driver.CapabilityReporter], and is
// safe for concurrent use by runs on different threads.
type Backend struct {
	name   string
	client openai.Client
	agents *agentsClient // nil for the plain Responses API
	mode   Mode
	stream bool
	keep   bool
	logger *slog.Logger

	// agentRef is the agent reference every request carries (nil for the
	// plain Responses API, which sends model, instructions and tools
	// instead).
	agentRef     map[string]any
	model        string
	instructions string
	tools        []responses.ToolUnionParam

	agentName, agentVersion string
	createdVersion          bool
	missing                 []string // set by Open, read-only after

	mu            sync.Mutex
	conversations []string            // conversations this backend created
	canceled      map[string][]string // chain mode: calls canceled, by response id
	closed        bool
}

var (
	_ driver.Backend            = (*Backend)(nil)
	_ driver.Canceler           = (*Backend)(nil)
	_ driver.CapabilityReporter = (*Backend)(nil)
)

// Open returns a backend that runs the agent of a Foundry project with the
// functions of tools. It authenticates (Credential, Token or APIKey; by
// default azidentity's DefaultAzureCredential), then either creates a
// version of the agent opts.Definition defines, with the toolbox's tools as its
// function tools, or checks that the agent opts.Agent (and version)
// exists. It returns an error for which [errcode.Of] is InvalidArgument
// for bad options (no endpoint, an http endpoint, a bad agent name, no
// agent), or the code of the service's answer (NotFound for an unknown
// agent). The endpoint and the agent have no defaults: a nil opts gives
// an InvalidArgument error.
//
// The caller must Close the backend.
func Open(ctx context.Context, tools *core.Toolbox, opts *Options) (*Backend, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	endpoint, err := parseEndpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	mode, err := checkMode(o.Mode, Conversation)
	if err != nil {
		return nil, err
	}
	stream, err := checkTransport(o.Transport)
	if err != nil {
		return nil, err
	}
	name, version := o.Agent, o.AgentVersion
	if o.Definition != nil {
		name, version = o.Definition.Name, ""
		if name == "" {
			name = DefaultAgentName
		}
		if o.Definition.Model == "" {
			return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: the agent definition names no model deployment")
		}
	}
	if name == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: no agent: set Agent (an existing agent) or Definition (a definition to create)")
	}
	if err := checkAgentName(name); err != nil {
		return nil, err
	}
	auth, err := authPolicy(&o, endpoint)
	if err != nil {
		return nil, err
	}
	ep := endpoint.String()
	lim := limits(o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence)
	b := &Backend{
		name:   "foundry",
		mode:   mode,
		stream: stream,
		keep:   o.Keep,
		logger: loggerOr(o.Logger),
		agents: &agentsClient{endpoint: ep, pl: newPipeline(auth, o.HTTPClient, lim, false)},
	}
	// One authentication policy on both clients: the token is fetched
	// once and cached for both.
	transport := pipelineTransport{pl: newPipeline(auth, o.HTTPClient, lim, true)}
	b.client = openai.NewClient(slices.Concat([]option.RequestOption{
		option.WithBaseURL(ep + "/openai/v1/"),
		option.WithAPIKey(""), // never send an OPENAI_API_KEY from the environment
		option.WithHTTPClient(&http.Client{Transport: transport}),
	}, o.RequestOptions)...)

	if o.Definition != nil {
		v, err := b.agents.createVersion(ctx, name, &versionRequest{
			Description: o.Definition.Description,
			Definition:  promptDefinition{Kind: "prompt", Model: o.Definition.Model, Instructions: o.Definition.Instructions, Tools: functionTools(tools)},
		})
		if err != nil {
			return nil, b.openError(err)
		}
		b.agentName, b.agentVersion, b.createdVersion = v.Name, v.Version, true
		if b.agentName == "" {
			b.agentName = name
		}
	} else {
		v, err := b.agents.getVersion(ctx, name, version)
		if err != nil {
			return nil, b.openError(err)
		}
		b.agentName, b.agentVersion = name, version
		b.checkTools(v, tools)
	}
	b.agentRef = map[string]any{"type": "agent_reference", "name": b.agentName}
	if b.agentVersion != "" {
		b.agentRef["version"] = b.agentVersion
	}
	return b, nil
}

// OpenResponses returns a backend that runs the tool loop over the plain
// Responses API (OpenAI's, or any compatible one): no agent, the model,
// instructions and the toolbox's tools sent with every request, threads
// linked by previous_response_id unless opts.Mode says Conversation. It
// authenticates with an API key sent as a bearer token. Its Name is
// "responses".
//
// The API key is sent only to the base URL's origin: a base URL (opts or
// OPENAI_BASE_URL) that is not an http or https URL, or that is plain
// http to a host other than loopback while there is a key, gives an
// InvalidArgument error naming it redacted; a request that would carry a
// key over plain http to such a host (as request options may make one) is
// refused; openai-go refuses a redirect to another origin.
//
// The caller must Close the backend.
func OpenResponses(ctx context.Context, tools *core.Toolbox, opts *ResponsesOptions) (*Backend, error) {
	var o ResponsesOptions
	if opts != nil {
		o = *opts
	}
	mode, err := checkMode(o.Mode, Chain)
	if err != nil {
		return nil, err
	}
	stream, err := checkTransport(o.Transport)
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "responses: no model: set the model every request names")
	}
	if err := origin.CheckOpenAIBaseURL("responses: base URL", o.BaseURL, o.APIKey); err != nil {
		return nil, err
	}
	lim := limits(o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence)
	ro := []option.RequestOption{}
	if o.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(o.BaseURL))
	}
	if o.APIKey != "" {
		ro = append(ro, option.WithAPIKey(o.APIKey))
	}
	if o.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(o.HTTPClient))
	}
	b := &Backend{
		name: "responses",
		// The middleware comes last, so that it sees the request as the
		// request options left it.
		client:       openai.NewClient(slices.Concat(ro, o.RequestOptions, []option.RequestOption{option.WithMiddleware(lim.Do, origin.Middleware)})...),
		mode:         mode,
		stream:       stream,
		keep:         o.Keep,
		logger:       loggerOr(o.Logger),
		model:        o.Model,
		instructions: o.Instructions,
	}
	for _, t := range functionTools(tools) {
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		b.tools = append(b.tools, param.Override[responses.ToolUnionParam](json.RawMessage(raw)))
	}
	return b, nil
}

// openError classifies an error of the service met while opening, since no
// runner is there yet to do it.
func (b *Backend) openError(err error) error {
	return &errcode.Error{Code: b.ErrorCode(err), Op: "foundry: open", Err: err}
}

func checkMode(m, def Mode) (Mode, error) {
	switch m {
	case "":
		return def, nil
	case Conversation, Chain:
		return m, nil
	case "chain":
		return Chain, nil
	}
	return "", errcode.Errorf(errcode.InvalidArgument, "foundry: unknown mode %q: want %q or %q", m, Conversation, Chain)
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// checkTools warns about function tools of the agent that the toolbox
// cannot run, and tools of the toolbox the agent does not offer.
func (b *Backend) checkTools(v *versionInfo, tools *core.Toolbox) {
	var def promptDefinition
	if err := json.Unmarshal(v.Definition, &def); err != nil {
		return
	}
	offered := map[string]bool{}
	for _, t := range def.Tools {
		if t.Type != "function" {
			continue
		}
		offered[t.Name] = true
		if tools.Lookup(t.Name) == nil {
			b.missing = append(b.missing, t.Name)
			b.logger.Warn("foundry: the agent has a function tool this program cannot run; its calls will fail as unknown", "agent", v.Name, "version", v.Version, "tool", t.Name)
		}
	}
	slices.Sort(b.missing)
	for _, name := range tools.Names() {
		if !offered[name] {
			b.logger.Warn("foundry: the agent does not offer this tool, so the model cannot call it", "agent", v.Name, "version", v.Version, "tool", name)
		}
	}
}

// Name implements [driver.Backend]: "foundry", or "responses" for a backend
// made by [OpenResponses].
func (b *Backend) Name() string { return b.name }

// Capabilities implements [driver.CapabilityReporter]: outputs may be
// content arrays; there is no failure flag and no deferred loading.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{ContentArrays: true}
}

// Mode returns how the backend links the responses of a thread.
func (b *Backend) Mode() Mode { return b.mode }

// Agent returns the name and version of the agent the backend runs (the
// version is empty when it runs the latest); both are empty for the plain
// Responses API.
func (b *Backend) Agent() (name, version string) { return b.agentName, b.agentVersion }

// MissingTools returns the function tools of the agent named by
// Options.Agent that the toolbox does not implement, sorted (nil for an
// agent version created from the toolbox). A call to one gets a failed
// result saying the tool is unknown.
func (b *Backend) MissingTools() []string { return slices.Clone(b.missing) }

// Client returns the openai-go client the backend sends responses and
// conversations requests with.
func (b *Backend) Client() *openai.Client { return &b.client }

// Pipeline returns the azcore pipeline of the agents API, whose requests
// are authenticated like the backend's; ok is false for the plain
// Responses API, which has none.
func (b *Backend) Pipeline() (pl runtime.Pipeline, ok bool) {
	if b.agents == nil {
		return runtime.Pipeline{}, false
	}
	return b.agents.pl, true
}

// Close deletes, unless the backend keeps them (Options.Keep), the
// conversations it created and the agent version it created. It returns
// the errors of those deletions, joined.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	convs := b.conversations
	b.conversations = nil
	b.mu.Unlock()
	if b.keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, id := range convs {
		if _, err := b.client.Conversations.Delete(ctx, id); err != nil && errcode.Of(err) != errcode.NotFound && b.ErrorCode(err) != errcode.NotFound {
			errs = append(errs, fmt.Errorf("%s: delete conversation %s: %w", b.name, id, err))
		}
	}
	if b.createdVersion {
		if err := b.agents.deleteVersion(ctx, b.agentName, b.agentVersion); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
