// Package openaitest provides a fake OpenAI Agents API server for tests: a
// real HTTP server on loopback ([net/http/httptest]) that plays a
// [coretest.Script] and speaks the sessions wire format the openai-go SDK
// uses, faithfully enough that the SDK's own helpers
// (client.Beta.Agents.Sessions.Stream with ToolHandlers, NewStreaming with
// BetaAgentSessionFinalResult) run against it unmodified.
//
// Typical use in a test:
//
//	srv := openaitest.NewServer(coretest.Simple("get_customer", `{"customer_id":"123"}`,
//		`Found: {{output "get_customer"}}`), nil)
//	defer srv.Close()
//	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"))
//
// # What it serves
//
// POST and GET (list) agents, GET, POST (update) and DELETE agents/{id};
// GET agents/sessions (list, by agent); POST agents/sessions (plain, and
// with "stream": true a creation stream that carries the first turn); GET
// POST (update: metadata) and DELETE agents/sessions/{id}; GET
// agents/sessions/{id}/events (SSE;
// the subscriber is registered before the headers are flushed); POST
// agents/sessions/{id}/events (202); GET .../items, .../turns,
// .../turns/{turn_id} and .../turns/{turn_id}/items. Paths are served with
// and without the "/v1" prefix of [Server.URL].
//
// Each session holds one [coretest.Model]: a user input begins the next
// turn of the script; a step of calls is announced as function_call items
// and parks the session in requires_action with the calls in
// required_actions; once every pending call has a result the model takes
// its next step; a text step ends the turn (turn.item.done with the final
// message, turn.completed, agent.session.idle); Step.Fail ends it with
// turn.failed. The agent's tools (saved or inline) are given to the model,
// so a deferred tool can be called only after a Step.Search loaded it, and
// a deferred tool without a tool_search tool is refused.
//
// # Protocol rules it enforces
//
// Every request needs "Authorization: Bearer <key>" (401 otherwise). A tool
// result for a call that is not pending is refused with the service's 400
// "Unknown pending tool call: <call_id>" (and nothing in that request is
// applied). A POST carrying an Idempotency-Key already seen with the same
// body is answered from the first response and not applied again. Every
// event has a unique event_id; turn lifecycle events carry the turn object;
// only "error" events (sent before a failed turn's turn.failed) have a
// top-level "error" key. A step scripted to fail with code
// "budget_reached" pauses the session as a spending limit does (status
// budget_reached, an agent.session.budget_reached event). environment must be
// {"type":"none"} or {"type":"self_hosted","workspace_directory":"/…"},
// and input is required. A self-hosted session's turn waits for its
// executor, as the service's does (status requires_action, required action
// environment_connection, which no input event answers), until
// [Server.ConnectEnvironment] stands for the program's executor
// connecting.
//
// # Webhooks
//
// With [Options].Webhooks the server sends signed webhooks of its session
// events (created, in_progress, action_required, idle) to the URLs given,
// over a real HTTP client: Standard Webhooks signatures openai-go's
// Unwrap verifies ([SignWebhook] signs alike, for tests that send what the
// service would not), duplicated, shuffled, and sent again while not
// answered 2xx, as configured. [Server.WebhookDeliveries] records every
// attempt; [Server.FlushWebhooks] waits for those queued.
//
// # Faults
//
// [Options].Fault injects faults per request (a status such as 429 with
// Retry-After-Ms or 500, a dropped response after the request was applied,
// a delay, an event stream closed after N events, tool results refused
// after their 202); DuplicateEvents writes
// every event twice; StrayCalls announces a function_call that
// required_actions does not list; Commentary precedes every answer with a
// commentary message; Subagents has the agent delegate to subagents before
// every answer (their events, items and turns).
//
// # Assertions
//
// [Server.Received] reports what the sessions received in the neutral terms
// of [coretest.Received] (for the shared conformance suite);
// [Server.Requests] reports every raw request.
//
// # Limits
//
// The fake runs function tools in the client only: environment types other
// than "none", hosted tools, the subagents API (GET .../subagents),
// artifacts, traces and vaults are not served (404 or 400); subagents are
// only played, with [Options].Subagents; a self-hosted environment has no executor but
// ConnectEnvironment. Computer use is limited to requests for a browser's
// access to an origin (scripted with coretest.Call.Origin), or with
// [Options].SignIn to sign in to it (browser_authentication). No session
// fails, so agent.session.failed is never sent. Agent updates apply to later sessions
// only; session updates keep metadata only (spend control and prompt cache
// options are accepted and ignored). DuplicateEvents duplicates every
// stream, not one request's.
package openaitest
