// Package sqlitejournal keeps the results journal of toolrelay (a
// [core.Journal]) in a single SQLite file, through modernc.org/sqlite (pure
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
// The file holds two tables: toolrelay_journal (one row per call, keyed by
// backend, thread, turn and call id) and toolrelay_journal_version (the
// schema version, [SchemaVersion]). The file is put in WAL mode. Every write
// is one transaction: Claim runs in a BEGIN IMMEDIATE transaction, so that
// of several connections racing for a call, in this process or in others,
// exactly one creates its entry; TakeOver is one conditional UPDATE.
// MarkSubmitted marks a whole step's calls in one statement. Within a
// process, a Journal uses one connection, so its writes queue in Go rather
// than in SQLite's busy loop; between processes, a write waits up to
// [Options.BusyTimeout] for another's lock, then fails.
//
// Times, leases included, are this process's wall clock, stored in Unix
// nanoseconds: processes sharing a file share the machine's clock.
//
// # Durability
//
// What survives a process kill (SIGKILL, a panic, an OOM kill): every
// write whose method returned, whichever [Synchronous] setting: a commit is
// in the write-ahead log in the operating system's cache before the method
// returns, and the next Open recovers it. A write that had not returned is
// either wholly there or wholly absent.
//
// What survives a power loss or an operating-system crash: with Full, the
// default, every write whose method returned (the log is synced with fsync
// at every commit), given a disk that honours fsync. With Normal, the log
// is synced only at checkpoints, so the writes of the last moments may be
// lost; the file stays consistent. Losing a claim or a result is what the
// journal is there to prevent — a lost claim lets a side effect run twice
// — so Full is the default, and Normal is for calls whose handlers are
// idempotent. Measured on this project's test machine (ext4 on a virtual
// disk), a call's three writes cost about the same with either setting
// (see the benchmarks in this package's tests and the project's notes).
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
// modernc.org/sqlite) is reachable with errors.As, and [core.ErrLeaseLost]
// as core.Journal specifies.
//
// Do not open the journal's file with os.Open and close it while a Journal
// has it open, in the same process: closing any descriptor of a file drops
// the POSIX locks the process holds on it, SQLite's included (the
// modernc.org/sqlite documentation describes OFD locks, which avoid this).
package sqlitejournal
