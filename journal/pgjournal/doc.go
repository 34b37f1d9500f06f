// Package pgjournal keeps the results journal of toolrelay (a
// [driver.Journal]) in PostgreSQL, through github.com/jackc/pgx/v5, for
// fleets of workers on several machines that resume each other's threads.
//
//	j, err := pgjournal.Open(ctx, "postgres://toolrelay@db:5432/app?sslmode=verify-full", nil)
//	...
//	defer j.Close()
//	runner := core.NewRunner(backend, tools, &core.Options{Journal: j})
//
// Programs that use package adapter set
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
// call at once, exactly one creates its entry; a fenced claim
// ([driver.Fenced]) is the same statement, which also locks the run's
// record (FOR SHARE) and claims nothing unless it is running under the
// claim's owner. TakeOver is one conditional
// UPDATE (state started, lease ended): of workers taking over an abandoned
// call at once, exactly one wins, the others see the new lease. Renew,
// Release and Finish are single statements conditional on the owner;
// Prune is one DELETE.
//
// # Group commit
//
// A Journal sends the writes of concurrent callers together (the claims
// and results of the calls of a step, and of concurrent runs): writes that
// arrive while a batch is on its way to the server wait, and go together
// into the next, which is one round trip and one transaction (the
// statements of a pipeline before its Sync message), committed once. A
// write alone goes at once. A statement the server fails fails alone: the
// others of its batch are sent again without it. With many runs at once
// the server's work per transaction, not the network, bounds a journal's
// throughput, and batching divides it (BENCHMARKS.md, P3).
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
// returned, as the server holds it, except the last submitted marks:
// MarkSubmitted does not wait for its write, which goes first into the
// journal's next batch (or one of its own within 50 ms, or Close's). A
// lost mark costs only this: a resumed run sends such a result again
// without [github.com/toolrelay/toolrelay/core/driver.ToolResult].Resend.
//
// What survives the database server's crash or a power loss, with the
// server's default synchronous_commit (on), depends on
// [Options.Synchronous]. The server writes its log in order, so a
// transaction that waits for the disk makes every earlier one durable too;
// what is "not synced" below is lost only if no synced write followed it.
//
//   - [Claims] (the default): every claim and takeover of a call whose
//     tool may not run twice (the writes made before its handler runs), so
//     a handler with side effects never runs twice unseen; the creation,
//     moves and claims of run records; requests for approval. Not synced
//     (committed with synchronous_commit off): results and releases
//     (their calls are then found started, in doubt, and settled as the
//     tool declares), run ends, decisions, notes, renewals and marks.
//   - [Full]: also every result, release, renewal of a call's lease, run
//     end, decision and note whose method returned. A run's lease renewal
//     is never synced (a lost one costs at most a takeover a lease early).
//
// Whatever the setting, the claims and results of calls whose tool was
// declared idempotent or read-only are never synced ([driver.Unsynced]):
// one lost makes the call run again, which such a tool allows. With the
// server's (or the connection's: synchronous_commit=off in the URL)
// synchronous_commit off, the last writes of every kind, claims included,
// may be lost on a server crash: do not do that for a journal of
// side-effecting calls.
//
// What that costs: a step of one call of a tool with side effects makes
// two round trips (its claim, which carries the previous step's marks,
// and its result) and waits for one log flush under Claims, two under
// Full; a step of an idempotent tool waits for none. [Journal.Stats]
// counts them.
//
// # Errors
//
// [Open] fails with a *[errcode.Error]: within the connect timeout
// ([Options.ConnectTimeout], or the connection string's connect_timeout)
// when the server cannot be reached; with code FailedPrecondition when the
// tables exist but are of another schema version, or are not toolrelay's;
// with PermissionDenied when it may not create or read them; with
// InvalidArgument when pgx cannot parse the connection string. No error
// shows a password: Open names the server as user@host:port/db, or the
// connection string with its secrets masked, and keeps only pgx's fixed
// messages of a connection string it could not parse (pgx's own error
// quotes the string, hiding passwords only as well as it can). A password
// repeated where nothing names it as one (another parameter's value, the
// user's or the database's name, a host, a file) is masked there too, in
// every error Open and the methods return. The methods of a [Journal]
// return *[errcode.Error] values whose underlying error (such as a
// *pgconn.PgError) is reachable with errors.As, unless its text shows the
// password (the error then holds its text, masked, and no longer wraps
// it), and [driver.ErrLeaseLost] as driver.Journal specifies. A method whose context
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
