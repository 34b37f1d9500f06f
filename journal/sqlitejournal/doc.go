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
// Programs that use package config set TOOLRELAY_JOURNAL=sqlite:///path/file.db
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
// it over (TakeOver is one conditional UPDATE).
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
// write whose method returned, whichever [Synchronous] setting: a commit is
// in the write-ahead log, in the operating system's cache, before the
// method returns, and the next Open recovers it. A write that had not
// returned is wholly there or wholly absent.
//
// What survives a power loss or an operating-system crash depends on
// [Options.Synchronous], given a disk that honours fsync:
//
//   - [Full] (the default): every claim, takeover, renewal, release and
//     result whose method returned: the log is synced to disk before the
//     method returns. The last MarkSubmitted and Prune writes may be lost
//     (they are synced by the next write that is), which costs only this: a
//     resumed run sends such a result again without [core.ToolResult.Resend].
//   - [Claims]: every claim and takeover whose method returned (the writes
//     made before a handler runs), so a handler never runs twice unseen;
//     the results and releases of the last moments may be lost, and their
//     calls are then found started, in doubt, and settled as the tool
//     declares (verified, run again if idempotent, or failed as "outcome
//     unknown").
//   - [Normal]: the log is synced only at checkpoints, so the writes of the
//     last moments, claims included, may be lost: a call whose claim was
//     lost may run again. For journals of idempotent calls.
//
// The other records follow the same rule: a run record's creation, end
// and claim by another worker, and a request for approval, are synced
// under Full and Claims (a worker that dies after writing one leaves a run
// others can find, or a pending approval that stays pending); a run's
// lease renewal is never synced (a lost renewal costs at most a takeover
// one lease early, never a result); a decision about an approval and a
// note (a trace context) are synced under Full only.
//
// Whatever the setting, the file stays consistent, and a write is wholly
// there or wholly absent.
//
// What that costs: a sync to disk is the dearest part of a call (BENCHMARKS.md
// gives this project's figures). A call run alone waits for two syncs
// under Full (its claim, then its result), one under Claims, none under
// Normal; the calls of a step, run concurrently, share them. The
// benchmarks (go test -bench . -benchmem) measure each setting. Programs
// that want cheaper syncs on Linux may call sqlite.Fdatasync(true) from
// modernc.org/sqlite, which syncs with fdatasync(2), as durable for
// SQLite's files; the benchmarks measure that too.
//
// # Errors
//
// [Open] fails with a *[core.Error] of code FailedPrecondition, and leaves
// the file as it is, when the file is not an SQLite database or is corrupt
// (Open runs PRAGMA quick_check, unless [Options.SkipCheck]), when another
// connection holds a lock on it past the busy timeout, or when its tables
// are of another schema version (or are not toolrelay's); with code
// PermissionDenied when it cannot be written. The methods of a [Journal]
// return *[core.Error] values whose underlying error (a *sqlite.Error from
// modernc.org/sqlite) is reachable with errors.As, and [driver.ErrLeaseLost]
// as driver.Journal specifies.
//
// Do not open the journal's file with os.Open and close it while a Journal
// has it open, in the same process: closing any descriptor of a file drops
// the POSIX locks the process holds on it, SQLite's included (the
// modernc.org/sqlite documentation describes OFD locks, which avoid this).
package sqlitejournal
