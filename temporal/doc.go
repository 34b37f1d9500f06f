// Package temporal runs toolrelay's tool loop as a Temporal workflow, for
// fleets that already run Temporal: the same tools, the same backends
// (opened by configuration, through package adapter), the surface of
// core's Runner (Run, Stream, Resume, Decide), with Temporal owning
// durability, retries and takeover. core's Runner with its journal stays
// the embedded default; this package is a module of its own, so that the
// main module does not carry the Temporal SDK.
//
// # Shape
//
// A thread is a workflow ([Thread], registered as "toolrelay.Thread"),
// named by a workflow id: [Runner.Run] sends a turn as the workflow's
// "run" update, starting the workflow if none runs (update-with-start),
// so a stateless front end can start or continue a thread by its name
// alone. The turn runs as core's does: start → a step → its calls, at
// most Concurrency at once, one result per call in call order → submit →
// … until the model answers, bounded by MaxSteps and the run's time limit
// (a workflow timer). Each backend request (start, submit, resume,
// cancel) and each call is an activity; the call activity runs core's
// executor ([core.Runner.Call]: validation, middleware, limits, panic
// recovery, events and hooks); an agent tool's call runs its child as a
// child workflow (see Agent tools). Workers register with [Register].
//
// # Exactly once
//
// Activities are retried (a worker that dies is noticed by its heartbeat,
// LoopOptions.Heartbeat). A call activity's second attempt is a call started
// and not finished: its tool's Verify hook says what became of it;
// without one, an idempotent or read-only tool runs again, and any other
// call gets a failed result saying its outcome is unknown (outcome
// InDoubt): never a second effect. A result's idempotency key is the
// workflow id, the turn, the step and the call id. A retried start
// resumes the service's turn (the thread is in the heartbeat's details),
// unless the service shows the input never arrived. On a chain of
// responses (the Responses API, Foundry's chain mode) each request makes a
// new response, which the backend names as soon as the service does
// (driver.SubmitRequest.Moved, driver.StartRequest.Created): the attempt
// heartbeats it at once, and a retried attempt resumes that response
// rather than sending the input or the results again, so the model answers
// each step once; a start or submit that fails after it was named ends the
// turn there, and [Runner.Resume] goes on from it. Otherwise a retried
// submit asks the service whether the step's calls still wait, and resends
// the results (marked as resent) only then. Where the backend cannot find
// an answer lost before the service named it
// (driver.Capabilities.LostAnswersRerun: a blocking chain names its
// response only once it is complete; a stateless thread is kept by the
// worker that died), a submit retried after it reached the service sends
// the results again and the model answers that step a second time: see
// MODES.md. A heartbeat reaches the server at once if it is the attempt's
// first, else within 0.8 × LoopOptions.Heartbeat (the SDK's throttle): a
// worker that dies before it does leaves the retry as blind as a lost
// answer.
//
// # Local activities
//
// With LoopOptions.LocalActivities (off by default) the model's steps
// that do not stream, and the calls of tools whose time limit is at most
// LoopOptions.MaxLocalCall, run as local activities: in the workflow
// task, on the worker that runs it, without an activity task's round
// trips to the server (about 8 times less per step on the test server:
// BENCHMARKS.md, T1). The tool says how long its calls may run
// (core.ToolOptions.Timeout, else the worker's runner's ToolTimeout);
// calls awaiting a decision, longer ones and streamed steps stay
// activities. A local activity cannot heartbeat, and one whose worker
// dies runs again from its first attempt on another: so what must not
// happen twice is claimed first. Before a submit, a start on an existing
// thread, or a call of a tool that is neither idempotent nor read-only
// (or has a Verify hook) takes effect, the activity signals its key to
// the workflow (SignalClaim); the history keeps it, and a local activity
// run again finds it and is decided as an activity's second attempt is:
// Verify, a rerun if idempotent, else outcome unknown; the service asked
// before the results go again. A retried start on a new thread has no
// heartbeat to find the thread the first attempt made: it sends the
// input again (MODES.md).
//
// # Approvals
//
// A call whose tool's rule asks for approval (and the service's own
// approval requests) pauses the turn once the step's other calls ran:
// Run returns the Pending calls and an error matching
// core.ErrAwaitingApproval. [Runner.Decide] is the "decide" update, whose
// validator refuses an unknown call, a second decision and edited
// arguments that are not a JSON object, recording nothing; the turn goes
// on by itself once every call is decided, and [Runner.Resume] returns
// it. A call undecided after ApprovalTimeout is denied by a workflow
// timer. [Runner.Cancel] abandons a paused turn: the service's turn is
// canceled and the turn ends Canceled.
//
// The step that pauses asks its worker's backend to keep the thread past
// its Close (driver.Keeper), as core's Runner does, so that a worker of
// another process, the first one closed or dead, goes on with the turn
// once decided: before it sends the step's results, that worker reads the
// thread (the backend's Resume), which makes it its own, and its Close
// deletes it once the turn is over.
//
// # Agent tools
//
// A call of an agent tool (core.NewAgentTool) runs its child's turn as a
// child workflow of the call's thread ([AgentWorkflowName],
// "toolrelay.Agent"), whose id is the thread's, the turn's number and
// the call's id: however often the parent's workflow runs again, on
// whatever worker, the call has one child turn, and the call's activity
// makes the call's result of its outcome (core.CallRequest.Child: the
// answer, or a failed result naming the error's code) without running
// the child again. The child's steps and calls are activities (never
// local ones) over the child's runner, which a worker finds by the path
// of agent tools from its own runner (the toolbox as it is when the
// activity runs; nested agents too): every worker of the queue must have
// the agent tool. The child's turn has the parent's loop options, its
// own MaxSteps, time limit and budget (AgentToolOptions.Run over the
// child runner's Options), no LoopOptions.Budget of the parent's.
//
// A child's call that awaits a decision pauses the parent's turn: the
// child signals its parent (SignalAgentPaused), which keeps a copy of
// each approval under the parent's call, its call id the parent call's,
// "/" and the child's, as core's Runner does. The parent's Run returns
// them Pending, its approvals query lists them, and its decide update
// takes a decision (edited arguments are refused) and hands it to the
// child (SignalAgentDecide); the turn goes on once every one is decided.
// The parent's time limit does not run while it waits so, as it does not
// while its own calls await a decision: its timer stops, the child
// workflow going on, and starts again in full once the pause ends (a
// workflow paused so before a worker did this, GetVersion
// "agent-pause-timer", keeps its timer running). Canceling the parent's
// turn ([Runner.Cancel], during the pause too, or its time limit)
// cancels the child workflow, whose calls' contexts end (at the
// activity's next heartbeat) and whose service's turn is canceled; the
// parent's turn ends Canceled.
//
// The child runs under what the parent's budget had left when the call
// started (its step's calls counted) as well as its own: past it, the
// child tells its parent (SignalAgentHeld) and waits, and the parent's
// turn stops with an error matching core.ErrBudgetExceeded, no result
// sent; [Runner.Resume] with a raised budget sends the child what the
// raised budget leaves it (SignalAgentBudget), and both go on (with the
// same budget, both stop again). Neither's time limit runs while they
// wait so (GetVersion "agent-hold-timer"): it starts again in full when
// they go on. A new turn is refused meanwhile (the turn still runs:
// [Runner.Cancel] abandons it). The child's spend (its
// turn's usage, cost and calls) is the parent's turn's once it answered.
// A child stopped on its own budget gives the call a failed result, its
// service's turn canceled. Nested agents are held so at every level: a
// grandchild's cap is also within what its parent's own cap left it; a
// held grandchild stops its parent's turn and, through each agent above
// it, the thread's (SignalAgentHeld), as core's Runner stops each run
// above such a child; [Runner.Resume] with a raised budget hands each
// agent down its new cap, and all go on. A grandchild held on what an
// agent's own budget had left stops them all too, as on core's Runner,
// and a resume, which raises the thread's budget only, stops them again.
//
// The child's events are the parent's, the agent call in their Path
// (core.Event.Path), as on core's Runner: a stream of the parent's turn
// ([Runner.Stream], [Runner.ResumeStream]) follows the child workflow's
// events too, from the agent call's EventCallStarted, which names it, to
// the child's turn's end, and gives them before the call's end; the child
// runner's call events (the ones a worker's runner gives its OnEvent, see
// core.CallRequest.Parents) go to the OnEvent of each runner above it
// too.
//
// The child runner's Run hook is called for the child's turn (as for a
// thread's turn: see Telemetry), and its Step and Call hooks by the child's
// activities; their contexts are the worker's, not the parent's call's,
// so with package telemetry the child's spans do not nest in the
// parent's as they do on core's Runner.
//
// # Streaming
//
// [Runner.Stream] gives core's events, text deltas included, to a caller
// in any process: the step activity sends the text to the workflow as it
// is written (signals), and the reader polls the workflow's events query.
// The workflow keeps how much of each message was given, so a step run
// again after a worker died gives only the rest: no repeat, no gap.
//
// # Notes
//
// [Runner.SetNote] and [Runner.Note] keep short notes about threads
// (journal/driver.Notes) in Temporal: each note in a workflow of its own
// ([Note]), run by the workers of the runner's task queue, so that every
// process reaching the server with a runner of that queue reads them.
// Package web keeps its chats' records so, and its handlers over the
// runner, in a fleet of front ends, serve any chat.
//
// # Limits
//
// The server refuses an event whose payload passes its blob limit (2 MiB
// by default) and ends a workflow whose history grows past its limits. A
// step's results are kept under LoopOptions.MaxPayloadBytes (the largest
// outputs are replaced by failed results saying they were too large for
// the history, outcome TooLarge; the model is told and the turn goes on),
// an input past it is refused (InvalidArgument), and an answer past it
// drops its calls' results (CallsOmitted). The workflow continues as new
// when the server suggests it or its history passes
// LoopOptions.MaxHistoryEvents: between turns, and inside a long turn
// before its next call, once the calls started have ended; the turn goes
// on in the new run (State.Running), and Run, Resume and a stream's reader
// follow it there. A stream's reader that had not read the turn's first
// events by then (the new run keeps the last 1,000, within
// MaxPayloadBytes) does not get them.
//
// A turn's budget (RunOptions.Budget over LoopOptions.Budget, see
// core.Budget) is counted in the workflow by core's rule (core.Budget's
// Charge, Exceeded and Remaining): a turn that spent a limit, or whose
// step's calls would pass MaxToolCalls, stops before they run, with an
// error matching core.ErrBudgetExceeded (ResourceExhausted). The turn is
// held (State.Held), the service's turn waiting: [Runner.Resume] with a
// raised budget goes on from the step, its usage counted once; a new turn
// or [Runner.Cancel] abandons it.
//
// Arguments and outputs in the history can be encrypted with a payload
// codec: give the client (and the workers' client) a data converter made
// with converter.NewCodecDataConverter over a codec such as [NewAESCodec],
// and run the codec server for the Web UI if people read histories there.
//
// # Changing the workflow
//
// Running workflows replay their history on the current code: a change
// that makes a different sequence of commands (an activity added,
// removed or reordered; a timer moved) breaks them. TestReplay replays
// histories recorded by the real-server tests (testdata/*.json) and fails
// on such a change. Put a changed path behind workflow.GetVersion, keep
// the old path until no workflow runs it, and record a new history
// (go test -run TestRecord -record in ./realtest).
//
// # Telemetry
//
// Step and call hooks (core.Hooks, package telemetry) run in the
// activities, once per attempt. The Run hook is called by the worker that
// runs the turn, as core's Runner calls it: once as a turn begins, its end
// once with the turn's outcome as Runner.Run returns it; a turn that
// pauses for approval ends its run, and goes on as a resume (RunInfo.Resume)
// once decided. Workflow code calls it only when it is not replaying, and
// the worker keeps the end, so a replayed workflow (evicted from the
// worker's cache) calls it neither again nor less. A turn begun on a worker
// that died is not ended (its run, like one of core's in a process that
// died, is lost with it), and the context the Run hook returns is not the
// parent of the steps' and calls' (they run in activities, perhaps in other
// processes); RunInfo.Origin is not kept. The workflow's own logs use the
// replay-aware workflow logger.
package temporal
