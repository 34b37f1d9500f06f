package pgjournal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/redact"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/record"
)

// Defaults of [Options].
const (
	DefaultTable          = "toolrelay_journal"
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxConns is the size of the connection pool Open makes when
	// the connection string sets no pool_max_conns: as many connections
	// as the calls a runner runs at once, by default.
	DefaultMaxConns = core.DefaultConcurrency
)

// Synchronous says which writes wait for the server to flush them to disk
// before they are reported done. The package doc says what each survives.
type Synchronous string

// The settings of [Options.Synchronous].
const (
	// Full: claims, takeovers, renewals, releases and results.
	Full Synchronous = "full"
	// Claims: claims and takeovers only, the writes made before a handler
	// runs; the others are committed with synchronous_commit off. The
	// default.
	Claims Synchronous = "claims"
)

// Options configure [Open] and [New]. nil is usable.
type Options struct {
	// Schema is the schema that holds the journal's tables; Open creates
	// it if it does not exist. Empty means the first schema of the
	// connection's search_path (usually public).
	Schema string
	// Table names the journal's table; its version table is Table +
	// "_version". Empty means DefaultTable. Journals with different
	// tables (or schemas) are independent.
	Table string
	// Synchronous is Claims (the default, when empty) or Full. It has effect
	// only where the server's synchronous_commit is on (its default).
	Synchronous Synchronous
	// ConnectTimeout bounds each attempt to connect (dial, TLS and
	// authentication), when the connection string sets no connect_timeout.
	// Zero means DefaultConnectTimeout. New ignores it.
	ConnectTimeout time.Duration
}

// Journal is a [driver.Journal] kept in PostgreSQL. It is safe for
// concurrent use, and any number of processes, on any number of machines,
// may share the same tables.
type Journal struct {
	pool    *pgxpool.Pool
	ownPool bool
	t       tables
	sync    Synchronous

	w                      batcher
	writes, commits, syncs atomic.Int64 // see Stats

	claim, get, renew, takeOver, release, finish, mark, prune string
	// claimFenced is claim, fenced by a run's record (see ClaimFenced).
	claimFenced string
	// secrets are the passwords of the journal's connection, masked in
	// its errors (see hide).
	secrets []string
}

var (
	_ driver.Journal  = (*Journal)(nil)
	_ driver.Unsynced = (*Journal)(nil)
	_ driver.Stater   = (*Journal)(nil)
	_ driver.Fenced   = (*Journal)(nil)
)

// Open connects to the PostgreSQL database that connString names (a URL,
// postgres://user@host:5432/db?sslmode=disable, or key=value settings, as
// pgx reads them, pool_max_conns included) and opens the journal there,
// creating its tables if they do not exist. It fails, with a
// *[errcode.Error], within the connect timeout if the server cannot be
// reached; with code FailedPrecondition if the tables exist but are of
// another schema version, or one of them is missing or lacks a column
// this version reads (the error names the table); with code
// PermissionDenied if the user may not read them (a write refused later
// has that code too); and with code InvalidArgument if connString does not
// parse or gives host, user or dbname a value holding an = (as "host=
// password=secret" does: the error names the setting). No error shows a
// password of connString, nor a value, a name or a host that repeats
// it. opts may be nil. The caller must Close the journal.
func Open(ctx context.Context, connString string, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, hide(&errcode.Error{Code: errcode.InvalidArgument, Op: "pgjournal: open " + redact.ConnString(connString), Err: parseConfigError(err)}, secretsOf(connString, nil))
	}
	secrets := secretsOf(connString, &cfg.ConnConfig.Config)
	if name := settingInValue(cfg.ConnConfig); name != "" {
		return nil, hide(&errcode.Error{Code: errcode.InvalidArgument, Op: "pgjournal: open " + redact.ConnString(connString),
			Err: fmt.Errorf("the value of %s holds another setting (an empty value, as in %q, takes the next setting as its value): quote an empty value (%s='') or leave the setting out", name, name+"= password=…", name)}, secrets)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = cmp.Or(o.ConnectTimeout, DefaultConnectTimeout)
	}
	if !strings.Contains(connString, "pool_max_conns") {
		// pgxpool's default (4 on small machines) would make the calls of a
		// step queue for connections rather than commit together.
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, hide(openError(cfg.ConnConfig, err), secrets)
	}
	j, err := newJournal(ctx, pool, &o)
	if err != nil {
		pool.Close()
		return nil, hide(openError(cfg.ConnConfig, err), secrets)
	}
	j.ownPool, j.secrets = true, secrets
	return j, nil
}

