// Package pgjournal keeps the results journal of toolrelay (a
// [driver.Journal]) in PostgreSQL, through github.com/jackc/pgx/v5, for
// fleets of workers on several machines that resume each other's threads.
//
//	j, err := pgjournal.Open(ctx, "postgres://toolrelay@db:5432/app?sslmode=verify-full", nil)
//	...
//	defer j.Close()
//	runner := core.NewRunner(backend, tools, &core.Options{Journal: j})
//
// Programs that use package config set
// TOOLRELAY_JOURNAL=postgres://… instead (see package journal).
//
// # Storage
//
// A journal is three tables, by default toolrelay_journal (one row per
// call, keyed by backend, thread, turn and call id),
// toolrelay_journal_approvals (the calls awaiting a person's decision, and
// the decisions, same key; the journal implements journal/driver.Approvals)
// and toolrelay_journal_version (the schema version, [SchemaVersion]), in
// the schema [Options.Schema] names (default: the connection's
// search_path). [Options.Table] renames them, so that several journals
// share a database. Open creates the schema and the tables on first use,
// in a transaction that holds an advisory lock (so that workers starting
// at once create them once), migrates a journal of version 1 (it adds the
// approvals table, under the same lock), and refuses tables of another
// version. A decision is one conditional UPDATE (the approval still
// undecided), so of several deciders, in any process, exactly one wins.
//
// Claim is one atomic statement (INSERT … ON CONFLICT DO NOTHING, which
// returns the entry found instead): of any number of workers claiming a
// call at once, exactly one creates its entry. TakeOver is one conditional
// UPDATE (state started, lease ended): of workers taking over an abandoned
// call at once, exactly one wins, the others see the new lease. Renew,
// Release and Finish are single statements conditional on the owner;
// MarkSubmitted is one statement for a whole step; Prune is one DELETE.
//
// # Clock
//
// Every time — lease ends, Created, Updated — is the database server's
// clock (now(), the start of the statement's transaction), so that workers
// whose clocks disagree still agree on when a lease ends. A worker whose
// clock runs ahead of the server's may try a takeover early, and lose it;
// one whose clock runs behind waits longer before trying: correctness never
// depends on workers' clocks. Prune compares the time it is given with the
// server's times.
//
// # Durability
//
// What survives a worker's crash or kill: every write whose method
// returned, as the server holds it.
//
// What survives the database server's crash or a power loss, with the
// server's default synchronous_commit (on), depends on
// [Options.Synchronous]:
//
//   - [Full] (the default): every claim, takeover, renewal, release and
//     result whose method returned, since the server flushed its log to
//     disk before it answered. MarkSubmitted (and nothing else) is committed
//     with synchronous_commit off, so the last "submitted" marks may be
//     lost: a resumed run then sends such a result again without
//     [core.ToolResult.Resend].
//   - [Claims]: every claim and takeover (the writes made before a handler
//     runs), so a handler never runs twice unseen; the renewals, releases
//     and results of the last moments may be lost, and their calls are then
//     found started, in doubt, and settled as the tool declares.
//
// Run records, approvals and notes are committed as claims are, waiting
// for the server's log: a worker that dies after writing one leaves it
// for the others.
//
// The server writes its log in order, so a write that waits for the disk
// makes every earlier write durable too. With the server's (or the
// connection's: synchronous_commit=off in the URL) synchronous_commit off,
// the last writes of every kind, claims included, may be lost on a server
// crash: do not do that for a journal of side-effecting calls.
//
// What that costs: a call run alone makes three round trips (claim,
// result, submitted mark) and waits for two log flushes under Full, one
// under Claims; calls run concurrently, on the pool's connections, share
// the server's flushes. The benchmarks (go test -bench . -benchmem, with
// TOOLRELAY_TEST_POSTGRES set) measure both settings.
//
// # Errors
//
// [Open] fails with a *[core.Error]: within the connect timeout
// ([Options.ConnectTimeout], or the connection string's connect_timeout)
// when the server cannot be reached; with code FailedPrecondition when the
// tables exist but are of another schema version, or are not toolrelay's;
// with PermissionDenied when it may not create or read them; with
// InvalidArgument when pgx cannot parse the connection string. No error
// shows a password: Open names the server as user@host:port/db, or the
// connection string with its secrets masked, and keeps only pgx's fixed
// messages of a connection string it could not parse (pgx's own error
// quotes the string, hiding passwords only as well as it can). The methods
// of a [Journal] return *[core.Error] values whose underlying error (such
// as a *pgconn.PgError) is reachable with errors.As, and
// [driver.ErrLeaseLost] as driver.Journal specifies. A method whose context
// ends while its statement runs returns the context's error, but the
// statement may have taken effect on the server: a claim made so is found
// later as started and, once its lease ends, taken over as in doubt — never
// run twice unseen.
//
// # SDK access
//
// [Journal.Pool] returns the *pgxpool.Pool; [New] opens a journal on a
// pool the program made.
package pgjournal
