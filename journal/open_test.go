package journal_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/pgjournal"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct {
		url string
		// check inspects the store opened.
		check func(t *testing.T, s journal.Store)
	}{
		{"", isMemory},
		{"memory", isMemory},
		{"memory:", isMemory},
		{"sqlite://" + filepath.Join(dir, "abs.db"), isSQLite(filepath.Join(dir, "abs.db"))},
		{"sqlite:rel.db", isSQLite(filepath.Join(dir, "rel.db"))},
		{"sqlite:sub%20dir.db?synchronous=normal&busy_timeout=2s&check=off", isSQLite(filepath.Join(dir, "sub dir.db"))},
		{"sqlite://" + filepath.Join(dir, "a b.db") + "?synchronous=FULL&check=on", isSQLite(filepath.Join(dir, "a b.db"))},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := journal.Open(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			tc.check(t, s)
			k := driver.Key{Backend: "b", Thread: "t", Call: "c"}
			if _, created, err := s.Claim(t.Context(), k, "d", "i", "o", time.Minute); err != nil || !created {
				t.Errorf("Claim on the store = %v, %v; want created", created, err)
			}
		})
	}
}

func isMemory(t *testing.T, s journal.Store) {
	t.Helper()
	if fmt.Sprintf("%T", s) != "journal.memory" {
		t.Errorf("store is a %T, want the memory journal", s)
	}
}

func isSQLite(path string) func(t *testing.T, s journal.Store) {
	return func(t *testing.T, s journal.Store) {
		t.Helper()
		j, ok := s.(*sqlitejournal.Journal)
		if !ok {
			t.Fatalf("store is a %T, want a *sqlitejournal.Journal", s)
		}
		if j.Path() != path {
			t.Errorf("file %q, want %q", j.Path(), path)
		}
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		url  string
		code errcode.Code
		want string
	}{
		{"sqlite://rel.db", errcode.InvalidArgument, "names a host"},
		{"sqlite:", errcode.InvalidArgument, "no file name"},
		{"sqlite:///", errcode.FailedPrecondition, "cannot be opened"},
		{"sqlite://" + dir + "/j.db?synchronous=off", errcode.InvalidArgument, `synchronous "off"`},
		{"sqlite://" + dir + "/j.db?busy=1", errcode.InvalidArgument, `unknown parameter "busy"`},
		{"sqlite://" + dir + "/j.db?busy_timeout=5", errcode.InvalidArgument, "busy_timeout"},
		{"sqlite://" + dir + "/j.db?check=maybe", errcode.InvalidArgument, "check"},
		{"sqlite://" + dir + "/no/such/dir/j.db", errcode.FailedPrecondition, "cannot be opened or created"},
		{"mysql://host/db", errcode.InvalidArgument, `unknown scheme "mysql"`},
		{"/var/lib/journal.db", errcode.InvalidArgument, "no scheme"},
		{"postgres://user:secret@127.0.0.1:1/db?sslmode=disable&toolrelay_schema=s", errcode.Unknown, "cannot connect to PostgreSQL"},
		{"postgresql://user:secret@127.0.0.1:1/db?sslmode=disable", errcode.Unknown, "cannot connect to PostgreSQL"},
		{"postgres://user:secret@host:port/db", errcode.InvalidArgument, ""},
		{"postgres://postgres@127.0.0.1:abc/test?password=secret", errcode.InvalidArgument, "invalid port"},
		{"postgres://postgres:se%zzcret@127.0.0.1/test", errcode.InvalidArgument, "invalid URL escape"},
		{"postgres://postgres@127.0.0.1:1/test?sslmode=disable&password=secret", errcode.Unknown, "cannot connect to PostgreSQL"},
		{"postgres://postgres@127.0.0.1/test?password=secret&sslmode=bogus", errcode.InvalidArgument, "sslmode is invalid"},
		{"host=127.0.0.1 port=1 password=secret", errcode.InvalidArgument, "key=value settings are not a journal URL"},
		{"host=127.0.0.1 port=1 password = 'a secret'", errcode.InvalidArgument, "key=value settings are not a journal URL"},
		{"sqlite://" + dir + "/j.db?password=secret", errcode.InvalidArgument, `unknown parameter "password"`},
		{"sqlite:j.db?busy_timeout=5s&token=secret", errcode.InvalidArgument, `unknown parameter "token"`},
		{"secret", errcode.InvalidArgument, "no scheme"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := journal.Open(t.Context(), tc.url)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v\nwant code %v and %q", err, tc.code, tc.want)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				if s := fmt.Sprintf("%v %+v", e, e); strings.Contains(s, "secret") {
					t.Errorf("Open: an error of the chain, %T, shows the password: %s", e, s)
				}
			}
		})
	}
}

func TestOpenPostgres(t *testing.T) {
	u := os.Getenv("TOOLRELAY_TEST_POSTGRES")
	if u == "" {
		t.Skip("TOOLRELAY_TEST_POSTGRES is not set: skipping the PostgreSQL tests")
	}
	schema := "toolrelay_test_" + strings.ToLower(rand.Text()[:12])
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s, err := journal.Open(t.Context(), u+sep+"toolrelay_schema="+schema+"&toolrelay_table=my_journal&toolrelay_synchronous=claims")
	if err != nil {
		t.Fatal(err)
	}
	j := s.(*pgjournal.Journal)
	t.Cleanup(func() {
		j.Pool().Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		s.Close()
	})
	if _, _, err := s.Claim(t.Context(), driver.Key{Call: "c"}, "d", "i", "o", time.Minute); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := j.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{schema, "my_journal"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Errorf("entries in %s.my_journal = %d, %v; want 1", schema, n, err)
	}
}
