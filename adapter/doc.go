// Package adapter opens a backend by name, from configuration, and returns a
// [core.Runner] over it. The same program runs against any backend by
// configuration alone:
//
//	runner, err := adapter.Open(ctx, tools, &adapter.Options{DefaultBackend: "fake-openai"})
//
// # Configuration
//
// Settings come from three places: the JSON file named by TOOLRELAY_CONFIG,
// environment variables, and [Config] values set in code. Code wins over the
// environment, which wins over the file. Every setting:
//
//	Setting                  Environment variable          File key            Default
//	backend to open          TOOLRELAY_BACKEND             backend
//	step limit per run       TOOLRELAY_MAX_STEPS           max_steps           10
//	calls run at once        TOOLRELAY_CONCURRENCY         concurrency         16
//	default tool timeout     TOOLRELAY_TOOL_TIMEOUT        tool_timeout        5m
//	run time limit           TOOLRELAY_RUN_TIMEOUT         run_timeout         30m
//	arguments per call       TOOLRELAY_MAX_ARGUMENT_BYTES  max_argument_bytes  1048576 (1 MiB)
//	output per call          TOOLRELAY_MAX_OUTPUT_BYTES    max_output_bytes    4194304 (4 MiB)
//	cut text past the limit  TOOLRELAY_TRUNCATE_OUTPUT     truncate_output     false
//	script for the fakes     TOOLRELAY_SCRIPT              script
//	results journal (URL)    TOOLRELAY_JOURNAL             journal             memory
//	journal lease            TOOLRELAY_JOURNAL_LEASE       journal_lease       1m (at least 1s)
//	journal retention        TOOLRELAY_JOURNAL_RETENTION   journal_retention   keep all
//	third-party settings     TOOLRELAY_SETTING_<NAME>      settings.<name>
//
// The journal is "memory" (the default), "sqlite:///path/file.db" or
// "postgres://…" (package journal lists the forms and their parameters);
// [Open] opens it, unless Options.Runner.Journal is set, and the runner's
// Close closes it. Durations are Go durations ("30s", "720h"); sizes are
// bytes. The limits are core's (see core.Options): arguments past theirs
// are not parsed and the model is told they are too large; an output past
// its limit fails the call, or, for text with truncate_output set, is cut
// to the limit with a note saying so. A journal retention must be at least
// the run time limit, so that no result is pruned before its run has
// sent it.
//
// Every number and duration may be 0 (or unset), which means its default;
// none may be negative, except max_reconnects below. A file that cannot be
// read or decoded (bad JSON, an unknown key, a value of the wrong type), a
// variable that does not parse, or a value out of range fails [Load] and
// [Open] with an error whose code is InvalidArgument, naming the variable
// or key but never repeating its value (which may be a secret).
//
// The openai and fake-openai backends (the fake ignores the API key, base
// URL, agent and session, which name things on the real service):
//
//	Setting                  Environment variable             File key
//	API key                  OPENAI_API_KEY                   openai.api_key
//	base URL                 OPENAI_BASE_URL                  openai.base_url
//	existing agent's id      TOOLRELAY_OPENAI_AGENT_ID        openai.agent_id
//	model of a new agent     TOOLRELAY_OPENAI_MODEL           openai.model
//	its instructions         TOOLRELAY_OPENAI_INSTRUCTIONS    openai.instructions
//	session to reuse         TOOLRELAY_OPENAI_SESSION_ID      openai.session_id
//	keep what was created    TOOLRELAY_OPENAI_KEEP            openai.keep
//	poll, do not stream      TOOLRELAY_OPENAI_POLL            openai.poll
//	pause between polls      TOOLRELAY_OPENAI_POLL_INTERVAL   openai.poll_interval
//	stream resumes per step  TOOLRELAY_OPENAI_MAX_RECONNECTS  openai.max_reconnects
//
// max_reconnects defaults to 3; a negative value means a dropped stream
// is never resumed. Without an agent id, an agent is made from the toolbox
// (model gpt-4.1-mini unless set) and deleted on Close with the sessions
// the backend created, unless keep is set.
//
// The foundry, responses and fake-foundry backends:
//
//	Setting                  Environment variable                 File key
//	project endpoint         AZURE_AI_PROJECT_ENDPOINT            foundry.endpoint
//	                         (or FOUNDRY_PROJECT_ENDPOINT)
//	static bearer token      AGENT_TOKEN                          foundry.token
//	API key (api-key)        TOOLRELAY_FOUNDRY_API_KEY            foundry.api_key
//	agent to run             TOOLRELAY_FOUNDRY_AGENT              foundry.agent
//	agent version            TOOLRELAY_FOUNDRY_AGENT_VERSION      foundry.agent_version
//	model deployment         TOOLRELAY_FOUNDRY_MODEL              foundry.model
//	agent instructions       TOOLRELAY_FOUNDRY_INSTRUCTIONS       foundry.instructions
//	thread linking           TOOLRELAY_FOUNDRY_MODE               foundry.mode
//	stream responses         TOOLRELAY_FOUNDRY_STREAM             foundry.stream
//	keep what was created    TOOLRELAY_FOUNDRY_KEEP               foundry.keep
//	responses API key        OPENAI_API_KEY                       foundry.responses_api_key
//	responses base URL       OPENAI_BASE_URL                      foundry.responses_base_url
//
// foundry authenticates with AGENT_TOKEN, else the API key, else
// azidentity's DefaultAzureCredential (scope https://ai.azure.com/.default).
// With no agent configured, or with a model configured, it creates a
// version of the agent (named by the agent setting, or "toolrelay-agent")
// from the program's tools, using the model deployment (default
// gpt-4.1-mini) and instructions, and deletes it on Close; otherwise it
// runs the existing agent. The mode is "conversation" (default) or
// "previous_response_id" (the default of responses, which sends the model,
// instructions and tools with every request and no agent). fake-foundry
// runs the foundry backend against a fake project in the process, playing
// the script; it needs no credentials.
//
// # Backends
//
// Built in (registered by this package): openai, foundry, responses, and the
// embedded fakes fake-openai and fake-foundry, which need no credentials.
// Third parties call [Register] from their own package.
package adapter
