// Package adapter is the door to toolrelay: it opens a backend by name, from
// configuration, and returns a [core.Runner] over it. The same program runs against any backend by
// configuration alone:
//
//	import (
//		"github.com/toolrelay/toolrelay/adapter"
//		_ "github.com/toolrelay/toolrelay/openai" // links the "openai" backend
//	)
//
//	runner, err := adapter.Open(ctx, tools, &adapter.Options{DefaultBackend: "openai"})
//
// # Backends
//
// Like database/sql, this package knows no backend: each backend package
// registers itself (with [Register]) from an init function, and a program
// links the backends it imports. The built-in ones:
//
//	Backend         Import
//	openai          github.com/toolrelay/toolrelay/openai (OpenAI Agents API sessions)
//	foundry         github.com/toolrelay/toolrelay/foundry (Azure AI Foundry agents)
//	responses       github.com/toolrelay/toolrelay/responses (the plain Responses API)
//	fake-openai     github.com/toolrelay/toolrelay/openai/openaitest
//	fake-foundry    github.com/toolrelay/toolrelay/foundry/foundrytest
//	fake-responses  github.com/toolrelay/toolrelay/foundry/foundrytest
//	all of them     github.com/toolrelay/toolrelay/all
//
// The fakes serve a scripted model (coretest.FakeSettings) on loopback,
// for tests and for trying a program with no account and no network.
//
// Opening a built-in backend the program does not import fails with code
// Unimplemented and an error naming the import to add. Third-party
// backends register under names of their own, and read their settings
// with [OpenRequest.BackendSettings], as the built-in ones do.
//
// # Configuration
//
// Settings come from three places: the JSON file named by TOOLRELAY_CONFIG,
// environment variables, and values set in code ([Options]). Code wins
// over the environment, which wins over the file. The shared settings, in
// [Settings], whose fields' tags make this table:
//
//	Setting                  Environment variable          File key            Default
//	backend to open          TOOLRELAY_BACKEND             backend
//	model instructions       TOOLRELAY_INSTRUCTIONS        instructions
//	step limit per run       TOOLRELAY_MAX_STEPS           max_steps           10
//	calls run at once        TOOLRELAY_CONCURRENCY         concurrency         16
//	default tool timeout     TOOLRELAY_TOOL_TIMEOUT        tool_timeout        5m
//	run time limit           TOOLRELAY_RUN_TIMEOUT         run_timeout         30m
//	arguments per call       TOOLRELAY_MAX_ARGUMENT_BYTES  max_argument_bytes  1048576 (1 MiB)
//	output per call          TOOLRELAY_MAX_OUTPUT_BYTES    max_output_bytes    4194304 (4 MiB)
//	cut text past the limit  TOOLRELAY_TRUNCATE_OUTPUT     truncate_output     false
//	service's response size  TOOLRELAY_MAX_RESPONSE_BYTES  max_response_bytes  67108864 (64 MiB)
//	service's event size     TOOLRELAY_MAX_EVENT_BYTES     max_event_bytes     16777216 (16 MiB)
//	wait for an answer       TOOLRELAY_IDLE_TIMEOUT        idle_timeout        10m
//	wait for the next event  TOOLRELAY_MAX_SILENCE         max_silence         10m
//	results journal (URL)    TOOLRELAY_JOURNAL             journal             memory
//	journal lease            TOOLRELAY_JOURNAL_LEASE       journal_lease       1m (at least 1s)
//	journal retention        TOOLRELAY_JOURNAL_RETENTION   journal_retention   keep all
//	input tokens per run     TOOLRELAY_MAX_INPUT_TOKENS    max_input_tokens    no limit
//	output tokens per run    TOOLRELAY_MAX_OUTPUT_TOKENS   max_output_tokens   no limit
//	tokens per run           TOOLRELAY_MAX_TOTAL_TOKENS    max_total_tokens    no limit
//	tool calls per run       TOOLRELAY_MAX_TOOL_CALLS      max_tool_calls      no limit
//	cost per run             TOOLRELAY_MAX_COST            max_cost            no limit
//	prices per model (JSON)  TOOLRELAY_PRICES              prices              none
//	record, replay traffic   TOOLRELAY_REPLAY              replay              off
//
// Each backend's own settings go in an object of the file named after its
// section ("openai", "foundry", "responses", "fake"), in environment
// variables, or in code as a value of the backend's settings type in
// Options.BackendSettings; the backend's package doc lists them
// (openai.Settings, foundry.Settings, responses.Settings, and
// coretest.FakeSettings, the script the fakes play: TOOLRELAY_SCRIPT, or
// "script" in section "fake"). A file may hold the sections of several
// backends, so that switching TOOLRELAY_BACKEND is all it takes to switch.
//
// The journal is "memory" (the default), "sqlite:///path/file.db" or
// "postgres://…" (package journal lists the forms and their parameters);
// [Open] opens it, unless Options.Runner.Journal is set, and the runner's
// Close closes it. Durations are Go durations ("30s", "720h"); sizes are
// bytes. The limits are core's (see core.Options): arguments past theirs
// are not parsed and the model is told they are too large; an output past
// its limit fails the call, or, for text with truncate_output set, is cut
// to the limit with a note saying so. The service's limits are the
// backends' (openai.Options, foundry.Options): a response or event past
// its size fails the request (ResourceExhausted), a wait past its time
// fails it (DeadlineExceeded); a negative value means no limit. A journal retention must be at least
// the run time limit, so that no result is pruned before its run has
// sent it.
//
// The replay setting ("record:FILE", "replay:FILE" or "auto:FILE")
// wraps the transport of whichever backend opens, its Entra ID token
// requests included, in a cassette of package replay: recording writes
// FILE, with no secret, when the runner closes; replaying answers every
// request from FILE and sends nothing, failing closed (code
// FailedPrecondition, with the nearest recorded request and the
// difference) on a request that was not recorded.
//
// The budget settings make the runner's default budget (core.Budget, in
// Options.Runner.Budget; a run's RunOptions.Budget overrides it): a run
// that has spent a limit, or whose next calls would pass max_tool_calls,
// stops before its next request with an error matching
// core.ErrBudgetExceeded, and a resume with a raised budget goes on.
// max_cost is in the currency of prices, the prices of a million input and
// output tokens by model ("*" for any other): in the file
// {"prices": {"gpt-5.2": {"input": 1.75, "output": 14}}}, in
// TOOLRELAY_PRICES the same object as JSON. A price table is one setting,
// taken whole from the place that wins (code, then the environment, then
// the file), not merged model by model.
//
// Every number and duration may be 0 (or unset), which means its default;
// none may be negative unless its doc says what a negative value means. A
// file that cannot be read or decoded (bad JSON, an unknown key, a value
// of the wrong type), a variable that does not parse, or a value out of
// range fails [Load], [Open] and [OpenRequest.BackendSettings] with an error
// whose code is InvalidArgument, naming the variable or key but never
// repeating its value (which may be a secret).
package adapter
