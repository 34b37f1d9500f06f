package sqlitejournal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/journal/internal/group"
)

// newTestWriter returns a writer on a new file holding a table t (x).
func newTestWriter(t *testing.T) (*writer, *sql.DB) {
	t.Helper()
	return newTestWriterBusy(t, filepath.Join(t.TempDir(), "w.db"), DefaultBusyTimeout)
}

func newTestWriterBusy(t *testing.T, path string, busy time.Duration) (*writer, *sql.DB) {
	t.Helper()
	ctx := t.Context()
	db, err := sql.Open("sqlite", dsn(path, &Options{BusyTimeout: busy, Synchronous: Full}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x TEXT)"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWriter(ctx, conn, Full)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.close()
		w.closeStmts()
		conn.Close()
	})
	return w, db
}

func insert(conn *sql.Conn, x string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, "INSERT INTO t (x) VALUES (?)", x)
		return err
	}
}

func rowsOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT x FROM t ORDER BY x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var xs []string
	for rows.Next() {
		var x string
		rows.Scan(&x)
		xs = append(xs, x)
	}
	return xs
}

// hold makes the writer wait, in a write of its own, until release is
// called; writes made meanwhile queue up and go into one transaction.
func hold(t *testing.T, w *writer) (release func()) {
	t.Helper()
	started, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w.q.Do(t.Context(), &op{run: func(context.Context) error {
			close(started)
			<-proceed
			return nil
		}})
	}()
	<-started
	return func() {
		close(proceed)
		if err := <-done; err != nil {
			t.Errorf("held write: %v", err)
		}
	}
}

// waitQueued waits until n writes are queued.
func waitQueued(w *writer, n int) {
	for w.q.Len() < n {
		// The writes are sent by goroutines just started: let them run.
		runtime.Gosched()
	}
}

// TestWriterFailureIsolated checks that a write that fails in a shared
// transaction fails alone: the others of its batch are committed.
func TestWriterFailureIsolated(t *testing.T) {
	w, db := newTestWriter(t)
	release := hold(t, w)
	boom := errors.New("boom")
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			x := fmt.Sprint("row-", i)
			run := insert(w.conn, x)
			if i == 2 {
				run = func(ctx context.Context) error {
					if err := insert(w.conn, x)(ctx); err != nil {
						return err
					}
					return boom
				}
			}
			errs[i] = w.q.Do(t.Context(), &op{run: run})
		})
	}
	waitQueued(w, len(errs))
	release()
	wg.Wait()
	for i, err := range errs {
		if want := error(nil); i == 2 {
			if !errors.Is(err, boom) {
				t.Errorf("write %d: %v, want boom", i, err)
			}
		} else if err != want {
			t.Errorf("write %d: %v, want nil", i, err)
		}
	}
	if diff := cmp.Diff([]string{"row-0", "row-1", "row-3", "row-4"}, rowsOf(t, db)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestWriterManyQueued checks that writes queued beyond one transaction's
// bound are all made, by the transactions after it.
func TestWriterManyQueued(t *testing.T) {
	w, db := newTestWriter(t)
	release := hold(t, w)
	const n = maxBatch + 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = w.q.Do(t.Context(), &op{run: insert(w.conn, fmt.Sprint(i))}) })
	}
	waitQueued(w, n)
	release()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if rows := rowsOf(t, db); len(rows) != n {
		t.Errorf("%d rows, want %d", len(rows), n)
	}
	// The last leader hands the lead back once its writes are reported.
	w.q.WaitIdle()
	if queued := w.q.Len(); queued != 0 {
		t.Errorf("the writer is idle with %d writes queued", queued)
	}
}

