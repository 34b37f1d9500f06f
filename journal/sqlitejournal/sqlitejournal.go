package sqlitejournal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/defaults"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/record"
)

// DefaultBusyTimeout is the default of [Options.BusyTimeout].
const DefaultBusyTimeout = 5 * time.Second

// Synchronous says when a commit waits for the disk (SQLite's PRAGMA
// synchronous, in WAL mode). The package doc says what each survives.
type Synchronous string

// The settings of [Options.Synchronous].
const (
	// Full syncs the write-ahead log to disk before a claim, takeover,
	// renewal, release or result is reported written: they all survive a
	// power loss.
	Full Synchronous = "full"
	// Claims syncs only claims and takeovers, the writes made before a
	// handler runs: a power loss never lets a call's handler run twice
	// unseen, but may lose the results written in its last moments, whose
	// calls are then found in doubt. The default: one sync per step of a
	// call with side effects.
	Claims Synchronous = "claims"
	// Normal syncs only at checkpoints: every write survives the process
	// being killed, but the last ones, claims included, may be lost on a
	// power loss.
	Normal Synchronous = "normal"
)

// Options configure [Open]. nil is usable.
type Options struct {
	// BusyTimeout bounds how long an operation waits for a lock another
	// connection (another process) holds on the file before it fails.
	// Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Synchronous is Claims (the default, when empty), Full or Normal.
	Synchronous Synchronous
	// SkipCheck skips the integrity check (PRAGMA quick_check) Open makes
	// of the file. The check reads the whole file, so its time grows
	// with the number of entries.
	SkipCheck bool
}

// Journal is a [driver.Journal] kept in an SQLite file. It is safe for
// concurrent use, and several processes may open the same file.
type Journal struct {
	db   *sql.DB
	path string
	conn *sql.Conn // the writer's
	w    *writer

	// Statements of the writer's connection.
	claim, selectKey, renew, takeOver, release, finish, prune, pruneFirst *sql.Stmt
	// held reads whether a run's record is running under an owner (see
	// ClaimFenced).
	held *sql.Stmt
	// setNote sets a note: a run's totals are noted after every step, and
	// preparing the statement each time cost a third of the write (issue
	// 48, item 1).
	setNote *sql.Stmt
	mark    [markBatch + 1]*sql.Stmt // by number of keys
	// get reads on another connection.
	get *sql.Stmt
}

var (
	_ driver.Journal  = (*Journal)(nil)
	_ driver.Unsynced = (*Journal)(nil)
	_ driver.Stater   = (*Journal)(nil)
)

// Open opens the journal in the SQLite file at path, creating the file and
// its tables if they do not exist. It fails with a *[errcode.Error] of code
// FailedPrecondition, leaving the file as it is, if the file is not an
// SQLite database or is corrupt, if another connection holds a lock on it
// for longer than the busy timeout, or if its tables are of another schema
// version, or one of them is missing or lacks a column this version reads
// (the error names the table). opts may be nil. The caller must Close the
// journal.
func Open(ctx context.Context, path string, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	defaults.Positive(&o.BusyTimeout, DefaultBusyTimeout)
	switch o.Synchronous {
	case "":
		o.Synchronous = Claims
	case Full, Claims, Normal:
	default:
		return nil, errcode.Errorf(errcode.InvalidArgument, "sqlitejournal: synchronous %q: want %q, %q or %q", o.Synchronous, Full, Claims, Normal)
	}
	if path == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "sqlitejournal: no file name")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "sqlitejournal: %s: %v", path, err)
	}
	db, err := sql.Open("sqlite", dsn(abs, &o))
	if err != nil {
		return nil, openError(abs, &o, err)
	}
	// One connection for the writer (see writer.go), one for Get.
	db.SetMaxOpenConns(2)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	j := &Journal{db: db, path: abs}
	if err := j.init(ctx, &o); err != nil {
		j.Close()
		return nil, openError(abs, &o, err)
	}
	return j, nil
}

// dsn returns the data source name for the file at abs: a file: URI (so
// that any character may appear in the path) with the connection's
// settings as the modernc.org/sqlite driver reads them.
func dsn(abs string, o *Options) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	sync := "FULL" // the writer relaxes it for the transactions it need not sync
	if o.Synchronous == Normal {
		sync = "NORMAL"
	}
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true, RawQuery: q.Encode()}
	return u.String()
}

const (
	keyMatch = `backend = ? AND thread = ? AND turn = ? AND call = ?`
	columns  = `backend, thread, turn, call, digest, idempotency_key, state, owner, lease_until, result, created, updated`
)

