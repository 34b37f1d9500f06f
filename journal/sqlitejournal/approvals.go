package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

var _ driver.Approvals = (*Journal)(nil)

// noteColumns are the columns of the notes table.
const noteColumns = `backend, thread, name, value, updated`

// approvalColumns are the columns of the approvals table, in the order
// scanApproval reads them. Times are Unix nanoseconds; expires is 0 for
// none, decided NULL while the approval is pending.
const approvalColumns = `backend, thread, turn, call, tool, arguments, why, requested, expires, decided, approved, reason, edited, actor`

// RequestApproval implements [driver.Approvals]: one INSERT … ON CONFLICT
// DO NOTHING, then a SELECT when the key was there, in one synced write
// transaction.
func (j *Journal) RequestApproval(ctx context.Context, a driver.Approval) (driver.Approval, bool, error) {
	var (
		got     driver.Approval
		created bool
	)
	err := j.w.q.Do(ctx, &op{syncFrom: Claims, run: func(ctx context.Context) error {
		var err error
		got, err = scanApproval(j.conn.QueryRowContext(ctx, `INSERT INTO `+approvalsTable+` (`+approvalColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, '', NULL, '') ON CONFLICT DO NOTHING RETURNING `+approvalColumns,
			keyArgs(a.Key, a.Tool, string(a.Arguments), a.Why, a.Requested.UnixNano(), unixOrZero(a.Expires))...))
		if created = err == nil; created || !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		got, err = scanApproval(j.conn.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM `+approvalsTable+` WHERE `+keyMatch, keyArgs(a.Key)...))
		return err
	}})
	if err != nil {
		return driver.Approval{}, false, j.opError("request approval", err)
	}
	return got, created, nil
}

// DecideApproval implements [driver.Approvals]: a conditional UPDATE (the
// approval still pending), then a SELECT, in one synced write transaction.
func (j *Journal) DecideApproval(ctx context.Context, key driver.Key, d driver.Decision) (driver.Approval, error) {
	var (
		got     driver.Approval
		found   bool
		decided bool
	)
	if d.At.IsZero() {
		d.At = time.Now()
	}
	var edited any
	if len(d.Arguments) > 0 {
		edited = string(d.Arguments)
	}
	err := j.w.q.Do(ctx, &op{syncFrom: Full, run: func(ctx context.Context) error {
		res, err := j.conn.ExecContext(ctx, `UPDATE `+approvalsTable+` SET decided = ?, approved = ?, reason = ?, edited = ?, actor = ?
			WHERE `+keyMatch+` AND decided IS NULL`, append([]any{d.At.UnixNano(), d.Approved, d.Reason, edited, d.Actor}, keyArgs(key)...)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		decided = n == 1
		got, err = scanApproval(j.conn.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM `+approvalsTable+` WHERE `+keyMatch, keyArgs(key)...))
		if found = err == nil; found || errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}})
	switch {
	case err != nil:
		return driver.Approval{}, j.opError("decide approval", err)
	case !found:
		return driver.Approval{}, driver.ErrNoApproval
	case !decided:
		return got, driver.ErrDecided
	}
	return got, nil
}

// GetApproval implements [driver.Approvals].
func (j *Journal) GetApproval(ctx context.Context, key driver.Key) (driver.Approval, bool, error) {
	a, err := scanApproval(j.db.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM `+approvalsTable+` WHERE `+keyMatch, keyArgs(key)...))
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Approval{}, false, nil
	}
	if err != nil {
		return driver.Approval{}, false, j.opError("get approval", err)
	}
	return a, true, nil
}

// ListApprovals implements [driver.Approvals].
func (j *Journal) ListApprovals(ctx context.Context, backend, thread string) ([]driver.Approval, error) {
	return j.listApprovals(ctx, "list approvals", `WHERE backend = ? AND thread = ? ORDER BY requested, turn, call`, backend, thread)
}

// ExpiredApprovals implements [driver.Approvals].
func (j *Journal) ExpiredApprovals(ctx context.Context, backend string, t time.Time, limit int) ([]driver.Approval, error) {
	return j.listApprovals(ctx, "expired approvals", `WHERE backend = ? AND decided IS NULL AND expires <> 0 AND expires <= ?
		ORDER BY expires, thread, turn, call LIMIT ?`, backend, t.UnixNano(), max(limit, 0))
}

// listApprovals returns the approvals a query selects (where is its
// clause from WHERE on); op names it in errors.
func (j *Journal) listApprovals(ctx context.Context, op, where string, args ...any) ([]driver.Approval, error) {
	rows, err := j.db.QueryContext(ctx, `SELECT `+approvalColumns+` FROM `+approvalsTable+` `+where, args...)
	out, err := collect(rows, err, scanApproval)
	if err != nil {
		return nil, j.opError(op, err)
	}
	return out, nil
}

func scanApproval(row scanner) (driver.Approval, error) {
	var (
		a                  driver.Approval
		args               string
		requested, expires int64
		decided            sql.NullInt64
		approved           bool
		reason, actor      string
		edited             sql.NullString
	)
	err := row.Scan(&a.Key.Backend, &a.Key.Thread, &a.Key.Turn, &a.Key.Call, &a.Tool, &args, &a.Why, &requested, &expires, &decided, &approved, &reason, &edited, &actor)
	if err != nil {
		return driver.Approval{}, err
	}
	a.Arguments = []byte(args)
	a.Requested = time.Unix(0, requested)
	if expires != 0 {
		a.Expires = time.Unix(0, expires)
	}
	if decided.Valid {
		a.Decision = &driver.Decision{Approved: approved, Reason: reason, Actor: actor, At: time.Unix(0, decided.Int64)}
		if edited.Valid {
			a.Decision.Arguments = []byte(edited.String)
		}
	}
	return a, nil
}

// unixOrZero returns t in Unix nanoseconds, or 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

var _ driver.Notes = (*Journal)(nil)

// SetNote implements [driver.Notes]: an upsert, synced only under
// Synchronous Full (a note lost to a power cut costs a trace link, not a
// result).
func (j *Journal) SetNote(ctx context.Context, backend, thread, name, value string) error {
	err := j.w.q.Do(ctx, &op{syncFrom: Full, run: func(ctx context.Context) error {
		_, err := j.setNote.ExecContext(ctx, backend, thread, name, value, time.Now().UnixNano())
		return err
	}})
	if err != nil {
		return j.opError("set note", err)
	}
	return nil
}

// Note implements [driver.Notes].
func (j *Journal) Note(ctx context.Context, backend, thread, name string) (string, bool, error) {
	var v string
	err := j.db.QueryRowContext(ctx, `SELECT value FROM `+notesTable+` WHERE backend = ? AND thread = ? AND name = ?`, backend, thread, name).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, j.opError("read note", err)
	}
	return v, true, nil
}
