package foundry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
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
	"github.com/toolrelay/toolrelay/internal/owned"
	"github.com/toolrelay/toolrelay/internal/respond"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

// Backend runs the tool loop of a Foundry agent (see [Open]). It
// implements [driver.Backend], [driver.Canceler] and
// [driver.CapabilityReporter], and is safe for concurrent use by runs on
// different threads.
type Backend struct {
	loop   *respond.Backend
	agents *agentsClient
	logger *slog.Logger
	// sessions, for a hosted agent, are its threads' sessions (see
	// session.go); nil for other agents.
	sessions *sessions

	agentName string
	def       *AgentDefinition // nil for an existing agent (Options.Agent)
	tools     *core.Toolbox
	// versionsMu guards agentVersion and the versions made or found from
	// the definition (one per set of tools): Close deletes them.
	versionsMu   sync.Mutex
	agentVersion string
	byDigest     map[string]string   // definition digest -> version
	recent       map[offerKey]string // toolbox version and format -> version, saving a digest per request
	versions     []string            // made or found, in order
	missing      []string            // set by Open, read-only after
	unrunnable   []string            // likewise
}

var (
	_ driver.Backend            = (*Backend)(nil)
	_ driver.Canceler           = (*Backend)(nil)
	_ driver.CapabilityReporter = (*Backend)(nil)
	_ driver.Keeper             = (*Backend)(nil)
)

// Open returns a backend that runs the agent of a Foundry project with the
// functions of tools. It authenticates (Credential, Token or APIKey; by
// default azidentity's DefaultAzureCredential), then either finds (by the
// digest in its metadata) or creates a version of the agent opts.Definition
// defines, with the toolbox's tools as its function tools, or checks that
// the agent opts.Agent (and version) exists and decides the route of its
// requests (the agent's endpoint, or the project's). It returns an error for which [errcode.Of] is InvalidArgument
// for bad options (no endpoint, an http endpoint, a bad agent name, no
// agent), FailedPrecondition for a disabled agent, Unimplemented for an
// agent of a kind toolrelay does not run (workflow, external), or the
// code of the service's answer (NotFound for an unknown agent), all
// before any conversation or response is requested. The endpoint and the
// agent have no defaults: a nil opts gives an InvalidArgument error.
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
	lim := wirelimit.New(o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence)
	b := &Backend{
		logger: o.Logger,
		agents: &agentsClient{endpoint: ep, pl: newPipeline(auth, o.HTTPClient, lim, false)},
	}
	if b.logger == nil {
		b.logger = slog.Default()
	}
	b.agentName, b.tools = name, tools
	route := []option.RequestOption{option.WithBaseURL(ep + "/openai/v1/")}
	if o.Definition != nil {
		def := *o.Definition
		b.def = &def
		list, v := tools.Snapshot()
		if _, err := b.version(ctx, list, v, nil); err != nil {
			return nil, b.openError(err)
		}
	} else {
		plan, err := b.planAgent(ctx, name, version)
		if err != nil {
			return nil, b.openError(err)
		}
		b.agentVersion = version
		for _, v := range plan.versions {
			b.checkTools(v, tools)
		}
		b.missing = slices.Compact(b.missing) // sorted: a tool missing from several versions once
		if plan.hosted {
			b.sessions = newSessions(b.logger)
		}
		if plan.endpoint {
			route = endpointOptions(ep, name, b.sessions)
		}
	}
	// One authentication policy on both clients: the token is fetched
	// once and cached for both.
	transport := pipelineTransport{pl: newPipeline(auth, o.HTTPClient, lim, true)}
	client := openai.NewClient(slices.Concat(route, []option.RequestOption{
		option.WithAPIKey(""), // never send an OPENAI_API_KEY from the environment
		// Redirects refused as the agents pipeline refuses them (a
		// *origin.RedirectError, PermissionDenied), before openai-go's own
		// origin check would.
		option.WithHTTPClient(origin.Client(&http.Client{Transport: transport})),
	}, o.RequestOptions)...)
	cfg := respond.Config{Name: "foundry", Client: client, Mode: mode, Stream: stream, Keep: o.Keep, Logger: b.logger}
	if b.def == nil {
		cfg.AgentRef = agentRef(name, version)
	} else {
		// A version made from the toolbox follows it: a change names the
		// version of the new set (found, or made).
		cfg.AgentRef = agentRef(name, b.agentVersion)
		// So does a run's format: the version of the definition with
		// that format answers in it.
		cfg.AgentFormats = true
		cfg.Offer = func(ctx context.Context, format *driver.Format) ([]responses.ToolUnionParam, map[string]any, error) {
			list, tv := b.tools.Snapshot()
			v, err := b.version(ctx, list, tv, format)
			if err != nil {
				return nil, nil, &errcode.Error{Code: errorCode(err), Op: "foundry: the agent version for the tools and format", Err: err}
			}
			return nil, agentRef(name, v), nil
		}
		cfg.AgentGone = b.versionGone
		cfg.OnClose = b.deleteVersions
	}
	b.loop = respond.New(cfg)
	return b, nil
}

