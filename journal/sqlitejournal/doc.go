// Package sqlitejournal keeps the results journal of toolrelay (a
// [driver.Journal]) in a single SQLite file, through modernc.org/sqlite (pure
// Go: no cgo). It is the embedded default: one process, or a few processes
// on one machine, sharing a file.
//
//	j, err := sqlitejournal.Open(ctx, "/var/lib/myapp/journal.db", nil)
//	...
//	defer j.Close()
//	runner := core.NewRunner(backend, tools, &core.Options{Journal: j})
//
// Programs that use package adapter set TOOLRELAY_JOURNAL=sqlite:///path/file.db
// instead (see package journal).
//
// # Storage
//
// The file holds three tables: toolrelay_journal (one row per call, keyed
// by backend, thread, turn and call id), toolrelay_journal_approvals (the
// calls awaiting a person's decision, and the decisions, same key; the
// journal implements journal/driver.Approvals) and
// toolrelay_journal_version (the schema version, [SchemaVersion]; a file
// of version 1, which had no approvals table, gets one at open). A
// decision is one conditional UPDATE (the approval still undecided), so
// of several deciders exactly one wins. The file is in WAL mode. Every write is
// made in a write transaction (BEGIN IMMEDIATE), so that of several
// connections racing for a call, in this process or in others, exactly one
// creates its entry (Claim is one INSERT … ON CONFLICT DO NOTHING) or takes
// it over (TakeOver is one conditional UPDATE). A fenced claim
// ([driver.Fenced]) reads the run's record in the claim's transaction.
//
// Within a process, a Journal makes its writes on one connection, in the
// order they come, and commits the writes that arrive while it is
// committing together, in the next transaction (group commit): the calls
// of a step, claimed or finished at once, share one sync to disk. A write
// whose context ends while it waits its turn is withdrawn, never made;
// once under way, it is completed and reported. Between processes, a write
// waits up to [Options.BusyTimeout] for another's lock, then fails.
//
// Times, leases included, are this process's wall clock, stored in Unix
// nanoseconds: processes sharing a file share the machine's clock.
//
// # Durability
//
// What survives a process kill (SIGKILL, a panic, an OOM kill): every
// write whose method returned, whichever [Synchronous] setting — a commit
// is in the write-ahead log, in the operating system's cache, before the
// method returns, and the next Open recovers it — except the last
// submitted marks: MarkSubmitted does not wait for its write, which goes
// first into the journal's next transaction (or one of its own within
// 50 ms, or Close's). A lost mark costs only this: a resumed run sends
// such a result again without
// [github.com/toolrelay/toolrelay/core/driver.ToolResult].Resend. A write
// that had not returned is wholly there or wholly absent. The kill half is tested
// by internal/crashtest (SIGKILL at each point of a call, then another
// worker on the same file).
//
// What survives a power loss or an operating-system crash depends on
// [Options.Synchronous], given a disk that honours fsync. The log is
// written in order, so a write that is synced makes every earlier one
// durable too; what is "not synced" below is lost only if no synced write
// followed it before the power went.
//
//   - [Claims] (the default): every claim and takeover of a call whose
//     tool may not run twice (the writes made before its handler runs), so
//     a handler with side effects never runs twice unseen; the creation
//     and moves of run records; requests for approval. Not synced: results
//     and releases (their calls are then found started, in doubt, and
//     settled as the tool declares: verified, run again if idempotent, or
//     failed as "outcome unknown"), run ends (a run found still "running"
//     is taken over, and its resume finds the thread's answer), decisions,
//     notes, lease renewals, marks and Prune's deletions.
//   - [Full]: also every result, release, renewal of a call's lease, run
//     end, decision and note whose method returned. A run's lease renewal
//     is never synced (a lost one costs at most a takeover a lease early).
//   - [Normal]: nothing is synced but at checkpoints: the writes of the
//     last moments, claims included, may be lost, and a call whose claim
//     was lost may run again. For journals of idempotent calls.
//
// Whatever the setting, the claims and results of calls whose tool was
// declared idempotent or read-only (core.ToolOptions) are never synced
// ([driver.Unsynced]): one lost makes the call run again, which such a
// tool allows. The file stays consistent, and a write is wholly there or
// wholly absent.
//
// What that costs: a sync to disk is the dearest part of a call. A step of
// one call of a tool with side effects waits for one sync under Claims
// (its claim) and two under Full (its claim, then its result); a step of
// an idempotent tool waits for none. Writes that arrive together share a
// transaction and its sync: the calls of a step, and of concurrent runs.
// [Journal.Stats] counts the syncs; BENCHMARKS.md gives this project's
// figures. Programs that want cheaper syncs on Linux may call
// sqlite.Fdatasync(true) from modernc.org/sqlite, which syncs with
// fdatasync(2), as durable for SQLite's files (on this project's test
// machine it made no measurable difference).
//
// # Errors
//
// [Open] fails with a *[errcode.Error] of code FailedPrecondition, and leaves
// the file as it is, when the file is not an SQLite database or is corrupt
// (Open runs PRAGMA quick_check, unless [Options.SkipCheck]), when another
// connection holds a lock on it past the busy timeout, or when its tables
// are of another schema version (or are not toolrelay's); with code
// PermissionDenied when it cannot be written. The methods of a [Journal]
// return *[errcode.Error] values whose underlying error (a *sqlite.Error from
// modernc.org/sqlite) is reachable with errors.As, and [driver.ErrLeaseLost]
// as driver.Journal specifies.
//
// Do not open the journal's file with os.Open and close it while a Journal
// has it open, in the same process: closing any descriptor of a file drops
// the POSIX locks the process holds on it, SQLite's included (the
// modernc.org/sqlite documentation describes OFD locks, which avoid this).
package sqlitejournal