// New opens the journal in the database of pool, creating its tables if
// they do not exist. Close does not close pool. opts may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg := pool.Config().ConnConfig
	j, err := newJournal(ctx, pool, &o)
	if err != nil {
		return nil, hide(openError(cfg, err), secretsOf("", &cfg.Config))
	}
	j.secrets = secretsOf("", &cfg.Config)
	return j, nil
}

func newJournal(ctx context.Context, pool *pgxpool.Pool, o *Options) (*Journal, error) {
	sync := cmp.Or(o.Synchronous, Claims)
	if sync != Full && sync != Claims {
		return nil, errcode.Errorf(errcode.InvalidArgument, "synchronous %q: want %q or %q", o.Synchronous, Full, Claims)
	}
	t := newTables(o.Schema, cmp.Or(o.Table, DefaultTable))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if err := ensureSchema(ctx, conn.Conn(), t); err != nil {
		return nil, err
	}
	if err := t.check(ctx, conn.Conn()); err != nil {
		return nil, err
	}
	e := t.entries
	const key = `backend = $1 AND thread = $2 AND turn = $3 AND call_id = $4`
	j := &Journal{
		pool: pool,
		t:    t,
		sync: sync,
		// The claim is one statement: the INSERT either creates the entry or
		// finds it there (ON CONFLICT DO NOTHING), and then the SELECT reads
		// it. If the conflicting entry was committed after the statement
		// began, the SELECT does not see it, and no row comes back: Claim
		// then runs the statement again.
		claim: `WITH ins AS (
				INSERT INTO ` + e + ` (backend, thread, turn, call_id, digest, idempotency_key, state, owner, lease_until, created, updated)
				VALUES ($1, $2, $3, $4, $5, $6, 'started', $7, now() + $8::bigint * interval '1 microsecond', now(), now())
				ON CONFLICT (backend, thread, turn, call_id) DO NOTHING
				RETURNING ` + columns + `, true AS created)
			SELECT * FROM ins
			UNION ALL
			SELECT ` + columns + `, false FROM ` + e + ` WHERE ` + key + ` AND NOT EXISTS (SELECT FROM ins)`,
		// The fenced claim is the claim, made only if the run's record
		// ($9) is running under the claim's owner, a row it locks (FOR
		// SHARE) until the claim commits: a takeover, an end or a pause of
		// the run waits for the claim, or the claim reads what they wrote.
		claimFenced: `WITH fence AS (
				SELECT 1 FROM ` + t.runs + ` WHERE backend = $1 AND thread = $9 AND state = 'running' AND owner = $7 FOR SHARE),
			ins AS (
				INSERT INTO ` + e + ` (backend, thread, turn, call_id, digest, idempotency_key, state, owner, lease_until, created, updated)
				SELECT $1, $2, $3, $4, $5, $6, 'started', $7, now() + $8::bigint * interval '1 microsecond', now(), now() WHERE EXISTS (SELECT FROM fence)
				ON CONFLICT (backend, thread, turn, call_id) DO NOTHING
				RETURNING ` + columns + `, true AS created)
			SELECT * FROM ins
			UNION ALL
			SELECT ` + columns + `, false FROM ` + e + ` WHERE ` + key + ` AND NOT EXISTS (SELECT FROM ins) AND EXISTS (SELECT FROM fence)`,
		get:      `SELECT ` + columns + ` FROM ` + e + ` WHERE ` + key,
		renew:    `UPDATE ` + e + ` SET lease_until = now() + $6::bigint * interval '1 microsecond' WHERE ` + key + ` AND state = 'started' AND owner = $5`,
		takeOver: `UPDATE ` + e + ` SET owner = $5, lease_until = now() + $6::bigint * interval '1 microsecond', updated = now() WHERE ` + key + ` AND state = 'started' AND lease_until <= now()`,
		release:  `DELETE FROM ` + e + ` WHERE ` + key + ` AND state = 'started' AND owner = $5`,
		finish:   `UPDATE ` + e + ` SET state = $6, result = $7, updated = now() WHERE ` + key + ` AND state = 'started' AND owner = $5`,
		// One statement per key: a join with a list of keys lets the
		// planner scan the whole table while it is small.
		mark:  `UPDATE ` + e + ` SET state = 'submitted', updated = now() WHERE ` + key + ` AND state IN ('succeeded', 'failed')`,
		prune: `DELETE FROM ` + e + ` AS e WHERE state <> 'started' AND updated < $1 AND NOT ` + t.liveRun(),
	}
	j.w.init(j)
	return j, nil
}

