// Package responses is the responses backend: the tool loop over the plain
// Responses API (OpenAI's, or any compatible one), with no agent. The
// model, the instructions and the toolbox's tools go with every request;
// a thread is linked by previous_response_id (Chain, the default), kept
// in a conversation (Conversation), or not stored at all (Stateless: every
// request says store: false and resends the thread's history, which the
// backend holds in memory with the reasoning items' encrypted content; a
// dropped stream is answered by sending the request again; the thread
// lives in the process that started it). The loop is the one package foundry
// runs against an agent: each step is a response whose function_call
// items are the calls, and the results go back as function_call_output
// items of the next response (a failed call's output is a JSON object
// with an "error" member).
//
// # Output items
//
// A function of a namespace (the toolbox's tools named "ns.name", offered
// as the functions of one namespace tool ns) is called by namespace and
// name, and its output names both. An MCP approval request is a call of
// kind ServiceApproval, decided with core's Runner.Decide. The messages of
// the model's commentary (phase "commentary") are no part of the answer,
// and their streamed text is marked (core.Event.Commentary). An output
// item the client is to run other than a function call (custom_tool_call,
// computer_call, local_shell_call, shell_call in a local environment,
// apply_patch_call, tool_search_call executed by the client, program) is
// never an answer: the run ends with an Unimplemented error naming it,
// nothing of its step run. The items of the service's own tools are
// passed over. Cancel answers a pending MCP approval request with a denial
// giving its reason.
//
// # Configuration
//
// Importing the package registers the backend "responses" with package
// adapter, which fills [Options] from [Settings]: section "responses" of
// the configuration file, the environment, or a Settings value in code,
// with the shared settings (instructions, the service's limits) of
// adapter.Settings:
//
//	Setting                  Environment variable             File key
//	API key                  OPENAI_API_KEY                   responses.api_key
//	base URL                 OPENAI_BASE_URL                  responses.base_url
//	model                    TOOLRELAY_RESPONSES_MODEL        responses.model
//	thread linking           TOOLRELAY_RESPONSES_MODE         responses.mode  (previous_response_id, conversation, stateless)
//	blocking or streaming    TOOLRELAY_RESPONSES_TRANSPORT    responses.transport
//	keep conversations       TOOLRELAY_RESPONSES_KEEP         responses.keep
//
// The API key is sent only to the base URL's origin: a base URL that is
// not an http or https URL, or that is plain http to a host other than
// loopback while there is a key, gives an InvalidArgument error naming it
// redacted, and openai-go refuses a redirect to another origin.
package responses