// TestWriterWithdraw checks that a write whose context ends while it waits
// its turn is withdrawn: it returns the context's error and is never made,
// and the write queued after it still is.
func TestWriterWithdraw(t *testing.T) {
	w, db := newTestWriter(t)
	release := hold(t, w)
	ctx, cancel := context.WithCancel(t.Context())
	errc, next := make(chan error, 1), make(chan error, 1)
	go func() { errc <- w.q.Do(ctx, &op{run: insert(w.conn, "withdrawn")}) }()
	waitQueued(w, 1)
	go func() { next <- w.q.Do(t.Context(), &op{run: insert(w.conn, "next")}) }()
	waitQueued(w, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled write: %v, want context.Canceled", err)
	}
	release()
	if err := <-next; err != nil {
		t.Errorf("write queued after the withdrawn one: %v", err)
	}
	if err := w.q.Do(t.Context(), &op{run: insert(w.conn, "kept")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kept", "next"}, rowsOf(t, db)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestWriterClose checks that close lets the write under way finish, fails
// the queued ones, and that writes after it fail.
func TestWriterClose(t *testing.T) {
	w, db := newTestWriter(t)
	release := hold(t, w)
	errc := make(chan error, 1)
	go func() { errc <- w.q.Do(t.Context(), &op{run: insert(w.conn, "queued")}) }()
	waitQueued(w, 1)
	closed := make(chan struct{})
	go func() { w.close(); close(closed) }()
	for !w.q.Closed() {
		runtime.Gosched()
	}
	release()
	<-closed
	if err := <-errc; !errors.Is(err, errClosed) {
		t.Errorf("write queued at close: %v, want errClosed", err)
	}
	if err := w.q.Do(t.Context(), &op{run: insert(w.conn, "late")}); !errors.Is(err, errClosed) {
		t.Errorf("write after close: %v, want errClosed", err)
	}
	if rows := rowsOf(t, db); len(rows) != 0 {
		t.Errorf("rows = %v, want none", rows)
	}
}

// TestWriterLocked checks that when a transaction cannot begin (another
// connection holds the lock past the busy timeout), its writes all fail
// with that error at once, each not tried again alone.
func TestWriterLocked(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "w.db")
	w, db := newTestWriterBusy(t, path, 50*time.Millisecond)
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	var runs int
	batch := make([]*op, 4)
	for i := range batch {
		batch[i] = &op{run: func(context.Context) error { runs++; return nil }}
	}
	w.run(batch) // the writer is idle: no transaction is under way
	for i, o := range batch {
		if o.err == nil || sqliteCode(o.err) != 5 { // SQLITE_BUSY
			t.Errorf("write %d: %v, want SQLITE_BUSY", i, o.err)
		}
		if o.err != batch[0].err {
			t.Errorf("write %d failed with an error of its own (%v), want the transaction's", i, o.err)
		}
	}
	if runs != 0 {
		t.Errorf("%d writes ran, want none", runs)
	}
	conn.ExecContext(ctx, "ROLLBACK")
	if err := w.q.Do(ctx, &op{run: insert(w.conn, "after")}); err != nil {
		t.Errorf("write after the lock was released: %v", err)
	}
	if diff := cmp.Diff([]string{"after"}, rowsOf(t, db)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestWriteLater checks the writes nobody waits for: they go first into
// the next transaction, so that its writes see them; with no transaction
// coming, one of their own makes them within group.LaterDelay; close makes them;
// past group.MaxLater waiting, a write is made at once.
func TestWriteLater(t *testing.T) {
	t.Run("next transaction", func(t *testing.T) {
		w, db := newTestWriter(t)
		w.q.Later(&op{run: insert(w.conn, "later")})
		var seen int
		err := w.q.Do(t.Context(), &op{run: func(ctx context.Context) error {
			return w.conn.QueryRowContext(ctx, "SELECT count(*) FROM t WHERE x = 'later'").Scan(&seen)
		}})
		if err != nil || seen != 1 {
			t.Errorf("the next transaction saw %d later writes (err %v), want 1", seen, err)
		}
		if got := w.stats(); got.Commits != 1 || got.Writes != 2 {
			t.Errorf("stats = %+v, want 2 writes in 1 commit", got)
		}
		if diff := cmp.Diff([]string{"later"}, rowsOf(t, db)); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
	t.Run("on its own", func(t *testing.T) {
		w, db := newTestWriter(t)
		w.q.Later(&op{run: insert(w.conn, "later")})
		deadline := time.Now().Add(10 * time.Second)
		for len(rowsOf(t, db)) == 0 && time.Now().Before(deadline) {
			time.Sleep(group.LaterDelay / 5)
		}
		if diff := cmp.Diff([]string{"later"}, rowsOf(t, db)); diff != "" {
			t.Errorf("rows with no other write (-want +got):\n%s", diff)
		}
	})
	t.Run("close", func(t *testing.T) {
		w, db := newTestWriter(t)
		w.q.Later(&op{run: insert(w.conn, "later")})
		w.close()
		if diff := cmp.Diff([]string{"later"}, rowsOf(t, db)); diff != "" {
			t.Errorf("rows after close (-want +got):\n%s", diff)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		w, db := newTestWriter(t)
		var want []string
		for i := range group.MaxLater + 1 {
			x := fmt.Sprintf("later-%03d", i)
			want = append(want, x)
			w.q.Later(&op{run: insert(w.conn, x)})
		}
		// The last one found group.MaxLater waiting: it was made, with them.
		if diff := cmp.Diff(want, rowsOf(t, db)); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}

// TestWriterSyncsBatch checks that a transaction is committed under
// synchronous = FULL if one of its writes must be synced, whichever comes
// first in it, and under NORMAL if none must: each write reads the
// setting its transaction is made under. The writer syncs claims (Claims),
// and the transactions follow each other, so that the setting changes
// between them.
func TestWriterSyncsBatch(t *testing.T) {
	w, _ := newTestWriter(t)
	w.sync = Claims
	const normal, full = 1, 2 // PRAGMA synchronous
	for _, tc := range []struct {
		name  string
		batch []Synchronous // the syncFrom of each write, in order; "-": a write with nothing to make
		want  int
	}{
		{"unsynced, synced", []Synchronous{"", Claims}, full},
		{"unsynced, unsynced", []Synchronous{"", ""}, normal},
		{"synced, unsynced", []Synchronous{Claims, ""}, full},
		{"unsynced, synced from full", []Synchronous{"", Full}, normal},
		{"unsynced, synced from full, synced", []Synchronous{"", Full, Claims}, full},
		{"nothing to make, synced", []Synchronous{"-", Claims}, full},
		{"synced, synced", []Synchronous{Claims, Claims}, full},
		{"unsynced alone", []Synchronous{""}, normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want []int
			batch := make([]*op, len(tc.batch))
			for i, from := range tc.batch {
				if from == "-" {
					batch[i] = &op{} // as the queue's Empty
					continue
				}
				want = append(want, tc.want)
				batch[i] = &op{syncFrom: from, run: func(ctx context.Context) error {
					var s int
					err := w.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&s)
					got = append(got, s)
					return err
				}}
			}
			before := w.stats().Syncs
			w.run(batch) // the writer is idle: no transaction is under way
			for i, o := range batch {
				if o.err != nil {
					t.Errorf("write %d: %v", i, o.err)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PRAGMA synchronous each write read (-want +got):\n%s", diff)
			}
			wantSyncs := int64(0)
			if tc.want == full {
				wantSyncs = 1
			}
			if syncs := w.stats().Syncs - before; syncs != wantSyncs {
				t.Errorf("Stats counted %d syncs, want %d", syncs, wantSyncs)
			}
		})
	}
}
