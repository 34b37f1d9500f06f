// Package foundry is the toolrelay backend for the Azure AI Foundry Agent
// Service: it runs the tool loop of a Foundry prompt agent, whose function
// tools are implemented by the program, over the project's
// OpenAI-compatible responses and conversations API. The same loop, with
// no agent, runs over the plain Responses API in package responses.
//
// Application code should use the portable API (core.Runner), opened by
// configuration through package adapter: importing this package registers
// the "foundry" backend there (package foundrytest registers the embedded
// fakes "fake-foundry" and "fake-responses"); [Open] is for programs that
// build the backend in code.
//
// # The protocol
//
// A run sends the user's message, then, while a response's output holds
// function_call items, hands them to the runner (which runs them
// concurrently) and sends one function_call_output item per call, all in
// the next request; it ends with the first response without calls, whose
// output text is the answer. Only function_call_output items and the
// user's messages are ever sent as input: server-side output items
// (reasoning, messages, tool calls) are never forwarded.
//
// Function_call_output has no success flag: a failed call's output is a
// JSON object {"error": "<message>"} holding the text the runner decided
// the model may see ([FailureOutput]). A content array returned by a tool
// is sent as an array of input_text, input_image and input_file parts.
//
// The responses of a thread are linked in one of two ways ([Mode]): in a
// conversation (the default of [Open]; the thread is the conversation id,
// the first message creates the conversation, as the service's samples
// do), or by previous_response_id (the default of package responses; the
// thread is the latest response id). Either thread can be resumed in a new
// process with Resume: the function calls the service lists without an
// output are the pending calls, and results kept in the runner's journal
// are sent again instead of running the functions twice. A call's journal
// key is (backend name, thread, "", call id): in conversation mode the
// conversation id, which the conversation's items let Resume rebuild; in
// chain mode the response that made the call.
//
// # Output items
//
// A response's function_call items are its calls. A function of a
// namespace (a namespace tool of the agent, or the toolbox's tools named
// "ns.name", which a definition offers as one) is the tool "ns.name", and
// its function_call_output names the namespace and the function as the
// call did. The service's mcp_approval_request and oauth_consent_request
// items are calls of kind ServiceApproval, decided with core's
// Runner.Decide. An approved MCP call goes as an mcp_approval_response,
// a denied one tells the model. An OAuth consent request (a person must
// sign in to an MCP server, or a toolbox, before the service runs its
// tools with their identity) is the call "<server_label>/oauth_consent",
// whose arguments {"type":"oauth_consent_request","server_label":…,
// "consent_link":…} carry the link to show the person; the request has no
// reply item: approved once they signed in, nothing is sent for it and
// the service is asked to go on, denied (or undecided in time), the model
// is told in a developer message. A paused run's request is found again
// by a resume in another process, in a conversation by the response_id of
// its items.
//
// The messages of the model's commentary (phase "commentary": a preamble
// to its calls or its answer) are no part of the answer, of a run or of a
// resume; streamed (or handed over whole), their text events are marked
// (core.Event.Commentary).
//
// An output item the client is to run that toolrelay does not run is
// never an answer: a step holding one ends the run with an error naming
// the item, Unimplemented for custom_tool_call, computer_call,
// local_shell_call, shell_call (in a local environment),
// apply_patch_call, tool_search_call (executed by the client) and program
// (programmatic tool calling), FailedPrecondition for workflow_action (a
// workflow agent's) and structured_outputs (a capture_structured_outputs
// tool's: ask for a response format instead). No function of that step
// runs, and the thread waits for the item's output, which toolrelay
// cannot give: the service may refuse a new run on it. Open warns about
// the tools of an existing agent whose calls are such items
// ([Backend.UnrunnableTools]). The items of the service's own tools (web
// and file search, code interpreter, image generation, MCP calls and
// listings, a tool search it executes, a shell in its container) are
// passed over.
//
// # Configuration
//
// [Options] holds the project endpoint
// (https://<resource>.services.ai.azure.com/api/projects/<project>), the
// credential, and the agent: the name (and optionally the version) of an
// existing agent, or a definition (model deployment, instructions) from
// which Open creates an agent version whose function tools are the
// toolbox's tools, with their strict flags. The version carries the digest
// of its definition in its metadata (toolrelay_definition): a process
// whose definition is the same (another worker, the one that takes a
// paused run over) finds and uses that version instead of creating its
// own. Close deletes what the backend created or took over (the agent
// versions it used, the conversations whose run is over) unless Keep is
// set; a process whose version another deleted on its Close creates it
// again. A conversation whose run paused for a person's decision, and the
// agent version, stay until a run finishes it: the conversations a backend
// creates are marked {"toolrelay":"disposable"} in their metadata, and a
// backend that resumes one made in another process deletes it on its
// Close once its run is over; a conversation without the mark (the
// caller's own) is never deleted by a backend that did not create it.
//
// A run's response format (core's RunOptions.Format) cannot go with a
// request that names an agent: the agent's definition carries it
// (text.format). With a definition, the backend names, for a run with a
// format, the version of the definition whose text.format is the run's
// (found by its digest or made, as any version, and deleted on Close),
// and the version without one for a run without. An existing agent
// (Options.Agent) answers in its own definition's format: a run's format
// is refused (InvalidArgument, nothing sent), and Capabilities says so.
//
// Authentication is an azcore.TokenCredential (by default
// azidentity.NewDefaultAzureCredential) asked for tokens of scope
// https://ai.azure.com/.default, or a static bearer token (Options.Token,
// the AGENT_TOKEN of the service's samples), or an API key (api-key
// header). One azcore bearer-token policy authenticates both clients, so
// the token is fetched once and cached; plain http endpoints are refused.
// Credentials go only to the origin they were configured for: every client
// the backend builds refuses a redirect to another origin (another scheme,
// host or port, so https to http too) before sending anything there — the
// agents pipeline and the token requests of the DefaultAzureCredential it
// builds with a PermissionDenied error, openai-go's requests with
// openai-go's own refusal — whatever the CheckRedirect of
// Options.HTTPClient says; [CredentialOptions] gives a credential of the
// program's own the same guard. Tokens and keys are never
// logged, and errors name an endpoint with its secrets masked.
//
// Package adapter fills [Options] from [Settings] (section "foundry" of the
// configuration file, the environment, or a Settings value in code), with
// the shared settings (instructions, the service's limits) of
// adapter.Settings:
//
//	Setting                  Environment variable                 File key
//	project endpoint         AZURE_AI_PROJECT_ENDPOINT            foundry.endpoint
//	                         (or FOUNDRY_PROJECT_ENDPOINT)
//	static bearer token      AGENT_TOKEN                          foundry.token
//	API key (api-key)        TOOLRELAY_FOUNDRY_API_KEY            foundry.api_key
//	agent to run             TOOLRELAY_FOUNDRY_AGENT              foundry.agent
//	agent version            TOOLRELAY_FOUNDRY_AGENT_VERSION      foundry.agent_version
//	model deployment         TOOLRELAY_FOUNDRY_MODEL              foundry.model
//	thread linking           TOOLRELAY_FOUNDRY_MODE               foundry.mode
//	blocking or streaming    TOOLRELAY_FOUNDRY_TRANSPORT          foundry.transport
//	keep what was created    TOOLRELAY_FOUNDRY_KEEP               foundry.keep
//
// With no agent configured, or with a model configured, foundry creates a
// version of the agent (named by the agent setting, or DefaultAgentName)
// from the program's tools, using the model deployment (default
// [DefaultModel]) and the instructions, and deletes it on Close; otherwise
// it runs the existing agent. It authenticates with AGENT_TOKEN, else the
// API key, else azidentity's DefaultAzureCredential.
//
// # Agent endpoints, hosted agents and definition kinds
//
// An existing agent (Options.Agent) is read as the 2026 Agent object
// describes it. A disabled agent (state "disabled") is refused by [Open]
// with FailedPrecondition, naming the agent, its state and where that
// comes from (state_source), before any conversation or response. An
// agent named without a version whose endpoint is configured
// (agent_endpoint) is called on its own route,
// <endpoint>/agents/<name>/endpoint/protocols/openai/ (responses and
// conversations, api-version=v1, no agent_reference), and runs the
// version its version selector serves: creating a version does not move
// the endpoint's traffic, so its tools are checked ([Backend.MissingTools],
// the warnings) against every version the selector routes traffic to,
// not against versions.latest. A version named in Options.AgentVersion
// runs as named, on the project's route; without an endpoint, the latest
// runs there.
//
// Each version is run or refused by its definition's kind, never read as
// another's: a prompt agent runs; a hosted agent runs on its endpoint (the
// only route that reaches it; a version named that the endpoint does not
// serve alone is refused with FailedPrecondition), its function tools
// checked as a prompt agent's, unless its container speaks no Responses
// protocol (container_protocol_versions), which is refused with
// Unimplemented; a workflow agent is refused with Unimplemented (its
// definition declares no function tools: the agents it invokes run theirs
// on the service, and its workflow_action items are no calls to answer);
// so is an external agent (its registration is metadata only: it runs
// outside Foundry) and any other kind.
//
// A hosted agent's turns run in a session, a sandbox whose $HOME and
// /files last across turns. The first turn of a thread names none; the
// service answers with the session it made (header x-agent-session-id),
// and every later request of the thread names it (agent_session_id). The
// backend keeps it in memory and as a note of the thread in the runner's
// journal ([driver.ThreadNotes]), under the thread each step moves to, so
// that a Resume after a restart, or a TakeOver in another process, runs
// in the same sandbox: the journal is what such a run shares with the one
// before, and a thread's id does not say its session. With a journal that
// keeps no notes the session lasts as long as the backend. An answer in
// another session than the thread's (the service made a new sandbox) is
// logged, and kept for the thread's later turns.
//
// # Errors
//
// Errors from the service are returned as the SDKs make them, so that
// errors.As reaches an *openai.Error (responses, conversations) or an
// *azcore.ResponseError (agents); [Backend.ErrorCode] classifies them by
// HTTP status with errcode.FromHTTPStatus, as package openai does. A
// credential that cannot give a token fails the request with
// PermissionDenied.
// A response that ends failed, incomplete or cancelled, or a stream's
// error event, is a *[driver.TurnError] carrying the service's code and message,
// classified by that code (rate_limit_exceeded ResourceExhausted,
// server_error Internal, …). Bad options are *errcode.Error values with
// code InvalidArgument.
//
// Starting a new turn on a thread whose last turn still waits for results
// fails with InvalidArgument ("No tool output found for function call");
// resume the thread instead. A Canceler is provided: when a run stops
// early, the pending calls are given an output saying so (an MCP approval
// request, a denial giving that reason; an OAuth consent request needs
// nothing), so that the thread stays usable. A step holding an output item
// toolrelay does not run ends the run with Unimplemented or
// FailedPrecondition (see Output items).
//
// # SDK access
//
// [Backend.Client] returns the openai-go client (base URL
// <endpoint>/openai/v1/, or the agent's endpoint
// <endpoint>/agents/<name>/endpoint/protocols/openai/ with
// api-version=v1; authenticated by the backend), for requests the
// backend does not make; [Backend.Pipeline] returns the azcore pipeline of
// the agents API; [Backend.Agent] names the agent version in use.
// Options.RequestOptions adds openai-go request options (retries,
// timeouts, headers) to every request; Options.HTTPClient sets the HTTP
// client of both.
package foundry
