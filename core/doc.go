// Package core is the portable tool loop of toolrelay. Three steps run a
// tool: make it from a Go function (in a toolbox), open a runner over the
// backend that configuration names with [adapter.Open], the door to the
// library, and run:
//
//	tool, err := core.NewTool("get_horoscope", "Get today's horoscope for a sign.", horoscope, nil)
//	tools, err := core.NewToolbox(tool)
//	runner, err := adapter.Open(ctx, tools, nil) // TOOLRELAY_BACKEND=openai, foundry, responses, fake-…
//	res, err := runner.Run(ctx, "What is my horoscope? I am an Aquarius.", nil)
//
// where horoscope is a func(context.Context, In) (Out, error) whose In is
// a struct of the call's arguments. res.Text is the agent's answer; the
// runner ran every call the agent asked for on the way.
//
// Package core holds the tools and [Toolbox], the [Runner] that executes
// them for a hosted agent, the run's [Result], its events ([Event]),
// approvals and hooks (error codes are package errcode's). It depends on no service:
// the backends (packages openai, foundry and responses, chosen by
// configuration through package adapter) plug into it through the narrow
// interface of package core/driver, and journals through journal/driver.
//
// # The loop
//
// A [Runner] holds a [driver.Backend] and a [Toolbox]. [Runner.Run] sends the
// user's input and receives a [driver.Step]: either the calls the model asked for,
// or its final answer. The runner runs the calls of a step concurrently (at
// most [Options.Concurrency] at once), each with its arguments normalised to
// canonical JSON and validated against the tool's schema, its handler's
// panics recovered, its time and the size of its arguments and output
// bounded (see Limits); it then checks that every call got
// exactly one result and sends the results back together, in call order.
// The backend answers with the next step, and so on until the model answers
// or [Options.MaxSteps] is reached. A failed call (unknown tool, invalid
// arguments, handler error, panic, timeout) never ends the run: the model is
// told, in words that never leak internal error text unless the handler
// returned a [*ModelError], and carries on. Every result is kept in a
// journal (journal/driver.Journal) before it is sent, so that after a disconnect or a crash
// [Runner.Resume] sends kept results again, with the same ids and
// idempotency key, instead of running the functions twice.
//
// # Streaming
//
// [Runner.Stream] (and [Runner.ResumeStream]) is the same run as an
// iterator of [Event]s, read with a range loop: the model's text as it is
// written (EventTextDelta, then EventTextDone with each message whole),
// its reasoning (EventReasoningDelta), its calls as they arrive
// (EventToolCall), what other agents of the run did (EventAgentActivity:
// the subagents of an OpenAI session, never part of the answer), each
// step's calls started and finished, its results submitted, its usage,
// and the run's end; [Stream.Result] then returns what [Runner.Run]
// would have. The run takes place in the goroutine that
// ranges, the backend handing each piece over as it reads it from the
// service (see driver.Observer): nothing is buffered, so a slow reader
// slows the read of the stream, and breaking out of the loop cancels the
// run as a canceled context would, the service's turn with it. The pieces
// of each message make its text exactly once: after a dropped stream the
// backend resumes it (from the service's sequence numbers where it has
// them), and what a gap left out arrives with the message's end. Backends
// that do not stream, or poll, give each message whole.
//
// # Approval
//
// A tool may declare that some of its calls need a person's yes first
// ([ToolOptions.Approval], [ApprovalAlways], [ApprovalIf]). A step with such calls
// runs the others, then the run pauses: its error matches
// [ErrAwaitingApproval], and [Result.Pending] lists the calls, which the
// journal keeps (the memory, SQLite and PostgreSQL journals keep
// approvals), so that the process may exit. [Runner.Decide] records a
// decision, with who made it, in this process or another sharing the
// journal; [Runner.Resume], in any of them, then goes on at once:
// approved calls run (exactly once, as every call), denied calls tell the
// model so, and a call left undecided past [Options.ApprovalTimeout] is
// denied; [Runner.ResumeExpired] finds the runs parked on such calls and
// resumes them. The service's own approval requests (an MCP server's
// tool, a browser's access to an origin, a person's sign-in to a tool's
// server, whose arguments carry the consent link) are calls of kind
// [ServiceApproval], decided the same way.
//
// A handler may also ask while it runs ([Ask], with [Question]s): its
// questions become approvals of the run, keyed by the call's id, "/" and
// the question's, the run pauses as above, and the call, resumed once
// every one is decided, runs again and gets the decisions (an agent
// tool's child's approvals reach its parent so; package a2atools asks
// so for a remote agent's task awaiting input). Where no one can be asked
// ([Runner.Call]), Ask fails with FailedPrecondition, for the tool to do
// without.
//
// # Fleets
//
// Over a journal that keeps runs (SQLite, PostgreSQL), each run is
// recorded under a lease the runner renews while it runs, and marked
// finished, failed or awaiting approval when it ends. [Runner.TakeOver]
// takes over the runs whose worker stopped renewing (a killed process, a
// lost machine) and finishes them as a resume does, or starts again one
// whose thread did not exist yet; [Runner.KeepTakingOver] does it every
// interval. Of several workers taking over at once, each run goes to one;
// the first worker's late result, if it comes back to life, is refused.
// So are its calls: a worker that stalled past its lease (its renewals
// lost) claims each call of its run only while the run's record is still
// its own, in the claim's transaction (see journaldriver.Fenced), so that
// it cannot run again a call whose result another worker made and a prune
// deleted; it runs no handler, and its run stops with an error whose code
// is FailedPrecondition (matching journaldriver.ErrLeaseLost).
//
// A run survives its worker from its first write to the journal on:
// [Runner.Run] records a run that starts a thread, with its input, before
// the request that creates the thread (a run with parts or a format, once
// the thread exists), a run that continues a thread before its request,
// and a resume once the backend gives it its step. A worker that dies
// before that write leaves no trace of the run: no record, no new thread,
// nothing accepted (its caller got no thread either).
// A caller that hands runs to a fleet, and must lose none, records each
// with [Runner.Enqueue] first: once it returns, the run is in the journal
// and a worker's TakeOver starts it.
//
// # Agents as tools
//
// [NewAgentTool] offers a runner's agent, on any backend, as a tool of
// another run: the call's arguments are the child's input, its answer the
// call's result. The two runs are one: the child's thread is noted in the
// parent's journal under the parent call's key, so that a crash, a pause
// or a takeover resumes the same child turn rather than starting a
// second; a child's approval pauses the parent ([Runner.Approvals],
// [Runner.Decide] and [Runner.Resume] of the parent reach it); the child
// spends of the parent's budget; its events reach the parent's with
// [Event.Path] naming the call; its spans nest in the call's; and the
// parent's context ending ends the child's run.
//
// # Middleware and hooks
//
// [Middleware] wraps the running of every call ([Options.Middleware]) or of
// one tool's ([ToolOptions.Middleware]), as net/http middleware wraps a
// handler: limits, permission checks ([Failure]), caches, timing; the
// context it passes on is the handler's. [Hooks] follow runs, steps and
// calls with their contexts, for tracing and metrics; package telemetry
// makes them for OpenTelemetry. Without them the runner does no more work.
//
// # Input and output
//
// A run's input may carry images and files ([RunOptions.Parts]), and a
// run may ask for an answer of a JSON schema inferred from a Go type
// ([NewFormat], [RunOptions.Format], [Decode]). A backend refuses, with an
// InvalidArgument error and before it sends anything, what its service
// cannot carry; driver.Capabilities says what each carries.
//
// # Limits
//
// Every call and every run is bounded. A handler runs for at most
// [Options.ToolTimeout] (5 minutes by default; [ToolOptions.Timeout] sets a
// tool's own), after which the model is told it timed out; a run lasts at
// most [Options.RunTimeout] (30 minutes by default), after which it ends
// with a DeadlineExceeded error, its service turn left waiting for a
// resume (also when a stream's reader stopped reading: no other worker
// waits for the run more than a lease past its limit). Arguments longer than [Options.MaxArgumentBytes]
// (1 MiB by default) are not parsed: the model is told "arguments too large
// (N bytes; the limit is M)" and the handler does not run. An output past
// [Options.MaxOutputBytes] (4 MiB by default) gives a failed result saying
// so, or, for text, where the program asks for it ([Options.TruncateOutput],
// [ToolOptions.TruncateOutput]), is cut to the limit with a note saying it
// was. A call past either limit fails with outcome [TooLarge], and is
// journaled like any other failed call. A value a handler returns is measured before it is encoded, so an
// output far past the limit is refused without being copied.
//
// # Tools
//
// [NewTool] makes a tool from a typed function func(ctx, In) (Out, error):
// the JSON Schema of In is inferred with github.com/google/jsonschema-go,
// refined field by field with [ToolOptions.Fields], and made strict on
// request. [NewRawTool] takes a JSON Schema document instead.
//
// # Errors
//
// Errors returned by the runner are *[errcode.Error] values with a
// [errcode.Code]: [errors.Is] matches them against their code
// (errors.Is(err, errcode.NotFound)) and against this package's sentinels
// ([ErrAwaitingApproval], [ErrMaxSteps], [ErrStreamStopped]), and the
// backend's own error (an SDK error) stays reachable with [errors.As].
//
// # Writing a backend
//
// A backend implements [driver.Backend], and optionally [driver.Canceler] and
// [driver.CapabilityReporter], and proves itself with the conformance suite
// (package conformance). Package coretest provides the backend-neutral
// model script that fake servers play, and an in-memory backend.
//
// [adapter.Open]: https://pkg.go.dev/github.com/toolrelay/toolrelay/adapter#Open
package core