// agentRef returns the agent reference of a request; an empty version
// names the latest.
func agentRef(name, version string) map[string]any {
	ref := map[string]any{"type": "agent_reference", "name": name}
	if version != "" {
		ref["version"] = version
	}
	return ref
}

// version returns the version of the agent that defines the definition
// with tools (the toolbox at toolsVersion), answering in format (nil:
// text): the one the backend used
// before, or one of the same definition that a backend (of this process or
// another) made, found by the digest in its metadata, or else a new one.
func (b *Backend) version(ctx context.Context, tools []*core.Tool, toolsVersion uint64, format *driver.Format) (string, error) {
	key := offerKey{tools: toolsVersion}
	if format != nil {
		key.format, key.schema, key.strict = format.Name, string(format.Schema), format.Strict
	}
	b.versionsMu.Lock()
	v, ok := b.recent[key]
	if ok {
		b.agentVersion = v
	}
	b.versionsMu.Unlock()
	if ok {
		return v, nil
	}
	v, err := b.versionOf(ctx, tools, format)
	if err != nil {
		return "", err
	}
	b.versionsMu.Lock()
	if b.recent == nil {
		b.recent = map[offerKey]string{}
	}
	b.recent[key] = v
	b.versionsMu.Unlock()
	return v, nil
}

// offerKey is what a request offers: the toolbox at a version, and a
// format.
type offerKey struct {
	tools          uint64
	format, schema string
	strict         bool
}

// versionOf is version, from the definition's digest.
func (b *Backend) versionOf(ctx context.Context, tools []*core.Tool, format *driver.Format) (string, error) {
	text, err := textOf(format)
	if err != nil {
		return "", err
	}
	req := versionRequest{
		Description: b.def.Description,
		Definition:  promptDefinition{Kind: "prompt", Model: b.def.Model, Instructions: b.def.Instructions, Tools: respond.FunctionToolsOf(tools), Text: text},
	}
	digest, err := owned.Digest(req)
	if err != nil {
		return "", errcode.Errorf(errcode.InvalidArgument, "foundry: the agent definition: %v", err)
	}
	b.versionsMu.Lock()
	defer b.versionsMu.Unlock()
	if v, ok := b.byDigest[digest]; ok {
		b.agentVersion = v
		return v, nil
	}
	v, err := b.agents.findVersion(ctx, b.agentName, digest)
	if err != nil {
		return "", err
	}
	if v == "" {
		req.Metadata = map[string]string{owned.DefinitionKey: digest}
		made, err := b.agents.createVersion(ctx, b.agentName, &req)
		if err != nil {
			return "", err
		}
		v = made.Version
	}
	if b.byDigest == nil {
		b.byDigest = map[string]string{}
	}
	b.byDigest[digest] = v
	if !slices.Contains(b.versions, v) {
		b.versions = append(b.versions, v)
	}
	b.agentVersion = v
	return v, nil
}

// versionGone is the loop's Config.AgentGone: it reports whether the
// version ref names is gone (another process deleted it once it needed it
// no more), and if so forgets it, so that the next request finds or makes
// it again.
func (b *Backend) versionGone(ctx context.Context, ref map[string]any) bool {
	v, _ := ref["version"].(string)
	if v == "" {
		return false
	}
	if _, err := b.agents.getVersion(ctx, b.agentName, v); errorCode(err) != errcode.NotFound {
		return false
	}
	b.versionsMu.Lock()
	defer b.versionsMu.Unlock()
	maps.DeleteFunc(b.byDigest, func(_, version string) bool { return version == v })
	maps.DeleteFunc(b.recent, func(_ offerKey, version string) bool { return version == v })
	b.versions = slices.DeleteFunc(b.versions, func(version string) bool { return version == v })
	return true
}

