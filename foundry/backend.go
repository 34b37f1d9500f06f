package foundry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/respond"
)

// Backend runs the tool loop of a Foundry agent (see [Open]). It
// implements [driver.Backend], [driver.Canceler] and
// [driver.CapabilityReporter], and is safe for concurrent use by runs on
// different threads.
type Backend struct {
	loop   *respond.Backend
	agents *agentsClient
	logger *slog.Logger

	agentName, agentVersion string
	createdVersion          bool
	// versionsMu guards agentVersion and the versions made from the
	// toolbox (a new one when it changed); Close deletes them.
	versionsMu sync.Mutex
	versions   []string
	missing    []string // set by Open, read-only after
}

var (
	_ driver.Backend            = (*Backend)(nil)
	_ driver.Canceler           = (*Backend)(nil)
	_ driver.CapabilityReporter = (*Backend)(nil)
	_ driver.Keeper             = (*Backend)(nil)
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
	mode, err := respond.CheckMode("foundry", o.Mode, Conversation, Conversation, Chain)
	if err != nil {
		return nil, err
	}
	stream, err := respond.CheckDelivery("foundry", o.Delivery)
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
		logger: o.Logger,
		agents: &agentsClient{endpoint: ep, pl: newPipeline(auth, o.HTTPClient, lim, false)},
	}
	if b.logger == nil {
		b.logger = slog.Default()
	}
	// One authentication policy on both clients: the token is fetched
	// once and cached for both.
	transport := pipelineTransport{pl: newPipeline(auth, o.HTTPClient, lim, true)}
	client := openai.NewClient(slices.Concat([]option.RequestOption{
		option.WithBaseURL(ep + "/openai/v1/"),
		option.WithAPIKey(""), // never send an OPENAI_API_KEY from the environment
		// Redirects refused as the agents pipeline refuses them (a
		// *origin.RedirectError, PermissionDenied), before openai-go's own
		// origin check would.
		option.WithHTTPClient(origin.Client(&http.Client{Transport: transport})),
	}, o.RequestOptions)...)

	list, toolsVersion := tools.Snapshot()
	if o.Definition != nil {
		v, err := b.agents.createVersion(ctx, name, &versionRequest{
			Description: o.Definition.Description,
			Definition:  promptDefinition{Kind: "prompt", Model: o.Definition.Model, Instructions: o.Definition.Instructions, Tools: respond.FunctionToolsOf(list)},
		})
		if err != nil {
			return nil, b.openError(err)
		}
		b.agentName, b.agentVersion, b.createdVersion = v.Name, v.Version, true
		b.versions = []string{v.Version}
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
	ref := map[string]any{"type": "agent_reference", "name": b.agentName}
	if b.agentVersion != "" {
		ref["version"] = b.agentVersion
	}
	var offer func(context.Context) ([]responses.ToolUnionParam, map[string]any, error)
	if o.Definition != nil {
		// A version made from the toolbox follows it: a change makes a
		// new version, which the next request names.
		def := *o.Definition
		offer = respond.NewOffering(tools, toolsVersion, nil, ref, func(ctx context.Context, list []*core.Tool) ([]responses.ToolUnionParam, map[string]any, error) {
			v, err := b.agents.createVersion(ctx, b.agentName, &versionRequest{
				Description: def.Description,
				Definition:  promptDefinition{Kind: "prompt", Model: def.Model, Instructions: def.Instructions, Tools: respond.FunctionToolsOf(list)},
			})
			if err != nil {
				return nil, nil, &errcode.Error{Code: errorCode(err), Op: "foundry: a new agent version for the changed tools", Err: err}
			}
			b.versionsMu.Lock()
			b.versions = append(b.versions, v.Version)
			b.agentVersion = v.Version
			b.versionsMu.Unlock()
			return nil, map[string]any{"type": "agent_reference", "name": b.agentName, "version": v.Version}, nil
		}).Offer
	}
	b.loop = respond.New(respond.Config{
		Name: "foundry", Client: client, Mode: mode, Stream: stream, Keep: o.Keep, Logger: b.logger, AgentRef: ref, Offer: offer,
		OnClose: func(ctx context.Context) error {
			if !b.createdVersion {
				return nil
			}
			b.versionsMu.Lock()
			versions := slices.Clone(b.versions)
			b.versionsMu.Unlock()
			var errs []error
			for _, v := range versions {
				errs = append(errs, b.agents.deleteVersion(ctx, b.agentName, v))
			}
			return errors.Join(errs...)
		},
	})
	return b, nil
}

