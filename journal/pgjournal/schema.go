package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/internal/shape"
)

// SchemaVersion is the version of the tables this package reads and
// writes. A journal whose version table holds another version is refused
// at open.
const SchemaVersion = 4

// tables names the tables of one journal, quoted for SQL.
type tables struct {
	schema                                   string // unquoted; "" for the search path's
	entries, version, approvals, notes, runs string
	// name is the journal's qualified, unquoted name, for messages and
	// the advisory lock.
	name string
}

func newTables(schema, table string) tables {
	ident := func(name string) string {
		if schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{schema, name}.Sanitize()
	}
	name := table
	if schema != "" {
		name = schema + "." + table
	}
	return tables{schema: schema, entries: ident(table), version: ident(table + "_version"), approvals: ident(table + "_approvals"), notes: ident(table + "_notes"), runs: ident(table + "_runs"), name: name}
}

func (t tables) create() []string {
	return []string{
		`CREATE TABLE ` + t.entries + ` (
			backend         text NOT NULL,
			thread          text NOT NULL,
			turn            text NOT NULL,
			call_id         text NOT NULL,
			digest          text NOT NULL,
			idempotency_key text NOT NULL,
			state           text NOT NULL CHECK (state IN ('started', 'succeeded', 'failed', 'submitted')),
			owner           text NOT NULL,
			lease_until     timestamptz NOT NULL,
			result          text,
			created         timestamptz NOT NULL,
			updated         timestamptz NOT NULL,
			PRIMARY KEY (backend, thread, turn, call_id)
		) WITH (fillfactor = 70)`,
		t.createApprovals(),
		t.createNotes(),
		t.createRuns(),
		`CREATE TABLE ` + t.version + ` (version integer NOT NULL)`,
		fmt.Sprintf(`INSERT INTO %s (version) VALUES (%d)`, t.version, SchemaVersion),
	}
}

// liveRun holds, in a statement on the row e of a thread's entry or
// approval, when the thread has a run that is not over (running, or
// awaiting approval), which may still need it.
func (t tables) liveRun() string {
	return `EXISTS (SELECT FROM ` + t.runs + ` AS r
		WHERE r.backend = e.backend AND r.thread = e.thread AND r.state IN ('running', 'awaiting_approval'))`
}

// createApprovals creates the approvals table (schema version 2).
func (t tables) createApprovals() string {
	return `CREATE TABLE ` + t.approvals + ` (
			backend   text NOT NULL,
			thread    text NOT NULL,
			turn      text NOT NULL,
			call_id   text NOT NULL,
			tool      text NOT NULL,
			arguments text NOT NULL,
			why       text NOT NULL,
			requested timestamptz NOT NULL,
			expires   timestamptz,
			decided   timestamptz,
			approved  boolean NOT NULL,
			reason    text NOT NULL,
			edited    text,
			actor     text NOT NULL,
			PRIMARY KEY (backend, thread, turn, call_id)
		)`
}

// createNotes creates the notes table (schema version 3).
func (t tables) createNotes() string {
	return `CREATE TABLE ` + t.notes + ` (
			backend text NOT NULL,
			thread  text NOT NULL,
			name    text NOT NULL,
			value   text NOT NULL,
			updated timestamptz NOT NULL,
			PRIMARY KEY (backend, thread, name)
		)`
}

// createRuns creates the runs table (schema version 4), with an index for
// the claims of expired runs.
func (t tables) createRuns() string {
	return `CREATE TABLE ` + t.runs + ` (
			backend     text NOT NULL,
			thread      text NOT NULL,
			state       text NOT NULL,
			owner       text NOT NULL,
			lease_until timestamptz,
			options     text NOT NULL,
			error       text NOT NULL,
			created     timestamptz NOT NULL,
			updated     timestamptz NOT NULL,
			PRIMARY KEY (backend, thread)
		)`
}

// migrations returns, for each older schema version v, the statement that
// moves a journal to version v+1: each only adds a table.
func (t tables) migrations() map[int]string {
	return map[int]string{1: t.createApprovals(), 2: t.createNotes(), 3: t.createRuns()}
}

