// Package openai is the toolrelay backend for OpenAI Agents API sessions,
// built on the openai-go SDK (client.Beta.Agents). Application code uses it
// through a [core.Runner], usually opened by package adapter: importing this
// package registers the "openai" backend there. [Open] returns the
// driver.Backend the runner drives.
//
// Functions run in this process: sessions are created with environment
// {"type":"none"}. A new session's first turn runs on its creation stream
// (Sessions.NewStreaming with the input); a later turn on the same session
// subscribes to the events stream first, then posts an
// agent.session.input.message. When the session needs results
// (agent.session.requires_action) the pending calls are exactly those in
// session.required_actions: a function_call item seen in the stream or in
// the history but not listed there is never run. The runner runs them and
// the results go back together, as agent.session.input.tool_result events
// (turn_id, call_id, success with output, or success false with error) in
// one request. The turn ends on the root turn's agent.session.turn.completed
// followed by agent.session.idle; the answer is the turn's completed
// assistant messages that are not commentary.
//
// A thread is a session id; a call's journal key is the session, the turn
// id and the call id from required_actions, so a call rebuilt by Resume in
// a new process has the key it had when seen live.
//
// # Subagents
//
// A session's agent may delegate to subagents (multi_agent). The turn a
// run follows is always the root agent's: the session's turns list holds
// the subagents' turns too (subagent_id set), and the backend reads it page
// by page, newest first, past them (at most 1000 turns; past that a run
// fails with ResourceExhausted). What the subagents do never enters the
// answer: to a streamed run (core.Runner.Stream) it goes as
// core.EventAgentActivity events naming who acted (the agent's id, as the
// service gives it) and what (the service's type: subagent.created,
// .active, .closed; create_subagent_call, send_subagent_input_call,
// resume_subagent_call, wait_for_subagents_call, interrupt_subagent_call,
// close_subagent_call; agent_message; and "message", a subagent's own
// message), with the text said or sent. They come from the event stream
// as it carries them: none are read back after a dropped stream, nor when
// polling. A function call of a subagent's turn is a call like any other.
//
// # Configuration
//
// Package adapter fills [Options] from [Settings]: section "openai" of the
// configuration file, the environment, or a Settings value in code, with
// the shared settings (instructions) of adapter.Settings:
//
//	Setting                  Environment variable             File key
//	API key                  OPENAI_API_KEY                   openai.api_key
//	base URL                 OPENAI_BASE_URL                  openai.base_url
//	existing agent's id      TOOLRELAY_OPENAI_AGENT           openai.agent
//	model of a new agent     TOOLRELAY_OPENAI_MODEL           openai.model
//	session to reuse         TOOLRELAY_OPENAI_SESSION_ID      openai.session_id
//	keep what was created    TOOLRELAY_OPENAI_KEEP            openai.keep
//	streaming or polling     TOOLRELAY_OPENAI_TRANSPORT       openai.transport
//	pause between polls      TOOLRELAY_OPENAI_POLL_INTERVAL   openai.poll_interval
//	stream resumes per step  TOOLRELAY_OPENAI_MAX_RECONNECTS  openai.max_reconnects
//
// The options:
//
//   - APIKey and BaseURL, defaulting to OPENAI_API_KEY and OPENAI_BASE_URL;
//     any other SDK option goes in RequestOptions (retries, HTTP client,
//     headers). The key goes only to the base URL's origin: over https, or
//     plain http to a loopback host (127.0.0.0/8, ::1, localhost; the
//     fakes run there) — Open refuses another http base URL, and a request
//     that request options would send so is refused — and openai-go
//     refuses a redirect to another origin (with an *http.Client in
//     RequestOptions too, whatever its CheckRedirect).
//   - The agent: Agent names an existing agent (its tools are defined on
//     the service; the toolbox supplies only the implementations, and Open
//     reports the functions it lacks; it refuses, FailedPrecondition, an
//     agent that declares a function async, since the backend answers
//     every call within its turn). Otherwise an agent is made from the
//     toolbox on first use, with Model (default [DefaultModel]) and
//     Instructions: one function tool per tool, its JSON Schema sent as it
//     is (the sessions API has no strict flag), defer_loading for deferred
//     tools, and a {"type":"tool_search"} tool whenever one is deferred.
//   - SessionID runs threadless runs on an existing session. Before the
//     backend first sends input to a session it did not create (this one,
//     or a thread a run names), it reads the session, and refuses
//     (FailedPrecondition, as an existing agent at Open) one whose agent,
//     as the session runs it (with the session's override of its tools),
//     declares a function async.
//   - A run's response format (core's RunOptions.Format) goes with the
//     session the run creates: its agent.text is {"format":{"type":
//     "json_schema","schema":…}}, which overrides the agent's text.format
//     for that session (the agent made from the toolbox, or an existing
//     one alike; the sessions API gives the format no name and no strict
//     flag). A session's format is set when it is made: a later run on it
//     may ask for the same format, or none (the session answers in its
//     own), but another is refused (InvalidArgument, nothing sent).
//   - Keep keeps, on Close, the agent and sessions the backend created.
//     By default Close deletes the sessions whose run is over, and the
//     agent once no session uses it. A session whose run paused for a
//     person's decision stays (with its agent) until a run finishes it, in
//     this process or another: the sessions a backend creates are marked
//     {"toolrelay":"disposable"} in their metadata, and a backend that
//     resumes one made elsewhere (a takeover) deletes it on its Close once
//     its run is over; a session without the mark (the caller's own) is
//     never deleted by a backend that did not create it. The agent made
//     from the toolbox carries the digest of its definition in its
//     metadata (toolrelay_definition): every process of the same program
//     finds and uses that one agent rather than make its own, and one
//     whose agent another process deleted makes it again.
//   - Delivery Polling reads required_actions with GET requests every PollInterval
//     instead of following the event stream.
//   - MaxReconnects bounds how often a dropped stream is resumed within one
//     step.
//   - MaxResponseBytes, MaxEventBytes, IdleTimeout and MaxSilence bound what
//     is read from the service (see Options). A stream that passes
//     IdleTimeout or MaxSilence is handled as a dropped one (resumed, up to
//     MaxReconnects, after which the run fails with DeadlineExceeded), so a
//     stream left quiet while long handlers run costs one resume; an event
//     past MaxEventBytes fails the run with ResourceExhausted at once.
//
// # Delivery
//
// Event streams are read as openai-go (v3.102) reads them, in events mode.
// Events are de-duplicated by event_id. A stream that ends mid-turn is
// resumed: the backend subscribes again first, then reads the session
// (Sessions.Get) and continues from what it shows: calls still pending, or
// a finished turn whose answer is read from the turn's items. Resume does
// the same for a thread this process does not follow (after a crash, in a
// new process).
//
// Results carry an Idempotency-Key derived from the results' own keys
// ([github.com/toolrelay/toolrelay/core/driver.ToolResult].IdempotencyKey,
// stable per call), so a resend is the same request. When the outcome of a request is lost, the backend reads the
// session and sends again only the results of calls still pending. A 400
// "Unknown pending tool call" for a call whose result was delivered before
// (by this process, or as the journal records) means it was delivered; for
// a call the service just announced, it is retried briefly. The 202 that
// answers results means acceptance, not durable completion: results the
// service refuses after it (a requires_action event that lists their calls
// again and nothing new, or an error event naming a call) end a streamed
// run with a FailedPrecondition error naming the call, the turn left
// waiting. They are not sent again: the same request would be answered from
// the service's idempotency store, and a result refused for what it holds
// is refused again (the program cancels the turn, or answers the call with
// the SDK and resumes). A run that polls sees no such event (a call still
// listed just after its 202 may not have been applied yet): it waits while
// the session lists nothing but calls whose results went, at most 2
// minutes, then ends with the same FailedPrecondition error.
//
// When a run stops early (step limit, canceled context) the turn is
// cancelled with agent.session.input.cancel, so the service does not keep
// it waiting.
//
// # Errors
//
// Errors from the service are the SDK's *openai.Error (reach it with
// [errors.As]), wrapped with what was being done; [Backend.ErrorCode] maps
// its status with [errcode.FromHTTPStatus], as package foundry does: 401
// and 403 are PermissionDenied (the message names authentication), 502,
// 503 and 504 Unavailable (retrying later may succeed). A turn the
// service failed or cancelled gives a *[driver.TurnError] (the type
// package foundry returns too) carrying the service's code and message,
// mapped by its code (rate and spend limits, context length: ResourceExhausted;
// authentication_error: PermissionDenied; invalid_request: InvalidArgument;
// server and internal errors: Internal; a cancelled turn: Canceled). A
// session paused on its spending limit (agent.session.budget_reached, or
// status budget_reached) gives a TurnError with status and code
// budget_reached (ResourceExhausted). The "error" event the service sends
// before a turn or the session fails ends nothing: the lifecycle event
// after it does, and the error's code and message complete a failed turn
// that carries none. A
// failed session gives a *[SessionError] (Internal). An MCP approval
// request (required action mcp_approval_request) is a call of kind
// driver.ServiceApproval, decided with core.Runner.Decide and answered with
// agent.session.input.mcp_approval_request_result (approve or deny; the
// event has no room for a reason). A computer-use request for the browser's
// access to an origin (computer_use_approval_request, browser_origin_access)
// is a ServiceApproval call named [OriginAccess] with arguments
// {"origin", "reason"}, answered with
// agent.session.input.computer_use_approval_request_result (approve or
// deny). Any other required action gives an *[UnsupportedActionError]
// (Unimplemented), the turn left waiting, its Error saying what the
// program does: a computer-use request to sign in (browser_authentication,
// which asks for credentials toolrelay never holds) is answered with the
// SDK (an agent.session.input.computer_use_approval_request_result,
// browser_authentication submit or cancel); an environment_connection (a
// session in a self-hosted environment waits for its executor, which no
// input event answers) by starting or reconnecting the executor; a resume
// then goes on. A stream that keeps dropping gives Unknown. Context errors
// are returned as they are.
//
// # Webhooks
//
// [WebhookHandler] serves the webhooks of a project's sessions
// (agent.session.created, in_progress, action_required, idle, failed):
// it verifies each delivery with openai-go's client.Webhooks.Unwrap
// (signature and timestamp; 401 otherwise, 413 past its size bound, 408
// past its time bound), takes each event once (in memory, and across the
// processes sharing the runner's journal), and on
// agent.session.action_required resumes the session's run in the
// background (core.Runner.Resume), in whichever process the webhook
// reached, so that no process follows a session while it waits; a resume
// that meets an outage is tried again, then left for core.Runner.TakeOver.
// An environment_connection is handed to the program
// (WebhookOptions.OnEvent), not resumed. Only this backend has session
// webhooks: [NewWebhookHandler] refuses a runner over another.
//
// # SDK access
//
// [Backend.Client] returns the *openai.Client (of
// github.com/openai/openai-go/v3) the backend uses, for anything toolrelay
// does not do: answering a browser sign-in request, starting a session that
// only webhooks follow, listing a session's items, updating the agent.
// [Backend.Agent] names the agent in use.
package openai