// deleteVersions is the loop's Config.OnClose: it deletes the versions the
// backend made or found (one another process deleted first is not an
// error). A process that needs one of them later makes it again.
func (b *Backend) deleteVersions(ctx context.Context) error {
	b.versionsMu.Lock()
	versions := slices.Clone(b.versions)
	b.versionsMu.Unlock()
	var errs []error
	for _, v := range versions {
		if err := b.agents.deleteVersion(ctx, b.agentName, v); err != nil && errorCode(err) != errcode.NotFound {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openError classifies an error of the service met while opening, since no
// runner is there yet to do it.
func (b *Backend) openError(err error) error {
	return &errcode.Error{Code: errorCode(err), Op: "foundry: open", Err: err}
}

// definitionTool is a tool of an agent's definition, as checkTools reads
// it: its type, and what says who runs its calls (openai-go v3.105
// responses.ToolUnion; the functions of a namespace tool in Tools).
type definitionTool struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Execution string `json:"execution"`
	// Environment is a shell tool's, an object with a type (a
	// computer-use tool's is a string).
	Environment json.RawMessage  `json:"environment"`
	Tools       []definitionTool `json:"tools"`
}

// environment returns the type of a shell tool's environment.
func (t *definitionTool) environment() string {
	var env struct {
		Type string `json:"type"`
	}
	json.Unmarshal(t.Environment, &env)
	return env.Type
}

// checkTools looks at every tool of the agent's definition: it warns about
// function tools of the agent that the toolbox cannot run (MissingTools),
// about tools whose calls the client is to run and the loop cannot
// (UnrunnableTools: a run in which the model calls one ends with an error
// naming the call's item, Unimplemented or FailedPrecondition), and about
// tools of the toolbox the agent does not offer. Tools the service runs
// (MCP servers, web and file search, code interpreter, …) need nothing.
func (b *Backend) checkTools(v *versionInfo, tools *core.Toolbox) {
	var def struct {
		Tools []definitionTool `json:"tools"`
	}
	if err := json.Unmarshal(v.Definition, &def); err != nil {
		return
	}
	offered := map[string]bool{}
	function := func(name string) {
		offered[name] = true
		if tools.Lookup(name) == nil {
			b.missing = append(b.missing, name)
			b.logger.Warn("foundry: the agent has a function tool this program cannot run; its calls will fail as unknown", "agent", v.Name, "version", v.Version, "tool", name)
		}
	}
	client := func(t definitionTool, name string) {
		item, code, fix, ok := respond.ClientTool(t.Type, t.Execution, t.environment())
		if !ok {
			return
		}
		b.unrunnable = append(b.unrunnable, strings.TrimSpace(t.Type+" "+name))
		b.logger.Warn("foundry: the agent has a tool whose calls toolrelay cannot run; a run in which the model calls it ends with an error",
			"agent", v.Name, "version", v.Version, "tool", t.Type, "name", name, "item", item, "code", code.String(), "instead", fix)
	}
	for _, t := range def.Tools {
		switch t.Type {
		case "function":
			function(t.Name)
		case "namespace":
			// Its functions are the toolbox's tools "namespace.function".
			for _, f := range t.Tools {
				if f.Type == "function" {
					function(t.Name + "." + f.Name)
				} else {
					client(f, t.Name+"."+f.Name)
				}
			}
		default:
			client(t, t.Name)
		}
	}
	slices.Sort(b.missing)
	slices.Sort(b.unrunnable)
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
// no failure flag. A run may ask for a response format when the backend
// makes the agent (Options.Definition): its requests name the version of
// the definition whose text.format is the run's (found or made as any
// version is, and deleted on Close); an existing agent (Options.Agent)
// answers in its own definition's format, and a run's is refused.
// Functions may be grouped in namespaces; the service's OAuth consent
// requests are handed over as service approvals (OAuthConsent).
func (b *Backend) Capabilities() driver.Capabilities {
	c := b.loop.Capabilities()
	c.OAuthConsent = true
	return c
}

// Mode returns how the backend links the responses of a thread.
func (b *Backend) Mode() Mode { return b.loop.Mode() }

// Agent returns the name and version of the agent the backend runs (the
// version is empty when the service chooses it: the latest, or, for an
// agent whose endpoint is configured, what its version selector serves).
func (b *Backend) Agent() (name, version string) {
	b.versionsMu.Lock()
	defer b.versionsMu.Unlock()
	return b.agentName, b.agentVersion
}

// MissingTools returns the function tools of the agent named by
// Options.Agent that the toolbox does not implement, sorted (nil for an
// agent version created from the toolbox): of the version named, or of
// every version the agent's endpoint routes traffic to, or of the latest.
// A call to one gets a failed result saying the tool is unknown.
func (b *Backend) MissingTools() []string { return slices.Clone(b.missing) }

// UnrunnableTools returns the tools of the agent named by Options.Agent
// whose calls the client is to run and toolrelay cannot, sorted, each its
// type and name if it has one (as "computer_use_preview", "custom
// summarize", "tool_search" executed by the client): a custom tool, a
// computer-use, local shell or apply_patch tool, a client-executed tool
// search, programmatic tool calling, a capture_structured_outputs tool
// (nil for an agent version created from the toolbox). A run in which the
// model calls one ends with an error naming the call's item, Unimplemented
// (FailedPrecondition for structured outputs); Open warns about each. A
// program that must not meet that error refuses such an agent.
func (b *Backend) UnrunnableTools() []string { return slices.Clone(b.unrunnable) }

// Client returns the openai-go client the backend sends responses and
// conversations requests with.
func (b *Backend) Client() *openai.Client { return b.loop.Client() }

// Pipeline returns the azcore pipeline of the agents API, whose requests
// are authenticated like the backend's.
func (b *Backend) Pipeline() runtime.Pipeline { return b.agents.pl }

// Start implements [driver.Backend]: see the package doc. A hosted
// agent's turn runs in the thread's session (see [Backend.Submit]).
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	if b.sessions == nil {
		return b.loop.Start(ctx, req)
	}
	ctx, box := b.sessions.bind(ctx, req.Thread)
	r := *req
	r.Created = b.sessions.moved(ctx, box, req.Created)
	step, err := b.loop.Start(ctx, &r)
	b.sessions.settle(ctx, box, step)
	return step, err
}

// Submit implements [driver.Backend]: the results go back as
// function_call_output items of the next response. For a hosted agent,
// each request of a thread names the thread's session (agent_session_id),
// the one the service named for its first turn (x-agent-session-id); the
// backend keeps it in memory and as a note of the thread in the runner's
// journal, so that a resume or a takeover in another process runs in the
// same sandbox.
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	if b.sessions == nil {
		return b.loop.Submit(ctx, req)
	}
	ctx, box := b.sessions.bind(ctx, req.Step.Thread)
	r := *req
	r.Moved = b.sessions.moved(ctx, box, req.Moved)
	step, err := b.loop.Submit(ctx, &r)
	b.sessions.settle(ctx, box, step)
	return step, err
}

// Resume implements [driver.Backend]: it reads the thread's conversation
// (or latest response) for the calls still waiting for a result. A hosted
// agent's thread resumes in its session (see [Backend.Submit]).
func (b *Backend) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	if b.sessions == nil {
		return b.loop.Resume(ctx, thread)
	}
	ctx, box := b.sessions.bind(ctx, thread)
	step, err := b.loop.Resume(ctx, thread)
	b.sessions.settle(ctx, box, step)
	return step, err
}

// Cancel implements [driver.Canceler]: the calls left waiting get a
// failure output saying the run stopped (an MCP approval request, a denial
// giving that reason), so that the thread can take new input.
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
// conversations it created or took over whose run is over, and, when no
// run of it is paused for a decision, the agent versions it created or
// found (see the package doc). It returns the errors of those deletions,
// joined; what is already gone is not an error.
func (b *Backend) Close() error { return b.loop.Close() }

// KeepThread implements [driver.Keeper]: Close leaves thread, and the agent
// version it uses, on the service, until a run finishes its turn.
func (b *Backend) KeepThread(thread string) { b.loop.KeepThread(thread) }