func (j *Journal) init(ctx context.Context, o *Options) error {
	var mode string
	if err := j.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return errcode.Errorf(errcode.FailedPrecondition, "the file cannot be put in WAL mode (journal_mode is %q)", mode)
	}
	if !o.SkipCheck {
		var res string
		if err := j.db.QueryRowContext(ctx, "PRAGMA quick_check(3)").Scan(&res); err != nil {
			return err
		}
		if res != "ok" {
			return errcode.Errorf(errcode.FailedPrecondition, "the file is corrupt (it was left as it is; PRAGMA quick_check says: %s)", strings.ReplaceAll(res, "\n", " "))
		}
	}
	if err := ensureSchema(ctx, j.db); err != nil {
		return err
	}
	if err := checkTables(ctx, j.db); err != nil {
		return err
	}
	var err error
	if j.get, err = j.db.PrepareContext(ctx, `SELECT `+columns+` FROM `+entriesTable+` WHERE `+keyMatch); err != nil {
		return err
	}
	conn, err := j.db.Conn(ctx)
	if err != nil {
		return err
	}
	j.conn = conn
	for _, s := range []struct {
		stmt **sql.Stmt
		text string
	}{
		{&j.claim, `INSERT INTO ` + entriesTable + ` (` + columns + `) VALUES (?, ?, ?, ?, ?, ?, 'started', ?, ?, NULL, ?, ?)
			ON CONFLICT DO NOTHING`},
		{&j.selectKey, `SELECT ` + columns + ` FROM ` + entriesTable + ` WHERE ` + keyMatch},
		{&j.held, `SELECT EXISTS (SELECT 1 FROM ` + runsTable + ` WHERE backend = ? AND thread = ? AND state = 'running' AND owner = ?)`},
		{&j.setNote, `INSERT INTO ` + notesTable + ` (` + noteColumns + `) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (backend, thread, name) DO UPDATE SET value = excluded.value, updated = excluded.updated`},
		{&j.renew, `UPDATE ` + entriesTable + ` SET lease_until = ? WHERE ` + keyMatch + ` AND state = 'started' AND owner = ?`},
		{&j.takeOver, `UPDATE ` + entriesTable + ` SET owner = ?, lease_until = ?, updated = ? WHERE ` + keyMatch + ` AND state = 'started' AND lease_until <= ?`},
		{&j.release, `DELETE FROM ` + entriesTable + ` WHERE ` + keyMatch + ` AND state = 'started' AND owner = ?`},
		{&j.finish, `UPDATE ` + entriesTable + ` SET state = ?, result = ?, updated = ? WHERE ` + keyMatch + ` AND state = 'started' AND owner = ?`},
		{&j.prune, `DELETE FROM ` + entriesTable + ` WHERE (backend, thread, turn, call) IN
			(SELECT backend, thread, turn, call FROM ` + entriesTable + ` AS e
				WHERE (backend, thread, turn, call) > (?, ?, ?, ?) AND state <> 'started' AND updated < ? AND ` + unneeded + `
				ORDER BY backend, thread, turn, call LIMIT ?)
			RETURNING backend, thread, turn, call`},
		{&j.pruneFirst, `DELETE FROM ` + entriesTable + ` WHERE (backend, thread, turn, call) IN
			(SELECT backend, thread, turn, call FROM ` + entriesTable + ` AS e
				WHERE state <> 'started' AND updated < ? AND ` + unneeded + `
				ORDER BY backend, thread, turn, call LIMIT ?)
			RETURNING backend, thread, turn, call`},
	} {
		if *s.stmt, err = conn.PrepareContext(ctx, s.text); err != nil {
			return err
		}
	}
	for n := 1; n <= markBatch; n++ {
		if j.mark[n], err = conn.PrepareContext(ctx, markStmt(n)); err != nil {
			return err
		}
	}
	j.w, err = newWriter(ctx, conn, o.Synchronous)
	return err
}

// Stats implements [driver.Stater]: the writes, transactions and syncs
// made by this Journal (not by other processes on the same file).
func (j *Journal) Stats() driver.Stats { return j.w.stats() }

// Path returns the absolute path of the journal's file.
func (j *Journal) Path() string { return j.path }