// migrate moves a journal of an older schema version to the current one
// (adding the tables it lacks), under the advisory lock, once whoever
// comes first.
func migrate(ctx context.Context, conn *pgx.Conn, t tables) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, t.lockKey()); err != nil {
		return err
	}
	var v int
	if err := tx.QueryRow(ctx, `SELECT version FROM `+t.version).Scan(&v); err != nil {
		return err
	}
	steps := t.migrations()
	if _, ok := steps[v]; !ok {
		if err := checkVersion(v); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	for ; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, steps[v]); err != nil {
			return fmt.Errorf("migrate the journal to schema version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE `+t.version+` SET version = $1`, SchemaVersion); err != nil {
		return fmt.Errorf("migrate the journal to schema version %d: %w", SchemaVersion, err)
	}
	return tx.Commit(ctx)
}

// lockKey is the key of the advisory lock that guards the creation of the
// journal's tables.
func (t tables) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("toolrelay journal " + t.name))
	return int64(h.Sum64())
}

// ensureSchema checks the version of the journal's tables, creating them
// (and the schema) first if they do not exist. The creation runs in a
// transaction holding an advisory lock, so that workers opening a new
// journal at once create it once.
func ensureSchema(ctx context.Context, conn *pgx.Conn, t tables) error {
	var v int
	err := conn.QueryRow(ctx, `SELECT version FROM `+t.version).Scan(&v)
	if _, old := t.migrations()[v]; err == nil && old {
		return migrate(ctx, conn, t)
	}
	if err == nil {
		return checkVersion(v)
	}
	if !errors.Is(err, pgx.ErrNoRows) && !isUndefined(err) {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, t.lockKey()); err != nil {
		return err
	}
	if t.schema != "" {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, t.schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{t.schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %s: %w", t.schema, err)
			}
		}
	}
	var hasEntries, hasVersion bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`, t.entries, t.version).Scan(&hasEntries, &hasVersion); err != nil {
		return err
	}
	switch {
	case hasVersion:
		err := tx.QueryRow(ctx, `SELECT version FROM `+t.version).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return errcode.Errorf(errcode.FailedPrecondition, "the table %s_version is empty: it was not written by toolrelay, or was damaged", t.name)
		}
		if err != nil {
			return err
		}
		if _, old := t.migrations()[v]; old {
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			return migrate(ctx, conn, t)
		}
		return checkVersion(v)
	case hasEntries:
		return errcode.Errorf(errcode.FailedPrecondition, "there is a table %s but no table %s_version: it was written by an unversioned (older) toolrelay, or by another program; this version reads schema version %d only", t.name, t.name, SchemaVersion)
	}
	for _, stmt := range t.create() {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create the journal tables: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// check checks that every table the journal reads and writes is there
// with the columns it uses, and that this user may read it (see package
// shape): a table dropped or made by another program is refused at open,
// naming it, rather than at the first claim.
func (t tables) check(ctx context.Context, conn *pgx.Conn) error {
	cols := func(c string) []string { return strings.Split(c, ", ") }
	name := func(suffix string) string { return t.name + suffix }
	return shape.Check(ctx, func(ctx context.Context, stmt string) error {
		_, err := conn.Exec(ctx, stmt)
		if err != nil {
			return &errcode.Error{Code: pgCode(err), Err: err}
		}
		return nil
	}, SchemaVersion,
		shape.Table{Name: name(""), SQL: t.entries, Columns: cols(columns)},
		shape.Table{Name: name("_version"), SQL: t.version, Columns: []string{"version"}},
		shape.Table{Name: name("_approvals"), SQL: t.approvals, Columns: cols(approvalColumns)},
		shape.Table{Name: name("_notes"), SQL: t.notes, Columns: cols(noteColumns)},
		shape.Table{Name: name("_runs"), SQL: t.runs, Columns: cols(runColumns)},
	)
}

func checkVersion(v int) error {
	switch {
	case v < SchemaVersion:
		return errcode.Errorf(errcode.FailedPrecondition, "the journal has schema version %d, older than version %d that this toolrelay reads; it cannot be migrated automatically: finish or drain the runs it holds with the toolrelay that wrote it, then start a new journal (another table or schema)", v, SchemaVersion)
	case v > SchemaVersion:
		return errcode.Errorf(errcode.FailedPrecondition, "the journal has schema version %d, written by a newer toolrelay; this one reads version %d only", v, SchemaVersion)
	}
	return nil
}
