// Package a2atools connects toolrelay to the Agent2Agent protocol (A2A,
// version 0.3, over JSON-RPC), both ways, on the official Go SDK
// (github.com/a2aproject/a2a-go): a remote A2A agent becomes a tool of
// any hosted agent, and any runner is served as an A2A agent.
//
// # A remote agent as a tool
//
// [NewTool] reads an agent's card (a2a-go's card resolver) and returns a
// [core.Tool] named and described from it, which every backend offers as
// a function tool and the runner runs as any other: arguments validated,
// journaled, approved ([ToolOptions].Tool.Approval), wrapped by the
// middleware, traced (package telemetry records the agent's URL on the
// execute_tool span, toolrelay.tool.server), bounded by the tool's
// timeout.
//
//	j := driver.NewMemory() // or SQLite, PostgreSQL: journals that keep notes
//	desk, err := a2atools.NewTool(ctx, "https://refunds.example.com", &a2atools.ToolOptions{
//		Headers: map[string]string{"Authorization": "Bearer " + token},
//		Notes:   j, // the runner's journal: a resume asks about the same task
//	})
//	tools, err := core.NewToolbox(desk)
//
// The model's message goes by message/stream when the card says the agent
// streams, else by message/send (not blocking) and tasks/get until the
// task settles; the result is the text of the completed task's artifacts
// (or of the agent's message). A task the agent leaves input-required
// pauses the call's run for people's decisions (core.Ask), when the tool
// keeps notes: an approval of the run per approval a runner this package
// serves awaits (its status's data part {"approvals": [...]}), or one for
// another agent's question; on resume the call sends the decisions on the
// same task and goes on with it, and core.Runner.Cancel of the paused run
// cancels the task (see [NewTool]). Where no one can be
// asked (core.Runner.Call, as module toolrelay/temporal runs tools), or
// without notes, it is a failed call whose message says what the agent
// asks and which task_id answers it: the model answers (asking the user
// if it must) with a call naming the task_id, which continues the same
// task. A failed, rejected or
// canceled task, an unknown task_id, a refused message, an answer past
// [ToolOptions].MaxResponseBytes, an agent that stops answering: each is
// a failed result the model can act on, whose error in the run's events
// is an *errcode.Error (FailedPrecondition, Internal, Canceled, NotFound,
// InvalidArgument, ResourceExhausted, Unavailable, PermissionDenied).
//
// Exactly once: with [ToolOptions].Notes (the runner's journal, when it
// keeps notes), each call notes the id of its A2A task as soon as the
// agent names it, under the call's journal key. A call found started but
// not finished (a crash, a takeover) is decided by the tool's Verify
// hook: it asks the agent about the noted task (tasks/get) and sends the
// answer if the task completed; otherwise the call runs again, and a
// call that runs again (so does one whose run was stopped mid-call, on
// resume) waits for the noted task, sending nothing. A crash after the
// agent took the message and before it named the task leaves nothing
// noted: the message is sent again. Without notes, a crashed call's
// outcome is unknown and it is not run again; an interrupted one sends
// its message again on resume.
//
// Headers go to the origin of the card's URL only, over https (or to a
// loopback host): a card whose endpoint is on another origin is refused
// at NewTool, a request redirected to another origin is not sent, and
// the call (or NewTool) fails with code PermissionDenied, as on the
// backends' clients and package mcptools.
//
// # A runner served as an A2A agent
//
// [NewHandler] serves a runner — [core.Runner], temporal.Runner, or any
// with the methods of [Runner] — over a2a-go's JSON-RPC server: its agent
// card (name, description, a skill per tool, streaming) at
// /.well-known/agent-card.json, and message/send, message/stream,
// tasks/get, tasks/cancel and tasks/resubscribe.
//
//	h := a2atools.NewHandler(runner, &a2atools.ServeOptions{Identity: userOf, Name: "Refund Desk"})
//	mux.Handle("/refunds/", http.StripPrefix("/refunds", h))
//
// Each A2A context is a thread of the runner; each task a turn on it, one
// at a time. The run's events become A2A events:
//
//	run starts                  task (submitted), then status-update working
//	text_delta, text_done       artifact-update: a new artifact per message
//	                            of the model, its pieces appended, then the
//	                            whole text (lastChunk); commentary is left out
//	run_finished                status-update completed (final), or failed
//	                            with a message by error code
//	                            (ServeOptions.ErrorText), or input-required
//	tasks/cancel                the run stopped, the turn abandoned
//	                            (Runner.Cancel), status-update canceled
//
// The events of an agent tool's child run (core.NewAgentTool; those with
// a Path) are not the task's: the child's answer is the output of the
// run's call of the agent tool, and the child's approvals are the run's
// own (see below).
//
// A run that pauses for a person's approval (core.ErrAwaitingApproval)
// leaves its task input-required, its status message naming each call
// awaiting a decision, as text and as a data part {"approvals": [...]};
// the next message on the task decides them ("approve" or "deny", or a
// data part: see [NewHandler]), by the request's identity, and the run
// resumes on the same task.
//
// # Security
//
// The handler authenticates nothing: ServeOptions.Identity tells it who
// calls (401 without an identity). A task and its context belong to the
// identity that created them: to any other, the task does not exist.
// Bodies, a message's text, the requests in flight of each identity and
// the tasks kept are bounded (413, an error, 429, the oldest ended task
// forgotten); cross-origin requests from browsers are refused (403)
// unless their origin is trusted; a client is shown no internal error
// text, only a message by code.
//
// # Testing
//
// The tests drive the server with a2a-go's client and with the official
// JavaScript SDK (@a2a-js/sdk, clients/a2a), and the tool against a2a-go
// servers and against this package's own.
package a2atools
