package thirdparty_test

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/driver"
)

// countingJournal is a third party's journal: the memory journal, counting
// the results it keeps.
type countingJournal struct {
	*driver.Memory
	finished atomic.Int32
	closed   atomic.Bool
}

func (j *countingJournal) Finish(ctx context.Context, key driver.Key, owner string, r driver.Result) error {
	j.finished.Add(1)
	return j.Memory.Finish(ctx, key, owner, r)
}

func (j *countingJournal) Close() error {
	j.closed.Store(true)
	return nil
}

// opened is the journal the thirdparty: scheme opened last.
var opened atomic.Pointer[countingJournal]

func init() {
	journal.Register("thirdparty", func(ctx context.Context, u *url.URL, rawURL string) (journal.Store, error) {
		if u.Opaque != "counting" {
			return nil, errcode.Errorf(errcode.InvalidArgument, "thirdparty: unknown journal %q", u.Opaque)
		}
		j := &countingJournal{Memory: driver.NewMemory()}
		opened.Store(j)
		return j, nil
	})
}

// TestThirdPartyJournal selects a journal registered outside the module's
// packages by configuration, as sqlite: and postgres: are selected, and
// checks that the runner keeps its results there and closes it.
func TestThirdPartyJournal(t *testing.T) {
	for _, k := range []string{adapter.SettingsFileEnv, "ECHO_PREFIX"} {
		t.Setenv(k, "")
	}
	t.Setenv("TOOLRELAY_BACKEND", "echo")
	t.Setenv("ECHO_TOOL", "shout")
	t.Setenv("TOOLRELAY_JOURNAL", "thirdparty:counting")
	r, err := adapter.Open(t.Context(), shout(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), "hello", nil)
	if err != nil || res.Text != "hello!" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	j := opened.Load()
	if j == nil || j.finished.Load() != 1 {
		t.Fatalf("the third-party journal kept %d results, want 1", j.finished.Load())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !j.closed.Load() {
		t.Error("the runner's Close did not close the journal adapter opened")
	}
}

// TestJournalNotLinked checks that a built-in journal this program does
// not import is refused with the import to add, and that an unknown scheme
// lists the registered ones.
func TestJournalNotLinked(t *testing.T) {
	tests := []struct {
		url  string
		code errcode.Code
		want string
	}{
		{"sqlite:///tmp/x.db", errcode.Unimplemented, `scheme "sqlite" is not linked into this program: import _ "github.com/toolrelay/toolrelay/journal/sqlitejournal"`},
		{"postgres://u:SECRETPW@127.0.0.1/db", errcode.Unimplemented, `import _ "github.com/toolrelay/toolrelay/journal/pgjournal"`},
		{"redis://127.0.0.1", errcode.InvalidArgument, `unknown scheme "redis" (want memory, thirdparty:…)`},
	}
	for _, tt := range tests {
		_, err := journal.Open(t.Context(), tt.url)
		if errcode.Of(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want %v saying %q", tt.url, err, tt.code, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRETPW") {
			t.Errorf("Open(%q) shows the password: %v", tt.url, err)
		}
	}
}
