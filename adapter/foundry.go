package adapter

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// FoundryConfig holds the settings of the foundry, responses and
// fake-foundry backends.
type FoundryConfig struct {
	// Endpoint is the project endpoint,
	// https://<resource>.services.ai.azure.com/api/projects/<project>.
	// FOUNDRY_PROJECT_ENDPOINT (the name the service's samples use) is
	// read when AZURE_AI_PROJECT_ENDPOINT and the file leave it unset.
	Endpoint string `json:"endpoint,omitempty" env:"AZURE_AI_PROJECT_ENDPOINT"`
	// Token is a static bearer token (as `az account get-access-token
	// --scope https://ai.azure.com/.default` prints it). With neither Token
	// nor APIKey, azidentity's DefaultAzureCredential is used.
	Token string `json:"token,omitempty" env:"AGENT_TOKEN"`
	// APIKey is the resource's API key, sent in the api-key header.
	APIKey string `json:"api_key,omitempty" env:"TOOLRELAY_FOUNDRY_API_KEY"`
	// Agent names an existing agent to run. When it is empty, or when Model
	// is set, a version of the agent (named Agent, or "toolrelay-agent") is
	// created from the program's tools, and deleted on Close.
	Agent string `json:"agent,omitempty" env:"TOOLRELAY_FOUNDRY_AGENT"`
	// AgentVersion is the version of Agent to run; empty means the latest.
	AgentVersion string `json:"agent_version,omitempty" env:"TOOLRELAY_FOUNDRY_AGENT_VERSION"`
	// Model is the model deployment of a created agent version, and the
	// model of the responses backend; empty means DefaultFoundryModel.
	Model string `json:"model,omitempty" env:"TOOLRELAY_FOUNDRY_MODEL"`
	// Instructions are a created agent version's instructions, and the
	// instructions of the responses backend.
	Instructions string `json:"instructions,omitempty" env:"TOOLRELAY_FOUNDRY_INSTRUCTIONS"`
	// Mode links the responses of a thread: "conversation" (the default of
	// foundry and fake-foundry) or "previous_response_id" (the default of
	// responses).
	Mode string `json:"mode,omitempty" env:"TOOLRELAY_FOUNDRY_MODE"`
	// Stream receives responses as server-sent events.
	Stream bool `json:"stream,omitempty" env:"TOOLRELAY_FOUNDRY_STREAM"`
	// Keep leaves the created agent version and conversations on the
	// service at Close.
	Keep bool `json:"keep,omitempty" env:"TOOLRELAY_FOUNDRY_KEEP"`
	// ResponsesAPIKey and ResponsesBaseURL are the API key and base URL of
	// the responses backend (the plain Responses API).
	ResponsesAPIKey  string `json:"responses_api_key,omitempty" env:"OPENAI_API_KEY"`
	ResponsesBaseURL string `json:"responses_base_url,omitempty" env:"OPENAI_BASE_URL"`
}

// DefaultFoundryModel is the model deployment used when none is configured, as
// in the service's samples.
const DefaultFoundryModel = "gpt-4.1-mini"

func init() {
	register("foundry", openFoundry)
	register("responses", openResponses)
	register("fake-foundry", openFakeFoundry)
}

func (c *FoundryConfig) model() string {
	if c.Model == "" {
		return DefaultFoundryModel
	}
	return c.Model
}

// agentOptions sets the agent of opts: a definition to create from the
// toolbox, or the existing agent the configuration names.
func (c *FoundryConfig) agentOptions(opts *foundry.Options) {
	if c.Agent == "" || c.Model != "" {
		opts.Agent = &foundry.AgentDefinition{Name: c.Agent, Model: c.model(), Instructions: c.Instructions}
		return
	}
	opts.AgentName, opts.AgentVersion = c.Agent, c.AgentVersion
}

func openFoundry(ctx context.Context, req *OpenRequest) (driver.Backend, error) {
	c := req.Config.Foundry
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("FOUNDRY_PROJECT_ENDPOINT")
	}
	opts := &foundry.Options{
		Endpoint: endpoint,
		Token:    c.Token,
		APIKey:   c.APIKey,
		Mode:     foundry.Mode(c.Mode),
		Stream:   c.Stream,
		Keep:     c.Keep,
		Logger:   req.Logger,
	}
	c.agentOptions(opts)
	return foundry.Open(ctx, req.Tools, opts)
}

func openResponses(ctx context.Context, req *OpenRequest) (driver.Backend, error) {
	c := req.Config.Foundry
	return foundry.OpenResponses(ctx, req.Tools, &foundry.ResponsesOptions{
		BaseURL:      c.ResponsesBaseURL,
		APIKey:       c.ResponsesAPIKey,
		Model:        c.model(),
		Instructions: c.Instructions,
		Mode:         foundry.Mode(c.Mode),
		Stream:       c.Stream,
		Keep:         c.Keep,
		Logger:       req.Logger,
	})
}

// fakeFoundry is the foundry backend opened against a fake project
// running in the process; Close closes both.
type fakeFoundry struct {
	*foundry.Backend
	srv   *foundrytest.Server
	once  sync.Once
	close error
}

// Server returns the fake project, for tests.
func (f *fakeFoundry) Server() *foundrytest.Server { return f.srv }

// Close closes the backend, then the fake project. Later calls do
// nothing.
func (f *fakeFoundry) Close() error {
	f.once.Do(func() {
		f.close = f.Backend.Close()
		f.srv.Close()
	})
	return f.close
}

// fakeFoundryToken is the static bearer token the fake-foundry backend uses.
const fakeFoundryToken = "fake-foundry-token"

// openFakeFoundry starts a fake Foundry project (package foundrytest)
// playing the script, and opens the real foundry backend against it with
// a static token, so that the program exercises the real wire path with
// no service and no credentials. The agent version is always created from
// the toolbox.
func openFakeFoundry(ctx context.Context, req *OpenRequest) (driver.Backend, error) {
	script, err := foundryScript(req, "fake-foundry")
	if err != nil {
		return nil, err
	}
	c := req.Config.Foundry
	srv := foundrytest.NewServer(script, &foundrytest.Options{Token: fakeFoundryToken})
	name := c.Agent
	if name == "" {
		name = foundry.DefaultAgentName
	}
	b, err := foundry.Open(ctx, req.Tools, &foundry.Options{
		Endpoint:       srv.ProjectEndpoint(),
		Token:          fakeFoundryToken,
		Agent:          &foundry.AgentDefinition{Name: name, Model: c.model(), Instructions: c.Instructions},
		Mode:           foundry.Mode(c.Mode),
		Stream:         c.Stream,
		HTTPClient:     srv.Client(),
		RequestOptions: []option.RequestOption{option.WithMaxRetryDelay(10 * time.Millisecond)},
		Logger:         req.Logger,
	})
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeFoundry{Backend: b, srv: srv}, nil
}

// foundryScript returns the script a fake backend plays: the request's, or
// the one the configuration names.
func foundryScript(req *OpenRequest, backend string) (*coretest.Script, error) {
	if req.Script != nil {
		return req.Script, nil
	}
	if req.Config.Script == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "adapter: %s needs a model script: pass Options.Script or set TOOLRELAY_SCRIPT to a JSON script file", backend)
	}
	s, err := coretest.LoadScript(req.Config.Script)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "adapter: %s: script %s: %v", backend, req.Config.Script, err)
	}
	return s, nil
}
