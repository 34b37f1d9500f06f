// Package foundrytest provides a fake Azure AI Foundry project for tests:
// a real HTTPS server on loopback ([httptest.NewTLSServer], with an ECDSA
// certificate for the same hosts for cheaper handshakes) that speaks the
// service's wire format and plays a [coretest.Script] as the model. It
// serves, under /api/projects/<project>:
//
//   - the agents API (api-version=v1 required): POST|GET /agents,
//     GET|POST|DELETE /agents/{name} (POST: a new version),
//     POST|GET /agents/{name}/versions,
//     GET|DELETE /agents/{name}/versions/{version};
//   - the OpenAI-compatible API (no api-version): POST /openai/v1/conversations,
//     GET|POST|DELETE /openai/v1/conversations/{id}, POST|GET
//     /openai/v1/conversations/{id}/items, POST /openai/v1/responses (JSON,
//     or server-sent events when "stream": true), GET|DELETE
//     /openai/v1/responses/{id}, GET /openai/v1/responses/{id}/input_items,
//     GET /openai/v1/models;
//   - an agent's endpoint (api-version=v1 required): the OpenAI-compatible
//     routes above but models, under /agents/{name}/endpoint/protocols/openai/.
//
// A plain request's text.format is echoed in its response as the service
// echoes it (json_schema with its name, schema, description and strict).
// Under a strict json_schema the model never answers text that does not
// validate, as Structured Outputs hold the real model to the schema: a
// scripted answer that breaks the schema fails the response (status
// failed, code server_error, the reason in the message), so that a test
// cannot pass on an answer the service would never send.
//
// A call scripted with coretest.Call.Approval is an MCP tool's: the
// response asks for its approval with an mcp_approval_request item whose
// server_label is the declared MCP tool's (the one whose allowed_tools
// name the call, else the first; "fake-mcp" when the request declares
// none); once approved, the next response's output begins with the
// mcp_call item of the call the service made (its output "approved",
// which is also what the model is told: the fake runs no MCP server).
//
// The other shapes of the 2026 wire a script asks for:
//
//   - coretest.Step.Commentary: an assistant message of phase
//     "commentary" before the step's items (streamed with its phase on
//     response.output_item.added), the answer then of phase
//     "final_answer";
//   - a call of a tool named "ns.name": a function_call of function name
//     in namespace ns; the functions of a namespace tool ns offered are
//     the tools "ns.name" the model may call;
//   - coretest.Call.Consent: an oauth_consent_request item (id, the MCP
//     server as server_label, a consent_link on the fake's host, not
//     served) that needs no reply item: the next response requested on
//     the thread goes on from it, the model told "consented", or, when
//     that request carries a developer (or system) message, a failure
//     with that message; a plain request's fake (the Responses API has no
//     consent requests) asks for an MCP approval instead;
//   - coretest.Call.Item: an output item of that type the client is to
//     run (custom_tool_call, computer_call, local_shell_call, shell_call
//     with a local environment, apply_patch_call, tool_search_call with
//     execution "client", program; Foundry's workflow_action and
//     structured_outputs), in openai-go v3.105's shapes and, for
//     Foundry's, Microsoft's reference; the model waits for its output,
//     which the fake has no way to take.
//
// A plain request (Options.Plain; no agent_reference) may resend a whole
// history instead of naming a previous response, as the Responses
// function-calling loop does with store false: its function_call,
// reasoning, tool_search and MCP approval items are the caller's record of
// the model's output, replayed through a new model. A response echoes the
// request's store (one not stored cannot be read or continued) and tools.
// Deferred function tools need a tool_search tool; the model calls them
// only after its scripted search (tool_search_call and tool_search_output
// items) loaded them, and calls no tool it was not given.
//
// Each conversation, and each chain of responses linked by
// previous_response_id, has its own [coretest.Model]: a conversation's
// user messages begin the model's turns, and function_call_output items
// deliver the results of its calls. A request may continue a chain from
// any of its responses, not only the latest.
//
// # Agent endpoints, kinds and hosted sessions
//
// Agents are the 2026 Agent object: [Server.SetAgentState] disables one
// (state, state_source), [Server.SetAgentEndpoint] configures its endpoint
// and the version selector's FixedRatio rules, and [Server.AddAgentVersion]
// makes a version of any definition kind (prompt; hosted, with
// container_protocol_versions, cpu and memory; workflow; external). The
// agent's endpoint is served at /agents/{name}/endpoint/protocols/openai/
// (responses and conversations, api-version=v1 required, the project's
// conversations): a create-response request there carries no
// agent_reference and runs the version of the selector's largest share
// (the latest without rules). A hosted agent's request there runs in the
// session its agent_session_id names (8 to 128 letters, digits, '-' or
// '_'; one not known yet is made with that id), or in a new one when it
// names none; the answer names the session in the x-agent-session-id
// header and the response's agent_session_id, and [Server.Sessions] shows
// each session's sandbox, the turns it served ([Request.AgentSessionID]
// the session a request named). The fake refuses a disabled agent on both
// routes (403 agent_disabled), a hosted agent on the project's route and
// an external agent on either (400).
//
// Here the script plays a hosted agent's container, and a workflow, as it
// plays a prompt agent's model. The endpoint does not split traffic among
// the selector's versions, and never derives a session from a
// conversation or a previous response (the service may). The status and
// code of a disabled agent's refusal, and the refusal of an
// agent_reference on an endpoint, are inferred.
//
// # What it enforces
//
// The fake refuses what the service refuses, with the service's status
// and words:
//
//   - no bearer token (or api-key): 401 PermissionDenied;
//   - a top-level "agent" key: 400 invalid_payload "The 'agent' property is
//     deprecated. Use 'agent_reference' instead.";
//   - tools, tool_choice, parallel_tool_calls or text alongside an
//     agent_reference: 400 invalid_payload "Not allowed when agent is
//     specified.";
//   - a function_call_output for a call that is not waiting for one (an
//     MCP approval request included, which only an mcp_approval_response
//     answers): 400 "No tool call found for function call output with
//     call_id …";
//   - a function or namespace tool whose name is not letters, digits, '_'
//     and '-' (a namespace's function named "crm.lookup"): 400
//     invalid_value "Invalid 'tools[i].name': string does not match
//     pattern…";
//   - a request that leaves a waiting call without an output: 400 "No
//     tool output found for function call …";
//   - an unknown agent or agent version: 404;
//   - conversation together with previous_response_id: 400;
//   - server-side output items (reasoning and the like) sent back as
//     input: 400 "The provided data does not match the expected schema";
//   - a missing or wrong api-version on the agents routes, or one on the
//     /openai/v1 routes: 400.
//
// Without [Options.Plain], every response must reference an agent. With
// it, requests without an agent are served as the plain Responses API:
// they must name a model, and may carry tools.
//
// # Faults and records
//
// [Server.InjectFault] queues faults for the next requests of an
// operation: an error status (429 with retry-after-ms, 500, 503, …), a
// response whose status is failed (response.failed when streaming), an
// error event, or a dropped answer (the request is served, then the
// connection is closed without an answer); Options.Fault, as in package
// openaitest, decides for the other requests, and Options.Usage sets the
// usage every response reports. [Server.Requests] returns every
// request as it arrived, with the status answered; [Server.Received]
// returns what the fake accepted in neutral terms ([coretest.Received]).
// A Duplicate fault writes a stream's events twice; Delay holds a request.
//
// # Limits
//
// Only prompt agents with function tools (and tool search, namespaces,
// and MCP approval and OAuth consent requests scripted with
// coretest.Call.Approval and Consent) are modelled; hosted tools are
// accepted in definitions and never run, and the items of coretest.Call.Item
// are sent, never answered. A blocking
// response cannot be delivered twice. Reasoning items carry no encrypted
// content. Model deployments are a fixed list.
package foundrytest
