package sqlitejournal_test

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/journaltest"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
)

func open(t *testing.T, path string, opts *sqlitejournal.Options) *sqlitejournal.Journal {
	t.Helper()
	j, err := sqlitejournal.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return j
}

func TestContract(t *testing.T) {
	for _, sync := range []sqlitejournal.Synchronous{sqlitejournal.Full, sqlitejournal.Claims, sqlitejournal.Normal} {
		t.Run(string(sync), func(t *testing.T) {
			journaltest.Run(t, func(t *testing.T) driver.Journal {
				return open(t, filepath.Join(t.TempDir(), "journal.db"), &sqlitejournal.Options{Synchronous: sync})
			})
		})
	}
}

// TestDamaged: an entry finished without its result (its result column
// NULL) reads as DataLoss.
func TestDamaged(t *testing.T) {
	journaltest.RunDamaged(t, func(t *testing.T) driver.Journal {
		return open(t, filepath.Join(t.TempDir(), "journal.db"), nil)
	}, func(t *testing.T, j driver.Journal, k driver.Key) {
		db, err := sql.Open("sqlite", j.(*sqlitejournal.Journal).Path())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(t.Context(), `UPDATE toolrelay_journal SET result = NULL WHERE call = ?`, k.Call); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRace has four journals on one file, as four processes would have,
// race for the same 1,000 calls.
func TestRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	var js []driver.Journal
	for range 4 {
		js = append(js, open(t, path, &sqlitejournal.Options{BusyTimeout: time.Minute}))
	}
	journaltest.Race(t, js, 1000)
}

// TestReopen checks that entries outlive the journal that wrote them.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := sqlitejournal.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := driver.Key{Backend: "b", Thread: "t", Turn: "u", Call: "c"}
	if _, _, err := j.Claim(ctx, k, "d", "i", "o", time.Hour); err != nil {
		t.Fatal(err)
	}
	r := driver.Result{Output: core.Output{Text: "kept"}}
	if err := j.Finish(ctx, k, "o", r); err != nil {
		t.Fatal(err)
	}
	want, _, err := j.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, nil)
	got, ok, err := j.Get(ctx, k)
	if err != nil || !ok {
		t.Fatalf("Get after reopening = %v, %v; want the entry", ok, err)
	}
	if !got.Updated.Equal(want.Updated) || got.State != driver.Succeeded || got.Result.Output.Text != "kept" {
		t.Errorf("after reopening: %+v, want %+v", got, want)
	}
}

func TestOpenOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		opts *sqlitejournal.Options
		code errcode.Code
		want string
	}{
		{"no path", "", nil, errcode.InvalidArgument, "no file name"},
		{"bad synchronous", "j.db", &sqlitejournal.Options{Synchronous: "off"}, errcode.InvalidArgument, `synchronous "off"`},
		{"no directory", "no/such/dir/j.db", nil, errcode.FailedPrecondition, "cannot be opened or created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path != "" {
				path = filepath.Join(t.TempDir(), path)
			}
			_, err := sqlitejournal.Open(t.Context(), path, tc.opts)
			if errcode.Of(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v; want code %v and %q", err, tc.code, tc.want)
			}
		})
	}
}

// TestOpenPathCharacters checks that any character may appear in the path.
func TestOpenPathCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%20chars&_pragma=x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "jour nal?.db")
	j := open(t, path, nil)
	if j.Path() != path {
		t.Errorf("Path() = %q, want %q", j.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the journal is not at %s: %v", path, err)
	}
}