// Close closes the journal's connections to the file, once the writes under
// way are done. Methods called after Close fail.
func (j *Journal) Close() error {
	if j.w != nil {
		j.w.close()
	}
	// Statements prepared on a *sql.Conn are the program's to close, and
	// SQLite closes a connection (checkpointing its log into the file) only
	// once its statements are.
	var errs []error
	for _, s := range append([]*sql.Stmt{j.claim, j.selectKey, j.held, j.setNote, j.renew, j.takeOver, j.release, j.finish, j.prune, j.pruneFirst}, j.mark[1:]...) {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if j.w != nil {
		errs = append(errs, j.w.closeStmts())
	}
	if j.conn != nil {
		errs = append(errs, j.conn.Close())
	}
	errs = append(errs, j.db.Close())
	return errors.Join(errs...)
}

// now is the clock of leases and times: this process's wall clock, in Unix
// nanoseconds.
func now() int64 { return time.Now().UnixNano() }

func keyArgs(k driver.Key, more ...any) []any {
	return append([]any{k.Backend, k.Thread, k.Turn, k.Call}, more...)
}

// Claim implements [driver.Journal]. The claim is one INSERT … ON CONFLICT
// DO NOTHING statement in a write transaction (BEGIN IMMEDIATE), atomic
// across connections and processes; when it finds an entry, a SELECT in
// the same transaction reads it.
func (j *Journal) Claim(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration) (driver.Entry, bool, error) {
	return j.claimSynced(ctx, key, digest, idempotencyKey, owner, lease, Claims)
}

// ClaimUnsynced implements [driver.Unsynced]: Claim, never synced.
func (j *Journal) ClaimUnsynced(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration) (driver.Entry, bool, error) {
	return j.claimSynced(ctx, key, digest, idempotencyKey, owner, lease, "")
}

// ClaimFenced implements [driver.Fenced]: the run's record is read in the
// claim's write transaction, which no other write (of any process) can
// interleave.
func (j *Journal) ClaimFenced(ctx context.Context, req driver.ClaimRequest) (driver.Entry, bool, error) {
	syncFrom := Claims
	if req.Unsynced {
		syncFrom = ""
	}
	return j.claimRun(ctx, req.Key, req.Digest, req.IdempotencyKey, req.Owner, req.Lease, syncFrom, req.Run)
}

func (j *Journal) claimSynced(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration, syncFrom Synchronous) (driver.Entry, bool, error) {
	return j.claimRun(ctx, key, digest, idempotencyKey, owner, lease, syncFrom, "")
}

// claimRun is a claim, fenced by the record of run when run is not empty
// (see driver.Fenced).
func (j *Journal) claimRun(ctx context.Context, key driver.Key, digest, idempotencyKey, owner string, lease time.Duration, syncFrom Synchronous, run string) (driver.Entry, bool, error) {
	var (
		e       driver.Entry
		created bool
		lost    bool // the run is not owner's
	)
	err := j.w.q.Do(ctx, &op{syncFrom: syncFrom, run: func(ctx context.Context) error {
		if run != "" {
			var held bool
			if err := j.held.QueryRowContext(ctx, key.Backend, run, owner).Scan(&held); err != nil {
				return err
			}
			if lost = !held; lost {
				return nil
			}
		}
		t := now()
		n, err := exec(ctx, j.claim, keyArgs(key, digest, idempotencyKey, owner, t+int64(lease), t, t))
		if err != nil {
			return err
		}
		if created = n == 1; created {
			// The entry is what the statement wrote: no need to read it.
			at := time.Unix(0, t)
			e = driver.Entry{Key: key, Digest: digest, IdempotencyKey: idempotencyKey, State: driver.Started, Owner: owner,
				LeaseUntil: time.Unix(0, t+int64(lease)), Created: at, Updated: at}
			return nil
		}
		e, err = scanEntry(j.selectKey.QueryRowContext(ctx, keyArgs(key)...))
		return err
	}})
	if err != nil {
		return driver.Entry{}, false, j.opError("claim", err)
	}
	if lost {
		return driver.Entry{}, false, fmt.Errorf("sqlitejournal: claim: the run of thread %s is not %s's: %w", run, owner, driver.ErrLeaseLost)
	}
	return e, created, nil
}

// Renew implements [driver.Journal].
func (j *Journal) Renew(ctx context.Context, key driver.Key, owner string, lease time.Duration) error {
	return j.owned(ctx, "renew", Full, func(ctx context.Context) (int64, error) {
		return exec(ctx, j.renew, append([]any{now() + int64(lease)}, keyArgs(key, owner)...))
	})
}

// TakeOver implements [driver.Journal]. It is one conditional UPDATE.
func (j *Journal) TakeOver(ctx context.Context, key driver.Key, owner string, lease time.Duration) (bool, error) {
	var n int64
	err := j.w.q.Do(ctx, &op{syncFrom: Claims, run: func(ctx context.Context) (err error) {
		t := now()
		n, err = exec(ctx, j.takeOver, append([]any{owner, t + int64(lease), t}, keyArgs(key, t)...))
		return err
	}})
	if err != nil {
		return false, j.opError("take over", err)
	}
	return n == 1, nil
}

// Release implements [driver.Journal].
func (j *Journal) Release(ctx context.Context, key driver.Key, owner string) error {
	return j.owned(ctx, "release", Full, func(ctx context.Context) (int64, error) {
		return exec(ctx, j.release, keyArgs(key, owner))
	})
}

// Finish implements [driver.Journal].
func (j *Journal) Finish(ctx context.Context, key driver.Key, owner string, result driver.Result) error {
	return j.finishSynced(ctx, key, owner, result, Full)
}

// FinishUnsynced implements [driver.Unsynced]: Finish, never synced.
func (j *Journal) FinishUnsynced(ctx context.Context, key driver.Key, owner string, result driver.Result) error {
	return j.finishSynced(ctx, key, owner, result, "")
}

func (j *Journal) finishSynced(ctx context.Context, key driver.Key, owner string, result driver.Result, syncFrom Synchronous) error {
	r, err := record.EncodeResult(&result)
	if err != nil {
		return j.opError("finish", err)
	}
	state := record.FinishedState(&result)
	return j.owned(ctx, "finish", syncFrom, func(ctx context.Context) (int64, error) {
		return exec(ctx, j.finish, append([]any{state, r, now()}, keyArgs(key, owner)...))
	})
}

// owned makes a write that changes one record owned by its caller (an
// entry, a run), synced from syncFrom, and returns driver.ErrLeaseLost if
// it changed none.
func (j *Journal) owned(ctx context.Context, what string, syncFrom Synchronous, write func(context.Context) (int64, error)) error {
	var n int64
	err := j.w.q.Do(ctx, &op{syncFrom: syncFrom, run: func(ctx context.Context) (err error) {
		n, err = write(ctx)
		return err
	}})
	if err != nil {
		return j.opError(what, err)
	}
	if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

func exec(ctx context.Context, stmt *sql.Stmt, args []any) (int64, error) {
	return affected(stmt.ExecContext(ctx, args...))
}

// affected returns the rows a statement changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// markBatch is how many keys one statement of MarkSubmitted names.
const markBatch = 16

// MarkSubmitted implements [driver.Journal]. The keys of a step (up to 16)
// are marked in one statement, more in several. MarkSubmitted does not
// wait for them: they are written first in the journal's next transaction
// (the next step's claims, usually), or within 50 ms in one of their own,
// never synced by themselves (see the package doc); Get and Close write
// them first.
func (j *Journal) MarkSubmitted(ctx context.Context, keys []driver.Key) error {
	if len(keys) == 0 {
		return nil
	}
	keys = slices.Clone(keys)
	j.w.q.Later(&op{run: func(ctx context.Context) error {
		t := now()
		for rest := keys; len(rest) > 0; {
			n := min(len(rest), markBatch)
			if _, err := j.mark[n].ExecContext(ctx, markArgs(t, rest[:n])...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	}})
	return nil
}

// markStmt returns the statement that marks n keys submitted.
func markStmt(n int) string {
	if n == 1 { // cheaper than a list of one
		return `UPDATE ` + entriesTable + ` SET state = 'submitted', updated = ? WHERE ` + keyMatch + ` AND state IN ('succeeded', 'failed')`
	}
	var b strings.Builder
	b.WriteString(`UPDATE ` + entriesTable + ` SET state = 'submitted', updated = ? WHERE state IN ('succeeded', 'failed') AND (backend, thread, turn, call) IN (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?)")
	}
	b.WriteString(")")
	return b.String()
}

func markArgs(t int64, keys []driver.Key) []any {
	args := make([]any, 0, 1+4*len(keys))
	args = append(args, t)
	for _, k := range keys {
		args = append(args, k.Backend, k.Thread, k.Turn, k.Call)
	}
	return args
}

// Get implements [driver.Journal].
func (j *Journal) Get(ctx context.Context, key driver.Key) (driver.Entry, bool, error) {
	j.w.q.Settle(ctx) // the submitted marks not written yet (a failure leaves them to a later write)
	e, err := scanEntry(j.get.QueryRowContext(ctx, keyArgs(key)...))
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Entry{}, false, nil
	}
	if err != nil {
		return driver.Entry{}, false, j.opError("get", err)
	}
	return e, true, nil
}

// pruneBatch is how many entries one write of Prune deletes.
const pruneBatch = 1000

// Prune implements [driver.Journal]. It deletes up to 1,000 entries per
// write, so that other writes never wait long behind it, going through the
// table once, in key order; ctx is checked between writes. Its writes are
// not synced (a deletion lost to a power loss is made by the next Prune).
func (j *Journal) Prune(ctx context.Context, before time.Time) (int, error) {
	total := 0
	var last *driver.Key // the greatest key deleted so far
	for {
		var (
			n        int
			lastHere *driver.Key // last, once this write is committed
		)
		err := j.w.q.Do(ctx, &op{run: func(ctx context.Context) error {
			n, lastHere = 0, last
			var rows *sql.Rows
			var err error
			if last == nil {
				rows, err = j.pruneFirst.QueryContext(ctx, before.UnixNano(), pruneBatch)
			} else {
				rows, err = j.prune.QueryContext(ctx, keyArgs(*last, before.UnixNano(), pruneBatch)...)
			}
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k driver.Key
				if err := rows.Scan(&k.Backend, &k.Thread, &k.Turn, &k.Call); err != nil {
					return err
				}
				if lastHere == nil || keyLess(*lastHere, k) {
					lastHere = &k
				}
				n++
			}
			return rows.Err()
		}})
		if err != nil {
			return total, j.opError("prune", err)
		}
		total, last = total+n, lastHere
		if n < pruneBatch {
			err := j.w.q.Do(ctx, &op{run: func(ctx context.Context) error {
				if _, err := j.conn.ExecContext(ctx, `DELETE FROM `+approvalsTable+` AS e WHERE decided < ? AND NOT `+liveRun, before.UnixNano()); err != nil {
					return err
				}
				if _, err := j.conn.ExecContext(ctx, `DELETE FROM `+notesTable+` AS e WHERE updated < ? AND NOT `+liveRun, before.UnixNano()); err != nil {
					return err
				}
				_, err := j.conn.ExecContext(ctx, `DELETE FROM `+runsTable+` WHERE state IN ('finished', 'failed', 'continued') AND updated < ?`, before.UnixNano())
				return err
			}})
			if err != nil {
				return total, j.opError("prune approvals and notes", err)
			}
			return total, nil
		}
	}
}

// liveRun holds, in a statement on the row e of a thread's entry or
// approval, when the thread has a run that is not over (running, or
// awaiting approval), which may still need it.
const liveRun = `EXISTS (SELECT 1 FROM ` + runsTable + ` AS r
	WHERE r.backend = e.backend AND r.thread = e.thread AND r.state IN ('running', 'awaiting_approval'))`

// unneeded holds, in a statement on the row e of an entry with a result,
// when no run needs it any more: its thread's run is over (a run not over
// needs its results sent too, for a resume whose read was stale).
const unneeded = `NOT ` + liveRun

// keyLess orders keys as SQLite's BINARY collation orders the primary key.
func keyLess(a, b driver.Key) bool {
	return cmp.Or(strings.Compare(a.Backend, b.Backend), strings.Compare(a.Thread, b.Thread), strings.Compare(a.Turn, b.Turn), strings.Compare(a.Call, b.Call)) < 0
}

type scanner interface{ Scan(dest ...any) error }

// collect reads the rows a query returned (err: its error) with scan, and
// closes them.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanEntry(row scanner) (driver.Entry, error) {
	var (
		e                      driver.Entry
		state                  string
		result                 sql.NullString
		lease, created, update int64
	)
	err := row.Scan(&e.Key.Backend, &e.Key.Thread, &e.Key.Turn, &e.Key.Call, &e.Digest, &e.IdempotencyKey, &state, &e.Owner, &lease, &result, &created, &update)
	if err != nil {
		return e, err
	}
	if e.State, err = record.ParseState(state); err != nil {
		return e, err
	}
	var column *string
	if result.Valid {
		column = &result.String
	}
	if e.Result, err = record.EntryResult(e.Key, e.State, column); err != nil {
		return e, err
	}
	e.LeaseUntil, e.Created, e.Updated = time.Unix(0, lease), time.Unix(0, created), time.Unix(0, update)
	return e, nil
}