const columns = `backend, thread, turn, call_id, digest, idempotency_key, state, owner, lease_until, result, created, updated`

// Pool returns the journal's connection pool.
func (j *Journal) Pool() *pgxpool.Pool { return j.pool }

// Close writes the submitted marks not written yet, and closes the
// journal's connection pool, if Open made it.
func (j *Journal) Close() error {
	err := j.w.q.Close()
	if err != nil {
		err = j.opError("mark submitted", err)
	}
	if j.ownPool {
		j.pool.Close()
	}
	return err
}

func keyArgs(k driver.Key, more ...any) []any {
	return append([]any{k.Backend, k.Thread, k.Turn, k.Call}, more...)
}

// Claim implements [driver.Journal]. The claim is one atomic statement
// (INSERT … ON CONFLICT DO NOTHING, reading the entry found instead).
func (j *Journal) Claim(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration) (driver.Entry, bool, error) {
	return j.claimSynced(ctx, key, digest, idempotencyKey, owner, lease, true)
}

// ClaimUnsynced implements [driver.Unsynced]: Claim, committed with
// synchronous_commit off.
func (j *Journal) ClaimUnsynced(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration) (driver.Entry, bool, error) {
	return j.claimSynced(ctx, key, digest, idempotencyKey, owner, lease, false)
}

// ClaimFenced implements [driver.Fenced]: one statement, which locks the
// run's record (FOR SHARE) and claims the call only if the record is
// running under the claim's owner.
func (j *Journal) ClaimFenced(ctx context.Context, req driver.ClaimRequest) (driver.Entry, bool, error) {
	return j.claimRun(ctx, req.Key, req.Digest, req.IdempotencyKey, req.Owner, req.Lease, !req.Unsynced, req.Run)
}

func (j *Journal) claimSynced(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration, synced bool) (driver.Entry, bool, error) {
	return j.claimRun(ctx, key, digest, idempotencyKey, owner, lease, synced, "")
}

