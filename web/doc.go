// Package web serves a runner ([core.Runner], temporal.Runner: see
// [Runner]) to web pages: an http.Handler that
// speaks the UI message stream of the AI SDK's chat client (npm ai 7.x:
// useChat, Chat and DefaultChatTransport), so that a page made with it
// chats with the agent, sees its calls, and answers its approvals.
//
//	h := web.Handler(runner, &web.Options{Identity: userOf})
//	mux.Handle("/api/chat", h)
//	mux.Handle("/api/chat/", h) // the client's reconnections
//
// # The protocol
//
// The client POSTs the chat's id, its messages and a trigger; the handler
// reads the newest message only (the service keeps the conversation) and
// answers with server-sent events, each a JSON chunk, the header
// x-vercel-ai-ui-message-stream: v1, ending with data: [DONE]. The
// runner's events become chunks:
//
//	run starts                  start {messageId}
//	the model's step begins     start-step (before its first text or call)
//	text_delta, text_done       text-start, text-delta, text-end
//	reasoning_delta             reasoning-start, reasoning-delta, reasoning-end
//	tool_call                   tool-input-start, tool-input-available
//	approval_requested          tool-approval-request (approvalId: the call's id)
//	call_finished, call_reused, call_in_doubt
//	                            tool-output-available (the output, as JSON
//	                            when it is an object or array), or
//	                            tool-output-error (what the model is told),
//	                            or tool-output-denied (a person said no)
//	results_submitted           finish-step
//	run_finished                finish-step if a step is open; error
//	                            {errorText} if the run failed; finish
//	                            {finishReason: stop, tool-calls (awaiting
//	                            approval) or error; messageMetadata: {usage}}
//
// step_started, call_started and usage have no chunk of their own. The
// events of an agent tool's child run ([core.NewAgentTool]; those with a
// Path) have none either: the child's answer shows as the output of the
// run's call of the agent tool, the child's approvals as the run's own
// (approvalId: the run's id for each), each ending with the child's
// result for the call, and its usage is in the run's.
//
// # Approvals
//
// A call that needs a person's approval shows as a tool-approval-request,
// and the answer pauses (finish reason tool-calls). The page answers with
// addToolApprovalResponse and sends the assistant's message back (with
// sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses);
// each answer becomes [core.Runner.Decide], its actor the request's
// identity, and [core.Runner.ResumeStream] continues the same message:
// approved calls run and show their output, denied ones show as denied.
// The services' own approval requests (MCP) take the same path, and so do
// the questions a tool's handler asks ([core.Ask]; approvalId
// "<call>/<question>"), which end, once their call has its output, with
// the page's decision: {"approved":true} as their output, or denied.
//
// # Reloads and dropped connections
//
// A run outlives the request that started it: the handler keeps the
// chunks of the message being written, and a page that reconnects
// (resumeStream: GET {api}/{id}/stream) gets them all from the message's
// start, with its id, then the rest as it comes; the client replaces the
// message it had, so nothing shows twice and nothing is missed. When no
// page has read an answer for Options.ReconnectWindow, its run stops, as
// breaking out of core.Stream does; the next GET on the chat resumes it
// (core.Runner.ResumeStream), showing what was not shown yet. While an
// answer is written, paused or interrupted, a new message on the chat is
// refused (409): also in another process sharing the journal, whose run
// of the chat's thread finds it held (core.RunOptions.NoWait,
// core.ErrThreadBusy) before anything is sent or saved. A request is
// answered 200 only once its run holds the chat's thread.
//
// # Chats and fleets
//
// A chat's id names a thread of the runner: the handler keeps, in the
// runner's journal (as a note, see journal/driver.Notes), the chat's
// owner, its thread, and the message a paused or interrupted answer
// continues, so that any process sharing the journal serves the chat's
// next message and its approvals. The Temporal runner keeps those notes
// in Temporal (temporal.Runner.SetNote), for every process whose runner
// has its task queue. Each request reads the chat's record afresh, unless
// its process is writing the chat's answer. A reconnection goes to the
// process writing the answer (route by chat id); elsewhere it gets 204.
//
// # Security
//
// The handler authenticates nothing: Options.Identity tells it who calls.
// A chat belongs to the identity that created it; to any other it does
// not exist (404). Bodies, messages, parts and the requests in flight of
// each identity are bounded; cross-origin POSTs from browsers are refused
// unless their origin is trusted; a page is shown no internal error text,
// only a message by code (Options.ErrorText).
package web
