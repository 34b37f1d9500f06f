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
//	Setting                  Environment variable        File key
//	backend to open          TOOLRELAY_BACKEND           backend
//	step limit per run       TOOLRELAY_MAX_STEPS         max_steps
//	calls run at once        TOOLRELAY_CONCURRENCY       concurrency
//	default tool timeout     TOOLRELAY_TOOL_TIMEOUT      tool_timeout
//	script for the fakes     TOOLRELAY_SCRIPT            script
//	results journal (URL)    TOOLRELAY_JOURNAL           journal
//	journal lease            TOOLRELAY_JOURNAL_LEASE     journal_lease
//	journal retention        TOOLRELAY_JOURNAL_RETENTION journal_retention
//	third-party settings     TOOLRELAY_SETTING_<NAME>    settings.<name>
//
// The journal is "memory" (the default), "sqlite:///path/file.db" or
// "postgres://…" (package journal lists the forms and their parameters);
// [Open] opens it, unless Options.Runner.Journal is set, and the runner's
// Close closes it. Durations are Go durations ("30s", "720h").
//
// The openai and fake-openai backends:
//
//	Setting                  Environment variable        File key
//
// The foundry, responses and fake-foundry backends:
//
//	Setting                  Environment variable        File key
//
// # Backends
//
// Built in (registered by this package): openai, foundry, responses, and the
// embedded fakes fake-openai and fake-foundry, which need no credentials.
// Third parties call [Register] from their own package.
package adapter
