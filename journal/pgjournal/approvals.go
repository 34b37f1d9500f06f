package pgjournal

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/journal/driver"
)

var _ driver.Approvals = (*Journal)(nil)

// noteColumns are the columns of the notes table.
const noteColumns = `backend, thread, name, value, updated`

// approvalColumns are the columns of the approvals table, in the order
// scanApproval reads them; expires and decided are NULL for none.
const approvalColumns = `backend, thread, turn, call_id, tool, arguments, why, requested, expires, decided, approved, reason, edited, actor`

const approvalKey = `backend = $1 AND thread = $2 AND turn = $3 AND call_id = $4`

// RequestApproval implements [driver.Approvals]: one INSERT … ON CONFLICT
// DO NOTHING, reading the approval found instead.
func (j *Journal) RequestApproval(ctx context.Context, a driver.Approval) (driver.Approval, bool, error) {
	for range 10 {
		j.count(true)
		got, err := scanApproval(j.pool.QueryRow(ctx, `INSERT INTO `+j.t.approvals+` (`+approvalColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, false, '', NULL, '') ON CONFLICT DO NOTHING RETURNING `+approvalColumns,
			keyArgs(a.Key, a.Tool, string(a.Arguments), a.Why, a.Requested, nullTime(a.Expires))...))
		if err == nil {
			return got, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return driver.Approval{}, false, j.opError("request approval", err)
		}
		got, ok, err := j.GetApproval(ctx, a.Key)
		if err != nil || ok {
			return got, false, err
		}
		// Deleted as the statement ran: try again.
	}
	return driver.Approval{}, false, j.opError("request approval", errors.New("the approval kept changing under the request"))
}

// DecideApproval implements [driver.Approvals]: one conditional UPDATE
// (the approval still undecided), so of several deciders one wins.
func (j *Journal) DecideApproval(ctx context.Context, key driver.Key, d driver.Decision) (driver.Approval, error) {
	if d.At.IsZero() {
		d.At = time.Now()
	}
	var edited any
	if len(d.Arguments) > 0 {
		edited = string(d.Arguments)
	}
	var got driver.Approval
	err := j.queryRow(ctx, j.sync == Full, lockOf('a', key.Backend, key.Thread, key.Turn, key.Call), `UPDATE `+j.t.approvals+` SET decided = $5, approved = $6, reason = $7, edited = $8, actor = $9
		WHERE `+approvalKey+` AND decided IS NULL RETURNING `+approvalColumns, keyArgs(key, d.At, d.Approved, d.Reason, edited, d.Actor), func(row pgx.Row) (err error) {
		got, err = scanApproval(row)
		return err
	})
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return driver.Approval{}, j.opError("decide approval", err)
	}
	got, ok, err := j.GetApproval(ctx, key)
	switch {
	case err != nil:
		return driver.Approval{}, err
	case !ok:
		return driver.Approval{}, driver.ErrNoApproval
	}
	return got, driver.ErrDecided
}

// GetApproval implements [driver.Approvals].
func (j *Journal) GetApproval(ctx context.Context, key driver.Key) (driver.Approval, bool, error) {
	a, err := scanApproval(j.pool.QueryRow(ctx, `SELECT `+approvalColumns+` FROM `+j.t.approvals+` WHERE `+approvalKey, keyArgs(key)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Approval{}, false, nil
	}
	if err != nil {
		return driver.Approval{}, false, j.opError("get approval", err)
	}
	return a, true, nil
}

// ListApprovals implements [driver.Approvals].
func (j *Journal) ListApprovals(ctx context.Context, backend, thread string) ([]driver.Approval, error) {
	return j.listApprovals(ctx, "list approvals", `WHERE backend = $1 AND thread = $2 ORDER BY requested, turn, call_id`, backend, thread)
}

// ExpiredApprovals implements [driver.Approvals].
func (j *Journal) ExpiredApprovals(ctx context.Context, backend string, t time.Time, limit int) ([]driver.Approval, error) {
	return j.listApprovals(ctx, "expired approvals", `WHERE backend = $1 AND decided IS NULL AND expires IS NOT NULL AND expires <= $2
		ORDER BY expires, thread, turn, call_id LIMIT $3`, backend, t, max(limit, 0))
}

// listApprovals returns the approvals a query selects (where is its
// clause from WHERE on); op names it in errors.
func (j *Journal) listApprovals(ctx context.Context, op, where string, args ...any) ([]driver.Approval, error) {
	rows, err := j.pool.Query(ctx, `SELECT `+approvalColumns+` FROM `+j.t.approvals+` `+where, args...)
	if err != nil {
		return nil, j.opError(op, err)
	}
	out, err := pgx.AppendRows([]driver.Approval(nil), rows, func(row pgx.CollectableRow) (driver.Approval, error) { return scanApproval(row) })
	if err != nil {
		return nil, j.opError(op, err)
	}
	return out, nil
}

func scanApproval(row pgx.Row) (driver.Approval, error) {
	var (
		a                driver.Approval
		args             string
		expires, decided *time.Time
		approved         bool
		reason, actor    string
		edited           *string
	)
	err := row.Scan(&a.Key.Backend, &a.Key.Thread, &a.Key.Turn, &a.Key.Call, &a.Tool, &args, &a.Why, &a.Requested, &expires, &decided, &approved, &reason, &edited, &actor)
	if err != nil {
		return driver.Approval{}, err
	}
	a.Arguments = []byte(args)
	if expires != nil {
		a.Expires = *expires
	}
	if decided != nil {
		a.Decision = &driver.Decision{Approved: approved, Reason: reason, Actor: actor, At: *decided}
		if edited != nil {
			a.Decision.Arguments = []byte(*edited)
		}
	}
	return a, nil
}

// nullTime returns t, or nil for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

var _ driver.Notes = (*Journal)(nil)

// SetNote implements [driver.Notes]: one upsert.
func (j *Journal) SetNote(ctx context.Context, backend, thread, name, value string) error {
	_, err := j.exec(ctx, j.sync == Full, lockOf('n', backend, thread, name), `INSERT INTO `+j.t.notes+` (`+noteColumns+`) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (backend, thread, name) DO UPDATE SET value = excluded.value, updated = excluded.updated`, backend, thread, name, value)
	if err != nil {
		return j.opError("set note", err)
	}
	return nil
}

// Note implements [driver.Notes].
func (j *Journal) Note(ctx context.Context, backend, thread, name string) (string, bool, error) {
	var v string
	err := j.pool.QueryRow(ctx, `SELECT value FROM `+j.t.notes+` WHERE backend = $1 AND thread = $2 AND name = $3`, backend, thread, name).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, j.opError("read note", err)
	}
	return v, true, nil
}