// TestOpenBadFile checks that Open refuses a file it cannot use with a
// clear error, and leaves the file as it was.
func TestOpenBadFile(t *testing.T) {
	valid := func(t *testing.T) []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "valid.db")
		j, err := sqlitejournal.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			k := driver.Key{Backend: "b", Thread: "t", Call: fmt.Sprint("call-", i)}
			if _, _, err := j.Claim(t.Context(), k, "d", "i", "o", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		content func(t *testing.T) []byte
		// setup, if set, changes the file with SQL before Open.
		setup string
		want  string
		// onlyCheck: Open with SkipCheck succeeds (the integrity check is
		// what finds the damage).
		onlyCheck bool
	}{
		{
			name:    "text file",
			content: func(*testing.T) []byte { return []byte("this is not a database, but a note a user keeps\n") },
			want:    "not an SQLite database",
		},
		{
			name:    "random bytes",
			content: func(*testing.T) []byte { return bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096) },
			want:    "not an SQLite database",
		},
		{
			name: "damaged pages",
			content: func(t *testing.T) []byte {
				b := valid(t)
				// Keep the header (page 1's first 100 bytes), damage the rest.
				for i := 100; i < len(b); i++ {
					b[i] ^= 0x5a
				}
				return b
			},
			want: "corrupt",
		},
		{
			// Only the last page (a leaf of the entries' table) is damaged:
			// PRAGMA quick_check finds it.
			name: "damaged data page",
			content: func(t *testing.T) []byte {
				b := valid(t)
				for i := len(b) - 3000; i < len(b); i++ {
					b[i] ^= 0x5a
				}
				return b
			},
			want:      "corrupt",
			onlyCheck: true,
		},
		{
			name:    "older schema",
			content: valid,
			setup:   `UPDATE toolrelay_journal_version SET version = 0`,
			want:    "schema version 0, older than version 4",
		},
		{
			name:    "newer schema",
			content: valid,
			setup:   `UPDATE toolrelay_journal_version SET version = 5`,
			want:    "schema version 5, written by a newer toolrelay",
		},
		{
			name:    "unversioned",
			content: valid,
			setup:   `DROP TABLE toolrelay_journal_version`,
			want:    "no toolrelay_journal_version table",
		},
		{
			name:    "empty version table",
			content: valid,
			setup:   `DELETE FROM toolrelay_journal_version`,
			want:    "toolrelay_journal_version is empty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			if err := os.WriteFile(path, tc.content(t), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.setup != "" {
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				_, err = db.Exec(tc.setup)
				db.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			j, err := sqlitejournal.Open(t.Context(), path, nil)
			if err == nil {
				j.Close()
				t.Fatalf("Open succeeded, want an error saying %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) || errcode.Of(err) != errcode.FailedPrecondition {
				t.Errorf("Open: %v\nwant FailedPrecondition, the path and %q", err, tc.want)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("Open changed the file it refused")
			}
			if tc.onlyCheck {
				j, err := sqlitejournal.Open(t.Context(), path, &sqlitejournal.Options{SkipCheck: true})
				if err != nil {
					t.Fatalf("Open with SkipCheck: %v; want the damage to go unseen", err)
				}
				j.Close()
			}
		})
	}
}

// TestLocked holds the write lock of the file from another connection, as
// another process would, and checks that Open and Claim fail with a clear
// error within the busy timeout, and that nothing is lost.
func TestLocked(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "journal.db")
	const busy = 200 * time.Millisecond
	first := open(t, path, &sqlitejournal.Options{BusyTimeout: busy})
	kept := driver.Key{Backend: "b", Thread: "t", Call: "kept"}
	if _, _, err := first.Claim(ctx, kept, "d", "i", "o", time.Hour); err != nil {
		t.Fatal(err)
	}

	// Another connection takes the write lock.
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
	if _, err := conn.ExecContext(ctx, "UPDATE toolrelay_journal SET owner = owner"); err != nil {
		t.Fatal(err)
	}

	checkLocked := func(t *testing.T, what string, err error, took time.Duration) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded while another connection holds the lock", what)
		}
		var se *sqlite.Error
		if !strings.Contains(err.Error(), "locked by another connection") || !errors.As(err, &se) {
			t.Errorf("%s: %v\nwant it to say the file is locked, wrapping a *sqlite.Error", what, err)
		}
		if took < busy/2 || took > busy+5*time.Second {
			t.Errorf("%s failed after %v, want about the busy timeout (%v)", what, took, busy)
		}
	}
	t.Run("Open", func(t *testing.T) {
		start := time.Now()
		j, err := sqlitejournal.Open(ctx, path, &sqlitejournal.Options{BusyTimeout: busy, SkipCheck: true})
		if err == nil {
			j.Close()
		}
		checkLocked(t, "Open", err, time.Since(start))
		if errcode.Of(err) != errcode.FailedPrecondition {
			t.Errorf("Open: code %v, want FailedPrecondition", errcode.Of(err))
		}
	})
	t.Run("Claim", func(t *testing.T) {
		start := time.Now()
		_, _, err := first.Claim(ctx, driver.Key{Backend: "b", Thread: "t", Call: "new"}, "d", "i", "o", time.Hour)
		checkLocked(t, "Claim", err, time.Since(start))
	})

	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// Once the lock is released, everything works again and nothing is lost.
	second := open(t, path, &sqlitejournal.Options{BusyTimeout: busy})
	if e, ok, err := second.Get(ctx, kept); err != nil || !ok || e.Owner != "o" {
		t.Errorf("Get after the lock was released = %+v, %v, %v; want the entry kept", e, ok, err)
	}
	if _, created, err := first.Claim(ctx, driver.Key{Backend: "b", Thread: "t", Call: "new"}, "d", "i", "o", time.Hour); err != nil || !created {
		t.Errorf("Claim after the lock was released = %v, %v; want created", created, err)
	}
}