// openError classifies an error of the service met while opening, since no
// runner is there yet to do it.
func (b *Backend) openError(err error) error {
	return &errcode.Error{Code: errorCode(err), Op: "foundry: open", Err: err}
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

// Name implements [driver.Backend]: "foundry".
func (b *Backend) Name() string { return b.loop.Name() }

// Capabilities implements [driver.CapabilityReporter]: inputs may carry
// images and files, outputs may be content arrays, deferred tools are
// loaded by the service's tool search (an agent version made from the
// toolbox has them with defer_loading, and a tool_search tool); there is
// no failure flag, and no response format per run (the agent's definition
// sets it).
func (b *Backend) Capabilities() driver.Capabilities { return b.loop.Capabilities() }

// Mode returns how the backend links the responses of a thread.
func (b *Backend) Mode() Mode { return b.loop.Mode() }

// Agent returns the name and version of the agent the backend runs (the
// version is empty when it runs the latest).
func (b *Backend) Agent() (name, version string) {
	b.versionsMu.Lock()
	defer b.versionsMu.Unlock()
	return b.agentName, b.agentVersion
}

// MissingTools returns the function tools of the agent named by
// Options.Agent that the toolbox does not implement, sorted (nil for an
// agent version created from the toolbox). A call to one gets a failed
// result saying the tool is unknown.
func (b *Backend) MissingTools() []string { return slices.Clone(b.missing) }

// Client returns the openai-go client the backend sends responses and
// conversations requests with.
func (b *Backend) Client() *openai.Client { return b.loop.Client() }

// Pipeline returns the azcore pipeline of the agents API, whose requests
// are authenticated like the backend's.
func (b *Backend) Pipeline() runtime.Pipeline { return b.agents.pl }

// Start implements [driver.Backend]: see the package doc.
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return b.loop.Start(ctx, req)
}

// Submit implements [driver.Backend]: the results go back as
// function_call_output items of the next response.
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	return b.loop.Submit(ctx, req)
}

// Resume implements [driver.Backend]: it reads the thread's conversation
// (or latest response) for the calls still waiting for a result.
func (b *Backend) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return b.loop.Resume(ctx, thread)
}

// Cancel implements [driver.Canceler]: the calls left waiting get a
// failure output saying the run stopped, so that the thread can take new
// input.
func (b *Backend) Cancel(ctx context.Context, thread string) error { return b.loop.Cancel(ctx, thread) }

// ErrorCode implements [driver.Backend]. It classifies, in this order: a
// *[errcode.Error] by its code; context errors; a *[driver.TurnError] by
// the service's code; an *[openai.Error] or *[azcore.ResponseError] by its
// HTTP status, with [errcode.FromHTTPStatus] (502, 503 and 504 are
// Unavailable: retrying later may succeed). Anything else is Unknown.
func (b *Backend) ErrorCode(err error) errcode.Code { return errorCode(err) }

func errorCode(err error) errcode.Code {
	var (
		ae  *azcore.ResponseError
		afe *azidentity.AuthenticationFailedError
	)
	if code := respond.ErrorCode(err); code != errcode.Unknown {
		return code
	}
	switch {
	case errors.As(err, &ae):
		return errcode.FromHTTPStatus(ae.StatusCode)
	case errors.As(err, &afe):
		// A credential that could not get a token (its authority refused
		// it, or a redirect was refused), as a 401 would be.
		return errcode.PermissionDenied
	}
	return errcode.Unknown
}

// Close deletes, unless the backend keeps them (Options.Keep), the
// conversations it created and the agent version it created. It returns
// the errors of those deletions, joined.
func (b *Backend) Close() error { return b.loop.Close() }

// KeepThread implements [driver.Keeper]: Close leaves thread, and the agent
// version it uses, on the service.
func (b *Backend) KeepThread(thread string) { b.loop.KeepThread(thread) }
