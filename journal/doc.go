// Package journal opens a durable results journal (a journal/driver.Journal)
// from a URL, so that a program chooses where its journal lives by
// configuration alone. Package adapter calls [Open] with the
// TOOLRELAY_JOURNAL setting.
//
// Like database/sql, this package knows no store: each store's package
// registers its URL schemes ([Register]) from an init function, and a
// program links the stores it imports. Package sqlitejournal keeps the
// journal in an SQLite file, for one machine (import _
// "github.com/toolrelay/toolrelay/journal/sqlitejournal" for sqlite: URLs);
// package pgjournal keeps it in PostgreSQL, for fleets of workers (import _
// "github.com/toolrelay/toolrelay/journal/pgjournal" for postgres: URLs).
// Opening a URL of a store the program does not link fails with code
// Unimplemented and names the import to add. Third-party stores register
// schemes of their own. Package journaltest checks any journal against the
// contract the runner relies on. Each store's package doc says what
// survives a process kill and a power loss.
//
// # URLs
//
//	memory (or empty)                the in-memory journal of core: it survives
//	                                 disconnects, not the process
//	sqlite:///absolute/path/file.db  an SQLite file (created if missing)
//	sqlite:relative/path/file.db     an SQLite file, relative to the working directory
//	postgres://user@host:5432/db     a PostgreSQL database (also postgresql://)
//
// sqlite://name.db (two slashes) is refused: its file name would be read as
// a host name. Paths are percent-decoded. An SQLite URL takes these
// parameters:
//
//	busy_timeout=5s        how long to wait for another process's lock (a Go duration)
//	synchronous=claims     claims (the default), full or normal: see package sqlitejournal
//	check=off              skip the integrity check at open
//
// A PostgreSQL URL is handed to pgx (so sslmode, connect_timeout,
// pool_max_conns and the rest work as pgx documents them), less three
// parameters of the journal's own:
//
//	toolrelay_schema=name         the schema of the journal's tables (created if missing)
//	toolrelay_table=name          the journal's table (default toolrelay_journal)
//	toolrelay_synchronous=claims  claims (the default) or full: see package pgjournal
//
// Credentials belong in the URL only as pgx reads them (a password there,
// or PGPASSWORD, or a .pgpass file); errors never show the password. An
// error names the URL with its password and every secret-looking
// parameter (password, sslpassword, token, key…) masked, and any value,
// name, user, host or path that repeats one of them, or, when the URL
// does not parse, only its scheme; PostgreSQL key=value settings
// (host=… password=…) are not a journal URL, and are refused without
// being shown.
//
// # Retention
//
// Finished entries are kept until pruned: driver.Journal.Prune deletes
// those finished before a given time, on demand, and [StartPruning] does it
// periodically for a given retention (package adapter starts it when
// TOOLRELAY_JOURNAL_RETENTION is set). Whatever the retention, a prune
// never takes what a run that is not over may still need: the claims of
// calls under way, and, of a thread whose run is running or awaiting
// approval, the results not yet sent to the service and the decisions
// not yet acted on (a short retention cannot make a paused run run a
// call twice). A run that ended with an error keeps its unsent results
// for the retention only: resume it before then.
package journal