// TestCanceled checks that a canceled context stops an operation.
func TestCanceled(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "journal.db"), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := j.Claim(ctx, driver.Key{Call: "c"}, "d", "i", "o", time.Hour)
	if !errors.Is(err, context.Canceled) || errcode.Of(err) != errcode.Canceled {
		t.Errorf("Claim with a canceled context: %v; want context.Canceled", err)
	}
}

func BenchmarkJournal(b *testing.B) {
	for _, tc := range []struct {
		name      string
		sync      sqlitejournal.Synchronous
		fdatasync bool // sync with fdatasync(2) rather than fsync(2)
	}{
		{"full", sqlitejournal.Full, false},
		{"full-fdatasync", sqlitejournal.Full, true},
		{"claims", sqlitejournal.Claims, false},
		{"normal", sqlitejournal.Normal, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.fdatasync {
				prev, err := sqlite.Fdatasync(true)
				if err != nil {
					b.Skip(err)
				}
				defer sqlite.Fdatasync(prev)
			}
			j, err := sqlitejournal.Open(b.Context(), filepath.Join(b.TempDir(), "journal.db"), &sqlitejournal.Options{Synchronous: tc.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			journaltest.Benchmark(b, j)
		})
	}
}

// TestPruneMany checks that Prune deletes more entries than one of its
// writes does (1,000), across threads, and no Started entry.
func TestPruneMany(t *testing.T) {
	ctx := t.Context()
	j := open(t, filepath.Join(t.TempDir(), "journal.db"), &sqlitejournal.Options{Synchronous: sqlitejournal.Normal})
	const finished, started = 2500, 30
	var done []driver.Key
	for i := range finished + started {
		k := driver.Key{Backend: "b", Thread: fmt.Sprint("thread-", i%13), Turn: fmt.Sprint(i % 3), Call: fmt.Sprint("call-", i)}
		if _, _, err := j.Claim(ctx, k, "d", "i", "o", time.Hour); err != nil {
			t.Fatal(err)
		}
		if i < finished {
			if err := j.Finish(ctx, k, "o", driver.Result{}); err != nil {
				t.Fatal(err)
			}
			done = append(done, k)
		}
	}
	if err := j.MarkSubmitted(ctx, done[:1200]); err != nil {
		t.Fatal(err)
	}
	n, err := j.Prune(ctx, time.Now().Add(time.Minute))
	if err != nil || n != finished {
		t.Fatalf("Prune = %d, %v; want %d", n, err, finished)
	}
	if n, err := j.Prune(ctx, time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Errorf("second Prune = %d, %v; want 0", n, err)
	}
	for i := finished; i < finished+started; i++ {
		k := driver.Key{Backend: "b", Thread: fmt.Sprint("thread-", i%13), Turn: fmt.Sprint(i % 3), Call: fmt.Sprint("call-", i)}
		if _, ok, err := j.Get(ctx, k); err != nil || !ok {
			t.Errorf("started entry %s: %v, %v; want it kept", k.Call, ok, err)
		}
	}
}

// TestMigrate: a file of an older schema version (1: no approvals, notes
// and runs tables; 2: no notes and runs; 3: no runs) is migrated at open: its entries stay, it
// gets the tables it lacks, and its version becomes the current one.
func TestMigrate(t *testing.T) {
	for _, tc := range []struct {
		version int
		drop    string
	}{
		{1, `DROP TABLE toolrelay_journal_approvals; DROP TABLE toolrelay_journal_notes; DROP TABLE toolrelay_journal_runs`},
		{2, `DROP TABLE toolrelay_journal_notes; DROP TABLE toolrelay_journal_runs`},
		{3, `DROP TABLE toolrelay_journal_runs`},
	} {
		t.Run(fmt.Sprint("version", tc.version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			first, err := sqlitejournal.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := driver.Key{Backend: "b", Thread: "t", Call: "c"}
			if _, _, err := first.Claim(t.Context(), k, "d", "i", "o", time.Hour); err != nil {
				t.Fatal(err)
			}
			first.Close()
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Exec(tc.drop + fmt.Sprintf(`; UPDATE toolrelay_journal_version SET version = %d`, tc.version))
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			j := open(t, path, nil)
			if _, ok, err := j.Get(t.Context(), k); !ok || err != nil {
				t.Fatalf("the entry of version %d: %v, %v; want it kept", tc.version, ok, err)
			}
			a := driver.Approval{Key: k, Tool: "refund", Arguments: []byte(`{}`), Requested: time.Now()}
			if _, created, err := j.RequestApproval(t.Context(), a); !created || err != nil {
				t.Fatalf("RequestApproval after the migration: %v, %v", created, err)
			}
			if err := j.SetNote(t.Context(), "b", "t", "n", "v"); err != nil {
				t.Fatalf("SetNote after the migration: %v", err)
			}
			if err := j.PutRun(t.Context(), driver.Run{Backend: "b", Thread: "t", State: driver.RunRunning}); err != nil {
				t.Fatalf("PutRun after the migration: %v", err)
			}
			var v int
			db, _ = sql.Open("sqlite", path)
			defer db.Close()
			if err := db.QueryRow(`SELECT version FROM toolrelay_journal_version`).Scan(&v); err != nil || v != sqlitejournal.SchemaVersion {
				t.Errorf("version %d (%v), want %d", v, err, sqlitejournal.SchemaVersion)
			}
		})
	}
}

// TestSyncs checks which writes wait for the disk under each setting: a
// claim before a handler runs, and (under Full) its result; never the
// writes of a call that may run twice, the submitted marks and the run
// lease renewals; and that a batch of writes is synced if one of them
// must be, whichever comes first.
func TestSyncs(t *testing.T) {
	for _, tc := range []struct {
		sync sqlitejournal.Synchronous
		want map[string]int64
	}{
		{"", journaltest.SyncsUnderClaims()}, // the default
		{sqlitejournal.Full, journaltest.SyncsUnderFull()},
		{sqlitejournal.Normal, map[string]int64{
			journaltest.SyncClaim: 0, journaltest.SyncFinish: 0, journaltest.SyncClaimUnsynced: 0, journaltest.SyncFinishUnsynced: 0,
			journaltest.SyncMarkSubmitted: 0, journaltest.SyncPutRun: 0, journaltest.SyncRenewRun: 0, journaltest.SyncEndRun: 0,
		}},
	} {
		t.Run(string(cmp.Or(tc.sync, "default")), func(t *testing.T) {
			t.Run("alone", func(t *testing.T) {
				journaltest.Syncs(t, open(t, filepath.Join(t.TempDir(), "journal.db"), &sqlitejournal.Options{Synchronous: tc.sync}), tc.want)
			})
			t.Run("batched", func(t *testing.T) {
				j := open(t, filepath.Join(t.TempDir(), "journal.db"), &sqlitejournal.Options{Synchronous: tc.sync})
				journaltest.SyncsBatched(t, j, tc.want, sqlitejournal.BatchingForTest(j))
			})
		})
	}
}

// TestOpenChecksTables: a file one of whose tables was dropped, or
// replaced by one of another shape, is refused at open
// (FailedPrecondition, naming the table; an entries table of another
// shape was Unknown, a dropped runs table passed and run records then
// failed silently).
func TestOpenChecksTables(t *testing.T) {
	for _, tc := range []struct {
		table, setup string
	}{
		{"toolrelay_journal", `DROP TABLE toolrelay_journal; CREATE TABLE toolrelay_journal (backend TEXT, thread TEXT, turn TEXT, id TEXT)`},
		{"toolrelay_journal_runs", `DROP TABLE toolrelay_journal_runs`},
		{"toolrelay_journal_approvals", `ALTER TABLE toolrelay_journal_approvals DROP COLUMN edited`},
		{"toolrelay_journal_notes", `DROP TABLE toolrelay_journal_notes`},
	} {
		t.Run(tc.table, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			j, err := sqlitejournal.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			j.Close()
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Exec(tc.setup)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			_, err = sqlitejournal.Open(t.Context(), path, nil)
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(fmt.Sprint(err), tc.table+" ") {
				t.Errorf("Open: %v; want FailedPrecondition naming %s", err, tc.table)
			}
		})
	}
}