// claimRun is a claim, fenced by the record of run when run is not empty.
func (j *Journal) claimRun(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration, synced bool, run string) (driver.Entry, bool, error) {
	args := keyArgs(key, digest, idempotencyKey, owner, lease.Microseconds())
	stmt := j.claim
	if run != "" {
		stmt, args = j.claimFenced, append(args, run)
	}
	for range 10 {
		var (
			e       driver.Entry
			created bool
		)
		err := j.queryRow(ctx, synced, entryLock(key), stmt, args, func(row pgx.Row) (err error) {
			e, err = scanEntry(row, &created)
			return err
		})
		if errors.Is(err, pgx.ErrNoRows) && run != "" {
			// No row: the fence held no longer, or the entry changed as
			// the statement ran. Either way nothing was claimed.
			held, err := j.holds(ctx, key.Backend, run, owner)
			if err != nil {
				return driver.Entry{}, false, j.opError("claim", err)
			}
			if !held {
				return driver.Entry{}, false, fmt.Errorf("pgjournal: claim: the run of thread %s is not %s's: %w", run, owner, driver.ErrLeaseLost)
			}
		}
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the entry was committed, or deleted, as the statement ran
		}
		if err != nil {
			return driver.Entry{}, false, j.opError("claim", err)
		}
		return e, created, nil
	}
	return driver.Entry{}, false, j.opError("claim", errors.New("the entry kept changing under the claim"))
}

// holds reports whether the record of the run of (backend, thread) is
// running under owner.
func (j *Journal) holds(ctx context.Context, backend, thread, owner string) (bool, error) {
	var held bool
	err := j.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+j.t.runs+` WHERE backend = $1 AND thread = $2 AND state = 'running' AND owner = $3)`,
		backend, thread, owner).Scan(&held)
	return held, err
}

// Renew implements [driver.Journal].
func (j *Journal) Renew(ctx context.Context, key driver.Key, owner string, lease time.Duration) error {
	return j.owned(ctx, "renew", key, j.renew, keyArgs(key, owner, lease.Microseconds()))
}

