package foundry

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/internal/respond"
)

// Mode says how the responses of a thread are linked.
type Mode = respond.Mode

// The two ways the service links the responses of a thread.
const (
	// Conversation keeps a thread in a conversation: the first user
	// message creates it, and every response is made in it. The thread is
	// the conversation id. This is the default.
	Conversation = respond.Conversation
	// Chain links each response to the one before with
	// previous_response_id. The thread is the latest response id.
	Chain = respond.Chain
)

// Delivery says how a backend receives a response.
type Delivery = respond.Delivery

// The deliveries of the Responses API.
const (
	// Blocking sends each request and reads the whole response as one
	// JSON body (the default).
	Blocking = respond.Blocking
	// Streaming receives each response as server-sent events.
	Streaming = respond.Streaming
)

// Scope is the OAuth scope of the tokens the backend asks its credential
// for.
const Scope = "https://ai.azure.com/.default"

// DefaultAgentName names the agent a definition creates a version of when
// it names none.
const DefaultAgentName = "toolrelay-agent"

// Options configure a Foundry backend (see [Open]).
type Options struct {
	// Endpoint is the project endpoint,
	// https://<resource>.services.ai.azure.com/api/projects/<project>.
	// Required. (Package adapter reads it from AZURE_AI_PROJECT_ENDPOINT or
	// FOUNDRY_PROJECT_ENDPOINT.)
	Endpoint string

	// Credential provides Entra ID tokens (scope [Scope]). When Credential,
	// Token and APIKey are all unset, Open uses
	// azidentity.NewDefaultAzureCredential.
	Credential azcore.TokenCredential
	// Token is a static bearer token, as `az account get-access-token
	// --scope https://ai.azure.com/.default` prints it (the AGENT_TOKEN of
	// the service's samples). It is used as it is, until it expires.
	Token string
	// APIKey authenticates with the resource's key, sent in the api-key
	// header, instead of a token.
	APIKey string

	// Agent names an existing agent to run, and AgentVersion one of
	// its versions: empty means the one the service runs (the version its
	// endpoint's version selector serves, when its endpoint is
	// configured; else the latest). Open checks that it exists and that
	// toolrelay can run it (see the package doc's "Agent endpoints,
	// hosted agents and definition kinds").
	Agent        string
	AgentVersion string
	// Definition, if set, defines an agent version that Open finds (one of
	// the same definition, made by a backend of this process or another) or
	// creates, with the toolbox's tools as its function tools; Close
	// deletes it unless Keep is set. Definition.Name (or DefaultAgentName)
	// replaces Agent.
	Definition *AgentDefinition

	// Mode links the responses of a thread; empty means Conversation.
	Mode Mode
	// Delivery says how a response is received: Blocking (the default,
	// empty) reads each as one JSON body; Streaming receives it as
	// server-sent events. The steps are the same; error events are
	// reported as errors.
	Delivery Delivery
	// Keep leaves on the service what the backend created (the agent
	// version and the conversations it started); by default Close deletes
	// them.
	Keep bool

	// HTTPClient sends the requests, and the token requests of the
	// DefaultAzureCredential Open builds; nil means a default client.
	// Tests set the fake server's client. The backend sends with a copy
	// whose redirects to another origin (scheme, host or port: https to
	// http is one) are refused, with a PermissionDenied error, before the
	// client's own CheckRedirect sees them; the client is not modified.
	HTTPClient *http.Client
	// RequestOptions are added to every openai-go request (responses and
	// conversations), after the backend's own: retries, timeouts, headers.
	RequestOptions []option.RequestOption
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

	// Logger receives warnings (an agent tool without a handler, a failed
	// cleanup); nil means slog.Default(). Tokens and keys are never logged.
	Logger *slog.Logger
}

// AgentDefinition defines a prompt agent version made from the toolbox.
type AgentDefinition struct {
	// Name names the agent; empty means DefaultAgentName. At most 63
	// letters, digits and hyphens, starting and ending with a letter or
	// digit.
	Name string
	// Model is the model deployment that runs the agent, such as
	// "gpt-4.1-mini". Required.
	Model string
	// Instructions are the agent's instructions.
	Instructions string
	// Description describes the version (at most 512 characters).
	Description string
}

// FailureOutput returns the output a failed call sends, since
// function_call_output has no success flag: a JSON object with one member,
// "error", holding message, the text the runner decided the model may see.
// For example:
//
//	{"error":"unknown tool \"getTime\"; available tools: getUserFavoriteCity"}
func FailureOutput(message string) string { return respond.FailureOutput(message) }
