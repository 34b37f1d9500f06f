package foundry

import (
	"os"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/internal/backendcfg"
)

// Settings are the configuration settings of the foundry backend: section
// "foundry" of the configuration file, and the environment variables of
// the package doc's table. A program may also set them in code, as a
// Settings value (or a pointer to one) in adapter.Options.BackendSettings,
// whose non-zero fields win over the file and the environment.
type Settings struct {
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
	// is set, a version of the agent (named Agent, or DefaultAgentName) is
	// created from the program's tools, and deleted on Close.
	Agent string `json:"agent,omitempty" env:"TOOLRELAY_FOUNDRY_AGENT"`
	// AgentVersion is the version of Agent to run; empty means the latest.
	AgentVersion string `json:"agent_version,omitempty" env:"TOOLRELAY_FOUNDRY_AGENT_VERSION"`
	// Model is the model deployment of a created agent version; empty
	// means DefaultModel.
	Model string `json:"model,omitempty" env:"TOOLRELAY_FOUNDRY_MODEL"`
	// Mode links the responses of a thread: "conversation" (the default)
	// or "previous_response_id".
	Mode string `json:"mode,omitempty" env:"TOOLRELAY_FOUNDRY_MODE"`
	// Delivery is how responses are received (file key and variable say
	// "transport"): "blocking" (the default)
	// or "streaming" (server-sent events).
	Delivery string `json:"transport,omitempty" env:"TOOLRELAY_FOUNDRY_TRANSPORT"`
	// Keep leaves the created agent version and conversations on the
	// service at Close.
	Keep bool `json:"keep,omitempty" env:"TOOLRELAY_FOUNDRY_KEEP"`
}

// DefaultModel is the model deployment of an agent version created from
// the toolbox when none is configured, as in the service's samples.
const DefaultModel = "gpt-4.1-mini"

func init() { backendcfg.Register("foundry", OptionsFor, Open) }

// OptionsFor returns the options the configuration of req gives the
// backend: the shared settings, and the [Settings] of section "foundry".
func OptionsFor(req *adapter.OpenRequest) (*Options, error) {
	var s Settings
	if err := req.BackendSettings("foundry", &s); err != nil {
		return nil, err
	}
	if s.Endpoint == "" {
		s.Endpoint = os.Getenv("FOUNDRY_PROJECT_ENDPOINT")
	}
	o := &Options{
		Endpoint:   s.Endpoint,
		Token:      s.Token,
		APIKey:     s.APIKey,
		Mode:       Mode(s.Mode),
		Delivery:   Delivery(s.Delivery),
		Keep:       s.Keep,
		Logger:     req.Logger,
		HTTPClient: req.Client(nil),
	}
	o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence = backendcfg.Limits(req.Settings)
	if s.Agent == "" || s.Model != "" {
		model := s.Model
		if model == "" {
			model = DefaultModel
		}
		o.Definition = &AgentDefinition{Name: s.Agent, Model: model, Instructions: req.Settings.Instructions}
	} else {
		o.Agent, o.AgentVersion = s.Agent, s.AgentVersion
	}
	return o, nil
}
