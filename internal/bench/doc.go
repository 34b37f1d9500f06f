// Package bench measures toolrelay against what its users would otherwise
// write, in the same run and on the same fake servers, so that the
// machine's noise cancels out of the ratios.
//
// The baselines live here, not in the library:
//
//   - the raw loop ([RawSession], [RawFoundry]): the services' documented
//     examples written on openai-go alone — follow the events (sessions) or
//     create a response (Foundry), run each function call in turn, send its
//     result, until the agent answers; sequential and without validation;
//   - the official helper ([HelperTurn]): openai-go's Sessions.Stream with
//     ToolHandlers and FinalResult (sessions only).
//
// The benchmarks (bench_test.go; see BENCHMARKS.md at the repository root)
// are named for the measure they take:
//
//	P1 BenchmarkStep      per-step overhead, one instant call per step
//	P2 BenchmarkParallel  one step of 8 calls, each sleeping 50 ms
//	P3 BenchmarkScale     1,000 concurrent runs of 5 steps on a fake in
//	                      another process: steps/s and heap per in-flight run
//	P4 BenchmarkJournal   journal cost per call: memory, SQLite, PostgreSQL
//	P5 BenchmarkConformance  the conformance suite's wall time per backend
//	P6 BenchmarkStream    per delta of a streamed answer: Runner.Stream
//	                      against openai-go's own stream read alone
//	P8 BenchmarkMCP       per call of an MCP server's tool (in memory,
//	                      stdio) against the same function registered
//	                      directly, and against the same call made with
//	                      the MCP SDK's client alone
//	P10 BenchmarkAgentTool  a child agent's turn as the one call of a
//	                        parent's step (core.NewAgentTool), against
//	                        the same turn run directly, and the parent's
//	                        turn with a plain call
//
// `go run ./internal/bench/compare` runs them all briefly and prints one ratio line
// per measure.
package bench
