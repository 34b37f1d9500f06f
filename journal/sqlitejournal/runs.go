package sqlitejournal

import (
	"context"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

var _ driver.Runs = (*Journal)(nil)

const runColumns = `backend, thread, state, owner, lease_until, options, error, created, updated`

// PutRun implements [driver.Runs]: an upsert, conditional on the record
// not running under another owner's lease, synced as claims are (a run
// record is what lets another worker find a dead one's run).
func (j *Journal) PutRun(ctx context.Context, r driver.Run) error {
	now := time.Now().UnixNano()
	return j.owned(ctx, "put run", Claims, func(ctx context.Context) (int64, error) {
		return affected(j.conn.ExecContext(ctx, `INSERT INTO `+runsTable+` (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (backend, thread) DO UPDATE SET state = excluded.state, owner = excluded.owner, lease_until = excluded.lease_until,
				options = excluded.options, error = excluded.error, updated = excluded.updated
			WHERE `+runsTable+`.state <> 'running' OR `+runsTable+`.owner = excluded.owner OR `+runsTable+`.lease_until <= ?`,
			r.Backend, r.Thread, string(r.State), r.Owner, unixOrZero(r.LeaseUntil), r.Options, r.Error, now, now, now))
	})
}

// EndRun implements [driver.Runs]: a conditional UPDATE, synced under
// Full only (a lost end leaves a record "running" whose takeover finds the
// thread's answer and runs nothing).
func (j *Journal) EndRun(ctx context.Context, backend, thread, owner string, state driver.RunState, errText string) error {
	return j.owned(ctx, "end run", Full, func(ctx context.Context) (int64, error) {
		return affected(j.conn.ExecContext(ctx, `UPDATE `+runsTable+` SET state = ?, error = ?, lease_until = 0, updated = ? WHERE backend = ? AND thread = ? AND owner = ?`,
			string(state), errText, time.Now().UnixNano(), backend, thread, owner))
	})
}

// MoveRun implements [driver.Runs]: one conditional UPDATE of the
// record's key, synced as claims are (it records the run's thread).
func (j *Journal) MoveRun(ctx context.Context, backend, from, to, owner, options string) error {
	return j.owned(ctx, "move run", Claims, func(ctx context.Context) (int64, error) {
		return affected(j.conn.ExecContext(ctx, `UPDATE OR REPLACE `+runsTable+` SET thread = ?, options = ?, updated = ?
			WHERE backend = ? AND thread = ? AND state = 'running' AND owner = ?`,
			to, options, time.Now().UnixNano(), backend, from, owner))
	})
}

// RenewRun implements [driver.Runs]: a conditional UPDATE, not synced (a
// lost renewal costs a takeover, never a result).
func (j *Journal) RenewRun(ctx context.Context, backend, thread, owner string, lease time.Duration) error {
	return j.owned(ctx, "renew run", "", func(ctx context.Context) (int64, error) {
		now := time.Now()
		return affected(j.conn.ExecContext(ctx, `UPDATE `+runsTable+` SET lease_until = ?, updated = ? WHERE backend = ? AND thread = ? AND state = 'running' AND owner = ?`,
			now.Add(lease).UnixNano(), now.UnixNano(), backend, thread, owner))
	})
}

// WakeRun implements [driver.Runs]: a conditional UPDATE, synced as
// claims are (it hands the run to a worker).
func (j *Journal) WakeRun(ctx context.Context, backend, thread, owner string, lease time.Duration) (bool, error) {
	var n int64
	err := j.w.q.Do(ctx, &op{syncFrom: Claims, run: func(ctx context.Context) (err error) {
		now := time.Now()
		n, err = affected(j.conn.ExecContext(ctx, `UPDATE `+runsTable+` SET state = 'running', owner = ?, lease_until = ?, updated = ?
			WHERE backend = ? AND thread = ? AND state = 'awaiting_approval'`,
			owner, now.Add(lease).UnixNano(), now.UnixNano(), backend, thread))
		return err
	}})
	if err != nil {
		return false, j.opError("wake run", err)
	}
	return n == 1, nil
}

// ClaimRuns implements [driver.Runs]: one UPDATE … RETURNING in a synced
// write transaction; the single writer makes it atomic.
func (j *Journal) ClaimRuns(ctx context.Context, backend, owner string, lease time.Duration, limit int) ([]driver.Run, error) {
	var out []driver.Run
	err := j.w.q.Do(ctx, &op{syncFrom: Claims, run: func(ctx context.Context) error {
		now := time.Now()
		rows, err := j.conn.QueryContext(ctx, `UPDATE `+runsTable+` SET owner = ?, lease_until = ?, updated = ?
			WHERE (backend, thread) IN (SELECT backend, thread FROM `+runsTable+`
				WHERE backend = ? AND state = 'running' AND lease_until <= ? ORDER BY lease_until, thread LIMIT ?)
			RETURNING `+runColumns,
			owner, now.Add(lease).UnixNano(), now.UnixNano(), backend, now.UnixNano(), max(limit, 0))
		out, err = collect(rows, err, scanRun)
		return err
	}})
	if err != nil {
		return nil, j.opError("claim runs", err)
	}
	return out, nil
}

// ListRuns implements [driver.Runs].
func (j *Journal) ListRuns(ctx context.Context, backend string, state driver.RunState, limit int) ([]driver.Run, error) {
	rows, err := j.db.QueryContext(ctx, `SELECT `+runColumns+` FROM `+runsTable+`
		WHERE (? = '' OR backend = ?) AND (? = '' OR state = ?) ORDER BY created, thread LIMIT ?`,
		backend, backend, string(state), string(state), max(limit, 0))
	out, err := collect(rows, err, scanRun)
	if err != nil {
		return nil, j.opError("list runs", err)
	}
	return out, nil
}

func scanRun(row scanner) (driver.Run, error) {
	var (
		r                       driver.Run
		state                   string
		lease, created, updated int64
	)
	if err := row.Scan(&r.Backend, &r.Thread, &state, &r.Owner, &lease, &r.Options, &r.Error, &created, &updated); err != nil {
		return driver.Run{}, err
	}
	r.State = driver.RunState(state)
	if lease != 0 {
		r.LeaseUntil = time.Unix(0, lease)
	}
	r.Created, r.Updated = time.Unix(0, created), time.Unix(0, updated)
	return r, nil
}

var _ driver.Entries = (*Journal)(nil)

// ListEntries implements [driver.Entries]: one SELECT on the reading
// connection, after the submitted marks not written yet.
func (j *Journal) ListEntries(ctx context.Context, f driver.EntryFilter, limit int) ([]driver.Entry, error) {
	j.w.q.Settle(ctx) // the submitted marks not written yet (a failure leaves them to a later write)
	state := ""
	if f.State != 0 {
		state = f.State.String()
	}
	inDoubt := 0
	if f.InDoubt {
		inDoubt = 1
	}
	rows, err := j.db.QueryContext(ctx, `SELECT `+columns+` FROM `+entriesTable+`
		WHERE (? = '' OR backend = ?) AND (? = '' OR thread = ?) AND (? = '' OR state = ?) AND (? = 0 OR (state = 'started' AND lease_until <= ?))
		ORDER BY updated, call LIMIT ?`,
		f.Backend, f.Backend, f.Thread, f.Thread, state, state, inDoubt, now(), max(limit, 0))
	out, err := collect(rows, err, scanEntry)
	if err != nil {
		return nil, j.opError("list entries", err)
	}
	return out, nil
}
