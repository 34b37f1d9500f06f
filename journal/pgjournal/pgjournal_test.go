package pgjournal_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/journaltest"
	"github.com/toolrelay/toolrelay/journal/pgjournal"
)

// TestEnv names the environment variable holding the URL of the database
// the tests use.
const testEnv = "TOOLRELAY_TEST_POSTGRES"

// testURL returns the URL of the test database, or skips the test.
func testURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(testEnv)
	if u == "" {
		tb.Skipf("%s is not set: skipping the PostgreSQL tests (set it to a database URL, such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", testEnv)
	}
	return u
}

// admin runs SQL on the test database, outside any journal.
func admin(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	conn := connect(tb)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// connect returns a connection to the test database.
func connect(tb testing.TB) *pgx.Conn {
	tb.Helper()
	// The URL may hold settings of the pool (pool_max_conns).
	cfg, err := pgxpool.ParseConfig(testURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg.ConnConfig)
	if err != nil {
		tb.Fatalf("connect to the test database: %v", err)
	}
	return conn
}

// newSchema returns the name of a schema of its own for a test, which is
// dropped when the test ends.
func newSchema(tb testing.TB) string {
	tb.Helper()
	testURL(tb)
	name := "toolrelay_test_" + strings.ToLower(rand.Text()[:12])
	tb.Cleanup(func() { admin(tb, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`) })
	return name
}

func open(tb testing.TB, schema string, opts *pgjournal.Options) *pgjournal.Journal {
	tb.Helper()
	o := pgjournal.Options{Schema: schema}
	if opts != nil {
		o = *opts
		o.Schema = schema
	}
	j, err := pgjournal.Open(context.Background(), testURL(tb), &o)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { j.Close() })
	return j
}

func TestContract(t *testing.T) {
	testURL(t)
	for _, sync := range []pgjournal.Synchronous{pgjournal.Full, pgjournal.Claims} {
		t.Run(string(sync), func(t *testing.T) {
			journaltest.Run(t, func(t *testing.T) driver.Journal {
				return open(t, newSchema(t), &pgjournal.Options{Synchronous: sync})
			})
		})
	}
}

// TestDamaged: an entry finished without its result (its result column
// NULL) reads as DataLoss.
func TestDamaged(t *testing.T) {
	testURL(t)
	var schema string
	journaltest.RunDamaged(t, func(t *testing.T) driver.Journal {
		schema = newSchema(t)
		return open(t, schema, nil)
	}, func(t *testing.T, j driver.Journal, k driver.Key) {
		table := pgx.Identifier{schema, "toolrelay_journal"}.Sanitize()
		if err := pgjournal.ExecForTest(t.Context(), j.(*pgjournal.Journal), `UPDATE `+table+` SET result = NULL WHERE call_id = '`+k.Call+`'`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRace has four journals, each with its own connection pool (as four
// workers on four machines would have), race for the same 1,000 calls.
func TestRace(t *testing.T) {
	schema := newSchema(t)
	var js []driver.Journal
	for range 4 {
		js = append(js, open(t, schema, nil))
	}
	journaltest.Race(t, js, 1000)
}

// TestOpenConcurrently has workers open a new journal at once: one creates
// the tables, the others find them.
func TestOpenConcurrently(t *testing.T) {
	schema := newSchema(t)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			j, err := pgjournal.Open(t.Context(), testURL(t), &pgjournal.Options{Schema: schema})
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			j.Close()
		})
	}
	wg.Wait()
	j := open(t, schema, nil)
	var n int
	if err := j.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{schema, "toolrelay_journal_version"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Errorf("version rows = %d, %v; want 1", n, err)
	}
}

// TestReopen checks that entries outlive the journal that wrote them, and
// that journals with different tables are independent.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	k := driver.Key{Backend: "b", Thread: "t", Turn: "u", Call: "c"}
	j := open(t, schema, nil)
	if _, _, err := j.Claim(ctx, k, "d", "i", "o", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(ctx, k, "o", driver.Result{Output: core.Output{Text: "kept"}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j = open(t, schema, nil)
	if e, ok, err := j.Get(ctx, k); err != nil || !ok || e.Result == nil || e.Result.Output.Text != "kept" {
		t.Errorf("Get after reopening = %+v, %v, %v; want the result kept", e, ok, err)
	}
	other := open(t, schema, &pgjournal.Options{Table: "other_journal"})
	if _, ok, err := other.Get(ctx, k); err != nil || ok {
		t.Errorf("Get from a journal with another table = %v, %v; want no entry", ok, err)
	}
}

// TestOpenUnreachable checks that Open fails clearly, and quickly, when the
// server cannot be reached.
func TestOpenUnreachable(t *testing.T) {
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()

	for _, tc := range []struct {
		name    string
		url     string
		opts    *pgjournal.Options
		timeout time.Duration
	}{
		{"refused", "postgres://postgres@" + refused + "/test?sslmode=disable", nil, pgjournal.DefaultConnectTimeout},
		{"silent", "postgres://postgres@" + silent.Addr().String() + "/test?sslmode=disable", &pgjournal.Options{ConnectTimeout: 300 * time.Millisecond}, 300 * time.Millisecond},
		{"silent, connect_timeout", "postgres://postgres@" + silent.Addr().String() + "/test?sslmode=disable&connect_timeout=1", nil, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			j, err := pgjournal.Open(t.Context(), tc.url, tc.opts)
			took := time.Since(start)
			if err == nil {
				j.Close()
				t.Fatal("Open succeeded")
			}
			var connErr *pgconn.ConnectError
			if !strings.Contains(err.Error(), "cannot connect to PostgreSQL") || !errors.As(err, &connErr) {
				t.Errorf("Open: %v\nwant it to say it cannot connect, wrapping a *pgconn.ConnectError", err)
			}
			if took > tc.timeout+5*time.Second {
				t.Errorf("Open failed after %v, want about the connect timeout (%v)", took, tc.timeout)
			}
		})
	}
}

func TestOpenBadSynchronous(t *testing.T) {
	_, err := pgjournal.Open(t.Context(), testURL(t), &pgjournal.Options{Synchronous: "normal"})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(fmt.Sprint(err), `synchronous "normal"`) {
		t.Errorf("Open with synchronous normal: %v; want InvalidArgument", err)
	}
}

// TestOpenBadURL checks that a connection string pgx cannot parse gives an
// InvalidArgument error that says why without showing the password, in
// any of the forms pgx reads: pgx's own error shows a key/value password
// written with spaces around the "=".
func TestOpenBadURL(t *testing.T) {
	for _, tc := range []struct {
		conn, want string
	}{
		{"postgres://u:secret@host:notaport/db", "invalid port"},
		{"postgres://u@host:notaport/db?password=secret", "invalid port"},
		{"postgres://u:sec%zzret@host/db", "invalid percent-encoded token in password"},
		{"host=127.0.0.1 password = secret port=abc", "invalid port"},
		{"host=127.0.0.1 password='sec ret' port=abc", "invalid port"},
		{"host=127.0.0.1 password='secret", "unterminated quoted string"},
		{"host=127.0.0.1 secret", "failed to parse as keyword/value"},
		{"postgres://u:secret@h/db?connect_timeout=bogus", "invalid connect_timeout (strconv.ParseInt: invalid syntax)"},
		{"postgres://u:secret@h/db?sslmode=bogus", "failed to configure TLS (sslmode is invalid)"},
		{"postgres://u:secret@h/db?target_session_attrs=bogus", "unknown target_session_attrs value"},
		{"postgres://u:secret@h1,h2,h3/db?port=1,2", "could not match the port numbers to the hosts"},
	} {
		t.Run(tc.conn, func(t *testing.T) {
			_, err := pgjournal.Open(t.Context(), tc.conn, nil)
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v\nwant InvalidArgument saying %q", err, tc.want)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				if s := fmt.Sprintf("%v %+v", e, e); strings.Contains(s, "secret") {
					t.Errorf("Open: an error of the chain, %T, shows the password: %s", e, s)
				}
			}
		})
	}
}

// TestOpenSchemaVersions checks that Open refuses tables of another
// version, or not toolrelay's, with a clear error, and changes nothing.
func TestOpenSchemaVersions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup string // run on the version table (%s)
		want  string // SCHEMA stands for the schema
	}{
		{"older", `UPDATE %s SET version = 0`, "schema version 0, older than version 4"},
		{"newer", `UPDATE %s SET version = 5`, "schema version 5, written by a newer toolrelay"},
		{"unversioned", `DROP TABLE %s`, "there is a table SCHEMA.toolrelay_journal but no table SCHEMA.toolrelay_journal_version"},
		{"empty version table", `DELETE FROM %s`, "the table SCHEMA.toolrelay_journal_version is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			schema := newSchema(t)
			j := open(t, schema, nil)
			k := driver.Key{Backend: "b", Thread: "t", Call: "kept"}
			if _, _, err := j.Claim(ctx, k, "d", "i", "o", time.Hour); err != nil {
				t.Fatal(err)
			}
			j.Close()
			version := pgx.Identifier{schema, "toolrelay_journal_version"}.Sanitize()
			entries := pgx.Identifier{schema, "toolrelay_journal"}.Sanitize()
			admin(t, fmt.Sprintf(tc.setup, version))
			_, err := pgjournal.Open(ctx, testURL(t), &pgjournal.Options{Schema: schema})
			if want := strings.ReplaceAll(tc.want, "SCHEMA", schema); err == nil || !strings.Contains(err.Error(), want) || errcode.Of(err) != errcode.FailedPrecondition {
				t.Errorf("Open: %v\nwant FailedPrecondition and %q", err, want)
			}
			var n int
			conn := connect(t)
			defer conn.Close(ctx)
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+entries+` WHERE call_id = 'kept'`).Scan(&n); err != nil || n != 1 {
				t.Errorf("entries kept = %d, %v; want 1", n, err)
			}
		})
	}
}

// TestCanceled checks that a canceled context stops an operation.
func TestCanceled(t *testing.T) {
	j := open(t, newSchema(t), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := j.Claim(ctx, driver.Key{Call: "c"}, "d", "i", "o", time.Hour)
	if !errors.Is(err, context.Canceled) || errcode.Of(err) != errcode.Canceled {
		t.Errorf("Claim with a canceled context: %v; want context.Canceled", err)
	}
}

func BenchmarkJournal(b *testing.B) {
	for _, sync := range []pgjournal.Synchronous{pgjournal.Full, pgjournal.Claims} {
		b.Run(string(sync), func(b *testing.B) {
			journaltest.Benchmark(b, open(b, newSchema(b), &pgjournal.Options{Synchronous: sync}))
		})
	}
}

// TestOpenRefused checks the codes of the errors of a server that refuses
// the connection.
func TestOpenRefused(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.ConnConfig
	for _, tc := range []struct {
		name, url string
		code      errcode.Code
	}{
		{"no such database", fmt.Sprintf("postgres://%s@%s:%d/toolrelay_no_such_db?sslmode=disable", c.User, c.Host, c.Port), errcode.NotFound},
		{"no such role", fmt.Sprintf("postgres://toolrelay_no_such_role@%s:%d/%s?sslmode=disable", c.Host, c.Port, c.Database), errcode.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pgjournal.Open(t.Context(), tc.url, nil)
			if errcode.Of(err) != tc.code || !strings.Contains(fmt.Sprint(err), "cannot connect to PostgreSQL") {
				t.Errorf("Open: %v; want code %v, saying it cannot connect", err, tc.code)
			}
		})
	}
}

// TestMigrate: a journal of an older schema version (1: no approvals and
// no notes table; 2: no notes table) is migrated at open: its entries stay,
// it gets the tables it lacks, and its version becomes the current one.
func TestMigrate(t *testing.T) {
	for _, tc := range []struct {
		version int
		drop    []string
	}{
		{1, []string{"toolrelay_journal_approvals", "toolrelay_journal_notes", "toolrelay_journal_runs"}},
		{2, []string{"toolrelay_journal_notes", "toolrelay_journal_runs"}},
		{3, []string{"toolrelay_journal_runs"}},
	} {
		t.Run(fmt.Sprint("version", tc.version), func(t *testing.T) {
			ctx := t.Context()
			schema := newSchema(t)
			first := open(t, schema, nil)
			k := driver.Key{Backend: "b", Thread: "t", Call: "kept"}
			if _, _, err := first.Claim(ctx, k, "d", "i", "o", time.Hour); err != nil {
				t.Fatal(err)
			}
			first.Close()
			for _, table := range tc.drop {
				admin(t, `DROP TABLE `+pgx.Identifier{schema, table}.Sanitize())
			}
			admin(t, `UPDATE `+pgx.Identifier{schema, "toolrelay_journal_version"}.Sanitize()+fmt.Sprintf(` SET version = %d`, tc.version))
			j, err := pgjournal.Open(ctx, testURL(t), &pgjournal.Options{Schema: schema})
			if err != nil {
				t.Fatalf("Open of a version %d journal: %v", tc.version, err)
			}
			defer j.Close()
			if _, ok, err := j.Get(ctx, k); !ok || err != nil {
				t.Fatalf("the entry of version %d: %v, %v; want it kept", tc.version, ok, err)
			}
			if _, created, err := j.RequestApproval(ctx, driver.Approval{Key: k, Tool: "refund", Arguments: []byte(`{}`), Requested: time.Now()}); !created || err != nil {
				t.Fatalf("RequestApproval after the migration: %v, %v", created, err)
			}
			if err := j.SetNote(ctx, "b", "t", "n", "v"); err != nil {
				t.Fatalf("SetNote after the migration: %v", err)
			}
			if err := j.PutRun(ctx, driver.Run{Backend: "b", Thread: "t", State: driver.RunRunning}); err != nil {
				t.Fatalf("PutRun after the migration: %v", err)
			}
			var v int
			conn := connect(t)
			defer conn.Close(ctx)
			if err := conn.QueryRow(ctx, `SELECT version FROM `+pgx.Identifier{schema, "toolrelay_journal_version"}.Sanitize()).Scan(&v); err != nil || v != pgjournal.SchemaVersion {
				t.Errorf("version %d (%v), want %d", v, err, pgjournal.SchemaVersion)
			}
		})
	}
}

// TestSyncs checks which writes wait for the server's log flush under each
// setting: a claim before a handler runs, and (under Full) its result;
// never the writes of a call that may run twice, the submitted marks and
// the run lease renewals; and that a batch of writes is synced if one of
// them must be, whichever comes first.
func TestSyncs(t *testing.T) {
	for _, tc := range []struct {
		sync pgjournal.Synchronous
		want map[string]int64
	}{
		{"", journaltest.SyncsUnderClaims()}, // the default
		{pgjournal.Full, journaltest.SyncsUnderFull()},
	} {
		t.Run(string(cmp.Or(tc.sync, "default")), func(t *testing.T) {
			t.Run("alone", func(t *testing.T) {
				journaltest.Syncs(t, open(t, newSchema(t), &pgjournal.Options{Synchronous: tc.sync}), tc.want)
			})
			t.Run("batched", func(t *testing.T) {
				j := open(t, newSchema(t), &pgjournal.Options{Synchronous: tc.sync})
				journaltest.SyncsBatched(t, j, tc.want, pgjournal.BatchingForTest(j))
			})
		})
	}
}

// TestMarksLater checks that MarkSubmitted's marks, which it does not wait
// for, reach the database: another journal on the same tables sees them
// soon with no other write, and at once after Close.
func TestMarksLater(t *testing.T) {
	schema := newSchema(t)
	a, b := open(t, schema, nil), open(t, schema, nil)
	ctx := t.Context()
	finished := func(call string) driver.Key {
		k := driver.Key{Backend: "b", Thread: "t", Turn: "u", Call: call}
		if _, _, err := a.Claim(ctx, k, "d", "i", "w", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := a.Finish(ctx, k, "w", driver.Result{Output: core.Output{Text: "r"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.MarkSubmitted(ctx, []driver.Key{k}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	state := func(k driver.Key) driver.State {
		e, ok, err := b.Get(ctx, k)
		if err != nil || !ok {
			t.Fatalf("Get(%s) = %v, %v", k.Call, ok, err)
		}
		return e.State
	}

	k := finished("alone")
	for deadline := time.Now().Add(10 * time.Second); state(k) != driver.Submitted && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := state(k); got != driver.Submitted {
		t.Errorf("with no other write, another journal reads %v, want submitted", got)
	}

	k = finished("closed")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := state(k); got != driver.Submitted {
		t.Errorf("after Close, another journal reads %v, want submitted", got)
	}
}

// TestBatch checks the group commit of concurrent writes: they share
// transactions (fewer commits than writes), and a statement the server
// fails fails alone, the writes batched with it made all the same.
func TestBatch(t *testing.T) {
	j := open(t, newSchema(t), nil)
	ctx := t.Context()

	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			k := driver.Key{Backend: "b", Thread: "t", Turn: "u", Call: fmt.Sprintf("call-%03d", i)}
			_, created, err := j.ClaimUnsynced(ctx, k, "d", "i", "w", time.Hour)
			if err == nil && !created {
				err = fmt.Errorf("%s: not created", k.Call)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := j.Stats(); s.Writes != n || s.Commits >= n {
		t.Errorf("Stats after %d concurrent claims = %+v, want %d writes in fewer commits", n, s, n)
	}

	// A slow write holds the batcher; the writes made meanwhile go into
	// the next batch together, a failing one among them.
	slow := make(chan error, 1)
	go func() { slow <- pgjournal.ExecForTest(ctx, j, "SELECT pg_sleep(0.3)") }()
	time.Sleep(100 * time.Millisecond)
	before := j.Stats()
	results := make([]error, 5)
	for i := range results {
		wg.Go(func() {
			stmt := "SELECT 1"
			if i == 2 {
				stmt = "SELECT 1/0"
			}
			results[i] = pgjournal.ExecForTest(ctx, j, stmt)
		})
	}
	wg.Wait()
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	for i, err := range results {
		var pgErr *pgconn.PgError
		switch {
		case i == 2 && (!errors.As(err, &pgErr) || pgErr.Code != "22012"):
			t.Errorf("the failing write: error %v, want division_by_zero", err)
		case i != 2 && err != nil:
			t.Errorf("write %d, batched with a failing one: %v", i, err)
		}
	}
	if got := j.Stats().Commits - before.Commits; got > 2 {
		t.Errorf("the 4 writes made in %d commits, want them together (at most 2: the slow write's may be counted)", got)
	}
}

// TestOpenChecksTables: a journal one of whose tables was dropped, or
// replaced by one of another shape, is refused at open
// (FailedPrecondition, naming the table), not at the first write that
// needs it (a dropped runs table made run records fail silently).
func TestOpenChecksTables(t *testing.T) {
	for _, tc := range []struct {
		table, setup string
	}{
		{"toolrelay_journal", `DROP TABLE %s; CREATE TABLE %[1]s (backend text, thread text, turn text, id text)`},
		{"toolrelay_journal_runs", `DROP TABLE %s`},
		{"toolrelay_journal_approvals", `ALTER TABLE %s DROP COLUMN edited`},
		{"toolrelay_journal_notes", `DROP TABLE %s`},
	} {
		t.Run(tc.table, func(t *testing.T) {
			schema := newSchema(t)
			open(t, schema, nil).Close()
			admin(t, fmt.Sprintf(tc.setup, pgx.Identifier{schema, tc.table}.Sanitize()))
			_, err := pgjournal.Open(t.Context(), testURL(t), &pgjournal.Options{Schema: schema})
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(fmt.Sprint(err), schema+"."+tc.table+" ") {
				t.Errorf("Open: %v; want FailedPrecondition naming %s.%s", err, schema, tc.table)
			}
		})
	}
}

// TestPermissionDenied: a user who may read the journal's tables but not
// write them opens it, and its first claim fails with PermissionDenied
// (it was Unknown), as an open by a user who may not read them does.
func TestPermissionDenied(t *testing.T) {
	schema := newSchema(t)
	open(t, schema, nil).Close()
	role := "toolrelay_ro_" + strings.ToLower(rand.Text()[:8])
	s := pgx.Identifier{schema}.Sanitize()
	admin(t, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() { admin(t, `DROP OWNED BY `+role+`; DROP ROLE `+role) })
	cfg, err := pgxpool.ParseConfig(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", role, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)

	_, err = pgjournal.Open(t.Context(), u, &pgjournal.Options{Schema: schema})
	if errcode.Of(err) != errcode.PermissionDenied {
		t.Errorf("Open without privileges: %v; want PermissionDenied", err)
	}
	admin(t, `GRANT USAGE ON SCHEMA `+s+` TO `+role+`; GRANT SELECT ON ALL TABLES IN SCHEMA `+s+` TO `+role)
	j, err := pgjournal.Open(t.Context(), u, &pgjournal.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open with SELECT only: %v", err)
	}
	defer j.Close()
	_, _, err = j.Claim(t.Context(), driver.Key{Backend: "b", Thread: "t", Call: "c"}, "d", "i", "o", time.Minute)
	if errcode.Of(err) != errcode.PermissionDenied {
		t.Errorf("Claim with SELECT only: %v; want PermissionDenied", err)
	}
}
