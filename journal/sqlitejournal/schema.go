package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/internal/shape"
)

// SchemaVersion is the version of the tables this package reads and writes.
// A file whose version table holds another version is refused at open.
const SchemaVersion = 4

// The tables. The version table holds one row: the schema version of the
// file. Times are Unix nanoseconds; result is JSON text. Version 2 added
// the approvals table, version 3 the notes table, version 4 the runs
// table (a file of an older version is migrated at open).
const (
	entriesTable   = "toolrelay_journal"
	versionTable   = "toolrelay_journal_version"
	approvalsTable = "toolrelay_journal_approvals"
	notesTable     = "toolrelay_journal_notes"
	runsTable      = "toolrelay_journal_runs"
)

// runsSchema creates the runs table (schema version 4).
const runsSchema = `CREATE TABLE ` + runsTable + ` (
		backend     TEXT NOT NULL,
		thread      TEXT NOT NULL,
		state       TEXT NOT NULL,
		owner       TEXT NOT NULL,
		lease_until INTEGER NOT NULL,
		options     TEXT NOT NULL,
		error       TEXT NOT NULL,
		created     INTEGER NOT NULL,
		updated     INTEGER NOT NULL,
		PRIMARY KEY (backend, thread)
	) WITHOUT ROWID`

// notesSchema creates the notes table (schema version 3).
const notesSchema = `CREATE TABLE ` + notesTable + ` (
		backend TEXT NOT NULL,
		thread  TEXT NOT NULL,
		name    TEXT NOT NULL,
		value   TEXT NOT NULL,
		updated INTEGER NOT NULL,
		PRIMARY KEY (backend, thread, name)
	) WITHOUT ROWID`

// migrations[v] moves a file of schema version v to version v+1: each
// only adds a table.
var migrations = map[int]string{1: approvalsSchema, 2: notesSchema, 3: runsSchema}

// approvalsSchema creates the approvals table (schema version 2).
const approvalsSchema = `CREATE TABLE ` + approvalsTable + ` (
		backend   TEXT NOT NULL,
		thread    TEXT NOT NULL,
		turn      TEXT NOT NULL,
		call      TEXT NOT NULL,
		tool      TEXT NOT NULL,
		arguments TEXT NOT NULL,
		why       TEXT NOT NULL,
		requested INTEGER NOT NULL,
		expires   INTEGER NOT NULL,
		decided   INTEGER,
		approved  INTEGER NOT NULL,
		reason    TEXT NOT NULL,
		edited    TEXT,
		actor     TEXT NOT NULL,
		PRIMARY KEY (backend, thread, turn, call)
	) WITHOUT ROWID`

var schema = []string{
	`CREATE TABLE ` + entriesTable + ` (
		backend         TEXT NOT NULL,
		thread          TEXT NOT NULL,
		turn            TEXT NOT NULL,
		call            TEXT NOT NULL,
		digest          TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		state           TEXT NOT NULL CHECK (state IN ('started', 'succeeded', 'failed', 'submitted')),
		owner           TEXT NOT NULL,
		lease_until     INTEGER NOT NULL,
		result          TEXT,
		created         INTEGER NOT NULL,
		updated         INTEGER NOT NULL,
		PRIMARY KEY (backend, thread, turn, call)
	) WITHOUT ROWID`,
	approvalsSchema,
	notesSchema,
	runsSchema,
	`CREATE TABLE ` + versionTable + ` (version INTEGER NOT NULL)`,
	fmt.Sprintf(`INSERT INTO %s (version) VALUES (%d)`, versionTable, SchemaVersion),
}

// ensureSchema creates the tables of a new journal, or checks the version
// of an existing one. It runs in one write transaction (BEGIN IMMEDIATE), so
// that processes opening a new file at once create the tables once.
func ensureSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	tables := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?)`, entriesTable, versionTable)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		tables[name] = true
	}
	if err := rows.Close(); err != nil {
		return err
	}
	switch {
	case tables[versionTable]:
		var v int
		err := tx.QueryRowContext(ctx, `SELECT version FROM `+versionTable).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return errcode.Errorf(errcode.FailedPrecondition, "the table %s is empty: the file was not written by toolrelay, or was damaged", versionTable)
		}
		if err != nil {
			return err
		}
		if _, ok := migrations[v]; !ok {
			return checkVersion(v)
		}
		for ; v < SchemaVersion; v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate the journal to schema version %d: %w", v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+versionTable+` SET version = ?`, SchemaVersion); err != nil {
			return fmt.Errorf("migrate the journal to schema version %d: %w", SchemaVersion, err)
		}
		return tx.Commit()
	case tables[entriesTable]:
		return errcode.Errorf(errcode.FailedPrecondition, "the file has a %s table but no %s table: it was written by an unversioned (older) toolrelay, or by another program; this version reads schema version %d only", entriesTable, versionTable, SchemaVersion)
	}
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create the journal tables: %w", err)
		}
	}
	return tx.Commit()
}

// checkTables checks that every table the journal reads and writes is
// there with the columns it uses (see package shape): a table dropped or
// made by another program is refused at open, naming it.
func checkTables(ctx context.Context, db *sql.DB) error {
	cols := func(c string) []string { return strings.Split(c, ", ") }
	return shape.Check(ctx, func(ctx context.Context, stmt string) error {
		rows, err := db.QueryContext(ctx, stmt)
		if err != nil {
			return err
		}
		return rows.Close()
	}, SchemaVersion,
		shape.Table{Name: entriesTable, SQL: entriesTable, Columns: cols(columns)},
		shape.Table{Name: versionTable, SQL: versionTable, Columns: []string{"version"}},
		shape.Table{Name: approvalsTable, SQL: approvalsTable, Columns: cols(approvalColumns)},
		shape.Table{Name: notesTable, SQL: notesTable, Columns: cols(noteColumns)},
		shape.Table{Name: runsTable, SQL: runsTable, Columns: cols(runColumns)},
	)
}

func checkVersion(v int) error {
	switch {
	case v < SchemaVersion:
		return errcode.Errorf(errcode.FailedPrecondition, "the journal has schema version %d, older than version %d that this toolrelay reads; it cannot be migrated automatically: finish or drain the runs it holds with the toolrelay that wrote it, then start a new journal file", v, SchemaVersion)
	case v > SchemaVersion:
		return errcode.Errorf(errcode.FailedPrecondition, "the journal has schema version %d, written by a newer toolrelay; this one reads version %d only", v, SchemaVersion)
	}
	return nil
}