// TakeOver implements [driver.Journal]. It is one conditional UPDATE; the
// lease is compared with the server's clock.
func (j *Journal) TakeOver(ctx context.Context, key driver.Key, owner string, lease time.Duration) (bool, error) {
	tag, err := j.exec(ctx, true, entryLock(key), j.takeOver, keyArgs(key, owner, lease.Microseconds())...)
	if err != nil {
		return false, j.opError("take over", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release implements [driver.Journal].
func (j *Journal) Release(ctx context.Context, key driver.Key, owner string) error {
	return j.owned(ctx, "release", key, j.release, keyArgs(key, owner))
}

// Finish implements [driver.Journal].
func (j *Journal) Finish(ctx context.Context, key driver.Key, owner string, result driver.Result) error {
	return j.finishSynced(ctx, key, owner, result, j.sync == Full)
}

// FinishUnsynced implements [driver.Unsynced]: Finish, committed with
// synchronous_commit off.
func (j *Journal) FinishUnsynced(ctx context.Context, key driver.Key, owner string, result driver.Result) error {
	return j.finishSynced(ctx, key, owner, result, false)
}

func (j *Journal) finishSynced(ctx context.Context, key driver.Key, owner string, result driver.Result, synced bool) error {
	r, err := record.EncodeResult(&result)
	if err != nil {
		return j.opError("finish", err)
	}
	tag, err := j.exec(ctx, synced, entryLock(key), j.finish, keyArgs(key, owner, record.FinishedState(&result), r)...)
	return j.changedOne("finish", tag, err)
}

// owned runs a statement that changes one entry owned by its caller,
// synced under Full, and returns driver.ErrLeaseLost if it changed none.
func (j *Journal) owned(ctx context.Context, op string, key driver.Key, stmt string, args []any) error {
	tag, err := j.exec(ctx, j.sync == Full, entryLock(key), stmt, args...)
	return j.changedOne(op, tag, err)
}

// changedOne returns the error of a write that must change one record
// owned by its caller (an entry, a run): driver.ErrLeaseLost if it changed
// none.
func (j *Journal) changedOne(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return j.opError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// exec makes the write stmt, which locks the row lock names (see
// batcher), and returns its command tag.
func (j *Journal) exec(ctx context.Context, synced bool, lock, stmt string, args ...any) (pgconn.CommandTag, error) {
	w := &write{stmt: stmt, args: args, synced: synced, lock: lock}
	err := j.w.q.Do(ctx, w)
	return w.tag, err
}

// queryRow makes the write stmt, which locks the row lock names and
// returns one row (see batcher), and hands its row to scan.
func (j *Journal) queryRow(ctx context.Context, synced bool, lock, stmt string, args []any, scan func(pgx.Row) error) error {
	return j.w.q.Do(ctx, &write{stmt: stmt, args: args, synced: synced, scan: scan, lock: lock})
}

// count counts a write made outside the batcher, in a transaction of its own,
// synced or not.
func (j *Journal) count(synced bool) {
	j.writes.Add(1)
	j.commits.Add(1)
	if synced {
		j.syncs.Add(1)
	}
}

// Stats implements [driver.Stater]: the writes made by this Journal (not
// by other processes on the same tables). Syncs counts the transactions
// committed with the server's synchronous_commit, which waits for its log
// to reach the disk (with the server's default, on) unless the transaction
// wrote nothing.
func (j *Journal) Stats() driver.Stats {
	return driver.Stats{Writes: j.writes.Load(), Commits: j.commits.Load(), Syncs: j.syncs.Load()}
}

// MarkSubmitted implements [driver.Journal]. It does not wait for the
// marks: each key's mark (one keyed statement) goes first into the
// journal's next batch (the next step's claims, usually), or into one of
// its own within 50 ms, or at once when 64 wait, committed with
// synchronous_commit off; Get, ListEntries and Close make them first. A
// mark lost (to a kill, a failed write, a power loss) costs only this: a
// resumed run sends such a result again without [core.ToolResult.Resend].
func (j *Journal) MarkSubmitted(ctx context.Context, keys []driver.Key) error {
	for _, k := range keys {
		j.w.q.Later(&write{stmt: j.mark, args: keyArgs(k), lock: entryLock(k), mark: true})
	}
	return nil
}

// Get implements [driver.Journal].
func (j *Journal) Get(ctx context.Context, key driver.Key) (driver.Entry, bool, error) {
	if err := j.w.q.Settle(ctx); err != nil { // the submitted marks not written yet
		return driver.Entry{}, false, j.opError("mark submitted", err)
	}
	e, err := scanEntry(j.pool.QueryRow(ctx, j.get, keyArgs(key)...), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Entry{}, false, nil
	}
	if err != nil {
		return driver.Entry{}, false, j.opError("get", err)
	}
	return e, true, nil
}

// Prune implements [driver.Journal]. It is one DELETE: other writers wait
// only for the rows it deletes. Times are compared with the server's. A
// second DELETE removes the approvals decided before.
func (j *Journal) Prune(ctx context.Context, before time.Time) (int, error) {
	tag, err := j.pool.Exec(ctx, j.prune, before)
	if err != nil {
		return 0, j.opError("prune", err)
	}
	if _, err := j.pool.Exec(ctx, `DELETE FROM `+j.t.approvals+` AS e WHERE decided < $1 AND NOT `+j.t.liveRun(), before); err != nil {
		return int(tag.RowsAffected()), j.opError("prune approvals", err)
	}
	if _, err := j.pool.Exec(ctx, `DELETE FROM `+j.t.notes+` AS e WHERE updated < $1 AND NOT `+j.t.liveRun(), before); err != nil {
		return int(tag.RowsAffected()), j.opError("prune notes", err)
	}
	if _, err := j.pool.Exec(ctx, `DELETE FROM `+j.t.runs+` WHERE state IN ('finished', 'failed', 'continued') AND updated < $1`, before); err != nil {
		return int(tag.RowsAffected()), j.opError("prune runs", err)
	}
	return int(tag.RowsAffected()), nil
}

// scanEntry reads an entry; created, if not nil, receives the claim's
// extra column.
func scanEntry(row pgx.Row, created *bool) (driver.Entry, error) {
	var (
		e      driver.Entry
		state  string
		result *string
	)
	dest := []any{&e.Key.Backend, &e.Key.Thread, &e.Key.Turn, &e.Key.Call, &e.Digest, &e.IdempotencyKey, &state, &e.Owner, &e.LeaseUntil, &result, &e.Created, &e.Updated}
	if created != nil {
		dest = append(dest, created)
	}
	if err := row.Scan(dest...); err != nil {
		return e, err
	}
	var err error
	if e.State, err = record.ParseState(state); err != nil {
		return e, err
	}
	e.Result, err = record.EntryResult(e.Key, e.State, result)
	return e, err
}

// opError wraps the error of an operation; the driver's error (such as a
// *pgconn.PgError) stays reachable with errors.As, unless it shows a
// password of the journal's connection (see hide).
func (j *Journal) opError(op string, err error) error {
	return hide(&errcode.Error{Code: pgCode(err), Op: "pgjournal: " + op, Err: err}, j.secrets)
}

// pgCode returns the code of err, by the table of package errcode's doc:
// the code it has, else, for a PostgreSQL error, the code of its
// SQLSTATE (no privilege: PermissionDenied; a table, column or schema
// missing: FailedPrecondition; out of disk, memory or connections:
// ResourceExhausted; the server shutting down or the connection lost:
// Unavailable), else Unknown.
func pgCode(err error) errcode.Code {
	if code := errcode.Of(err); code != errcode.Unknown {
		return code
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return errcode.Unknown
	}
	switch c := pgErr.Code; {
	case c == "42501": // insufficient_privilege
		return errcode.PermissionDenied
	case c == "42P01", c == "42703", c == "3F000": // undefined table, column, schema
		return errcode.FailedPrecondition
	case strings.HasPrefix(c, "53"): // insufficient resources
		return errcode.ResourceExhausted
	case strings.HasPrefix(c, "08"), strings.HasPrefix(c, "57P"): // connection exception, operator intervention
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// openError returns the error of a failed Open, saying which server and
// database it was (never the password).
func openError(cfg *pgx.ConnConfig, err error) error {
	op := fmt.Sprintf("pgjournal: open %s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return &errcode.Error{Code: ce.Code, Op: op, Err: ce.Err}
	}
	var connErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	code := pgCode(err)
	errors.As(err, &pgErr)
	switch {
	case errors.As(err, &connErr):
		err = fmt.Errorf("cannot connect to PostgreSQL (connect timeout %v): %w", cfg.ConnectTimeout, err)
		switch {
		case pgErr != nil && (pgErr.Code == "28000" || pgErr.Code == "28P01"): // invalid authorization, password
			code = errcode.PermissionDenied
		case pgErr != nil && pgErr.Code == "3D000": // invalid_catalog_name: no such database
			code = errcode.NotFound
		}
	case pgErr != nil && pgErr.Code == "42501": // insufficient_privilege
		code, err = errcode.PermissionDenied, fmt.Errorf("cannot create or read the journal's tables: %w", err)
	}
	return &errcode.Error{Code: code, Op: op, Err: err}
}

// settingInValue returns the name of the setting among host, user and
// dbname (whose values are names, never holding an =) whose value holds
// another setting, or "". pgx reads "host= password=secret" as libpq does,
// as a host "password=secret", which would go on to be shown in every
// error about the connection.
func settingInValue(cfg *pgx.ConnConfig) string {
	if strings.Contains(cfg.Host, "=") {
		return "host"
	}
	for _, fb := range cfg.Fallbacks {
		if strings.Contains(fb.Host, "=") {
			return "host"
		}
	}
	switch {
	case strings.Contains(cfg.User, "="):
		return "user"
	case strings.Contains(cfg.Database, "="):
		return "dbname"
	}
	return ""
}

// isUndefined reports whether err says a table or schema does not exist.
func isUndefined(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000")
}
