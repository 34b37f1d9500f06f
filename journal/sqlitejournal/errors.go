package sqlitejournal

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolrelay/toolrelay/errcode"
)

// openError returns the error of a failed Open: a *core.Error saying, in
// words, what is wrong with the file, wrapping the driver's error.
func openError(path string, o *Options, err error) error {
	op := "sqlitejournal: open " + path
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return &errcode.Error{Code: ce.Code, Op: op, Err: ce.Err}
	}
	code := errcode.FailedPrecondition
	var why string
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		why = fmt.Sprintf("the file is locked by another connection, which held the lock longer than the busy timeout (%v)", o.BusyTimeout)
	case sqlite3.SQLITE_NOTADB:
		why = "the file is not an SQLite database (it was left as it is)"
	case sqlite3.SQLITE_CORRUPT:
		why = "the file is corrupt (it was left as it is)"
	case sqlite3.SQLITE_CANTOPEN:
		why = "the file cannot be opened or created (does its directory exist, and may this process write there?)"
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		code, why = errcode.PermissionDenied, "the file cannot be written"
	case sqlite3.SQLITE_FULL:
		code, why = errcode.ResourceExhausted, "the disk is full"
	case sqlite3.SQLITE_IOERR:
		why = "an I/O error occurred"
	default:
		code = errcode.Of(err)
		why = "cannot open the journal"
	}
	return &errcode.Error{Code: code, Op: op, Err: fmt.Errorf("%s: %w", why, err)}
}

// opError wraps the error of an operation on an open journal. The driver's
// error (a *sqlite.Error) stays reachable with errors.As.
func (j *Journal) opError(op string, err error) error {
	code := errcode.Of(err)
	if errors.Is(err, errClosed) {
		code = errcode.FailedPrecondition
	}
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		// As at open (see package errcode's table).
		err = fmt.Errorf("the file is locked by another connection: %w", err)
		code = errcode.FailedPrecondition
	case sqlite3.SQLITE_FULL:
		code = errcode.ResourceExhausted
	case sqlite3.SQLITE_READONLY:
		code = errcode.PermissionDenied
	}
	return &errcode.Error{Code: code, Op: "sqlitejournal: " + op, Err: err}
}

// sqliteCode returns the primary result code of err, if it is an SQLite
// error, else 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}
