package pgjournal

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/journal/driver"
)

var _ driver.Runs = (*Journal)(nil)

const runColumns = `backend, thread, state, owner, lease_until, options, error, created, updated`

// PutRun implements [driver.Runs]: one upsert, conditional on the record
// not running under another owner's lease.
func (j *Journal) PutRun(ctx context.Context, r driver.Run) error {
	var lease *time.Time
	if !r.LeaseUntil.IsZero() {
		lease = &r.LeaseUntil
	}
	tag, err := j.exec(ctx, true, runLock(r.Backend, r.Thread), `INSERT INTO `+j.t.runs+` AS r (`+runColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())
		ON CONFLICT (backend, thread) DO UPDATE SET state = excluded.state, owner = excluded.owner, lease_until = excluded.lease_until,
			options = excluded.options, error = excluded.error, updated = excluded.updated
		WHERE r.state <> 'running' OR r.owner = excluded.owner OR coalesce(r.lease_until <= now(), true)`,
		r.Backend, r.Thread, string(r.State), r.Owner, lease, r.Options, r.Error)
	return j.changedOne("put run", tag, err)
}

// EndRun implements [driver.Runs]: a conditional UPDATE, synced under
// Full only (a lost end leaves a record "running" whose takeover finds the
// thread's answer and runs nothing).
func (j *Journal) EndRun(ctx context.Context, backend, thread, owner string, state driver.RunState, errText string) error {
	tag, err := j.exec(ctx, j.sync == Full, runLock(backend, thread), `UPDATE `+j.t.runs+` SET state = $1, error = $2, lease_until = NULL, updated = now()
		WHERE backend = $3 AND thread = $4 AND owner = $5`, string(state), errText, backend, thread, owner)
	return j.changedOne("end run", tag, err)
}

// MoveRun implements [driver.Runs]: one conditional UPDATE of the
// record's key, synced (it records the run's thread).
func (j *Journal) MoveRun(ctx context.Context, backend, from, to, owner, options string) error {
	tag, err := j.exec(ctx, true, runLock(backend, from), `UPDATE `+j.t.runs+` SET thread = $1, options = $2, updated = now()
		WHERE backend = $3 AND thread = $4 AND state = 'running' AND owner = $5`, to, options, backend, from, owner)
	return j.changedOne("move run", tag, err)
}

// RenewRun implements [driver.Runs]: a conditional UPDATE, never synced
// (a lost renewal costs a takeover, never a result).
func (j *Journal) RenewRun(ctx context.Context, backend, thread, owner string, lease time.Duration) error {
	tag, err := j.exec(ctx, false, runLock(backend, thread), `UPDATE `+j.t.runs+` SET lease_until = now() + $1 * interval '1 microsecond', updated = now()
		WHERE backend = $2 AND thread = $3 AND state = 'running' AND owner = $4`, lease.Microseconds(), backend, thread, owner)
	return j.changedOne("renew run", tag, err)
}

// WakeRun implements [driver.Runs]: a conditional UPDATE, synced (it
// hands the run to a worker).
func (j *Journal) WakeRun(ctx context.Context, backend, thread, owner string, lease time.Duration) (bool, error) {
	tag, err := j.exec(ctx, true, runLock(backend, thread), `UPDATE `+j.t.runs+` SET state = 'running', owner = $1, lease_until = now() + $2 * interval '1 microsecond', updated = now()
		WHERE backend = $3 AND thread = $4 AND state = 'awaiting_approval'`, owner, lease.Microseconds(), backend, thread)
	if err != nil {
		return false, j.opError("wake run", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimRuns implements [driver.Runs]: the expired runs are locked with FOR
// UPDATE SKIP LOCKED, so that workers claiming at once take different
// ones, and updated in the same statement.
func (j *Journal) ClaimRuns(ctx context.Context, backend, owner string, lease time.Duration, limit int) ([]driver.Run, error) {
	j.count(true)
	rows, err := j.pool.Query(ctx, `UPDATE `+j.t.runs+` AS r SET owner = $1, lease_until = now() + $2 * interval '1 microsecond', updated = now()
		FROM (SELECT backend, thread FROM `+j.t.runs+` WHERE backend = $3 AND state = 'running' AND lease_until <= now()
			ORDER BY lease_until, thread LIMIT $4 FOR UPDATE SKIP LOCKED) AS due
		WHERE r.backend = due.backend AND r.thread = due.thread
		RETURNING r.backend, r.thread, r.state, r.owner, r.lease_until, r.options, r.error, r.created, r.updated`,
		owner, lease.Microseconds(), backend, max(limit, 0))
	if err != nil {
		return nil, j.opError("claim runs", err)
	}
	out, err := collectRuns(rows)
	if err != nil {
		return nil, j.opError("claim runs", err)
	}
	return out, nil
}

// ListRuns implements [driver.Runs].
func (j *Journal) ListRuns(ctx context.Context, backend string, state driver.RunState, limit int) ([]driver.Run, error) {
	rows, err := j.pool.Query(ctx, `SELECT `+runColumns+` FROM `+j.t.runs+`
		WHERE ($1 = '' OR backend = $1) AND ($2 = '' OR state = $2) ORDER BY created, thread LIMIT $3`,
		backend, string(state), max(limit, 0))
	if err != nil {
		return nil, j.opError("list runs", err)
	}
	out, err := collectRuns(rows)
	if err != nil {
		return nil, j.opError("list runs", err)
	}
	return out, nil
}

// collectRuns reads the runs of rows, and closes them.
func collectRuns(rows pgx.Rows) ([]driver.Run, error) {
	return pgx.AppendRows([]driver.Run(nil), rows, func(row pgx.CollectableRow) (driver.Run, error) {
		var (
			r     driver.Run
			state string
			lease *time.Time
		)
		if err := row.Scan(&r.Backend, &r.Thread, &state, &r.Owner, &lease, &r.Options, &r.Error, &r.Created, &r.Updated); err != nil {
			return driver.Run{}, err
		}
		r.State = driver.RunState(state)
		if lease != nil {
			r.LeaseUntil = *lease
		}
		return r, nil
	})
}

var _ driver.Entries = (*Journal)(nil)

// ListEntries implements [driver.Entries]: one SELECT, after the submitted
// marks not written yet; "in doubt" is by the server's clock.
func (j *Journal) ListEntries(ctx context.Context, f driver.EntryFilter, limit int) ([]driver.Entry, error) {
	if err := j.w.q.Settle(ctx); err != nil { // the submitted marks not written yet
		return nil, j.opError("mark submitted", err)
	}
	state := ""
	if f.State != 0 {
		state = f.State.String()
	}
	rows, err := j.pool.Query(ctx, `SELECT `+columns+` FROM `+j.t.entries+`
		WHERE ($1 = '' OR backend = $1) AND ($2 = '' OR thread = $2) AND ($3 = '' OR state = $3)
			AND (NOT $4 OR (state = 'started' AND lease_until <= now()))
		ORDER BY updated, call_id LIMIT $5`,
		f.Backend, f.Thread, state, f.InDoubt, max(limit, 0))
	if err != nil {
		return nil, j.opError("list entries", err)
	}
	out, err := pgx.AppendRows([]driver.Entry(nil), rows, func(row pgx.CollectableRow) (driver.Entry, error) { return scanEntry(row, nil) })
	if err != nil {
		return nil, j.opError("list entries", err)
	}
	return out, nil
}
