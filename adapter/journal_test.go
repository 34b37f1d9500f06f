package adapter_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
)

// opened counts the backends the journal-test backend opened.
var opened atomic.Int32

func init() {
	adapter.Register("journal-test", func(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
		opened.Add(1)
		return coretest.NewBackend(coretest.Simple("get_weather", `{"city":"Paris"}`, "done"), nil), nil
	})
}

func weatherTools(t *testing.T) *core.Toolbox {
	t.Helper()
	type args struct {
		City string `json:"city"`
	}
	tool, err := core.NewTool("get_weather", "Get the weather.", func(ctx context.Context, in args) (string, error) {
		return "21 °C in " + in.City, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// TestOpenJournal checks that Open opens the journal TOOLRELAY_JOURNAL
// names, with the lease TOOLRELAY_JOURNAL_LEASE gives, and that the
// runner's Close closes it.
func TestOpenJournal(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "journal.db")
	t.Setenv("TOOLRELAY_JOURNAL", "sqlite://"+path)
	t.Setenv("TOOLRELAY_JOURNAL_LEASE", "2s")
	t.Setenv("TOOLRELAY_JOURNAL_RETENTION", "720h")
	r, err := adapter.Open(ctx, weatherTools(t), &adapter.Options{DefaultBackend: "journal-test"})
	if err != nil {
		t.Fatal(err)
	}
	j, ok := r.Journal().(*sqlitejournal.Journal)
	if !ok {
		r.Close()
		t.Fatalf("runner's journal is a %T, want a *sqlitejournal.Journal", r.Journal())
	}
	if j.Path() != path {
		t.Errorf("journal file %s, want %s", j.Path(), path)
	}
	res, err := r.Run(ctx, "weather?", nil)
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	call := res.Calls[0].Call
	e, found, err := j.Get(ctx, journaldriver.Key{Backend: r.Backend().Name(), Thread: call.Thread, Turn: call.Turn, Call: call.ID})
	if err != nil || !found || e.State != journaldriver.Submitted {
		t.Errorf("journal entry of the call = %+v, %v, %v; want it submitted", e, found, err)
	}
	if lease := e.LeaseUntil.Sub(e.Created); lease != 2*time.Second {
		t.Errorf("lease = %v, want 2s (TOOLRELAY_JOURNAL_LEASE)", lease)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, _, err := j.Get(ctx, journaldriver.Key{}); err == nil {
		t.Errorf("Get after the runner's Close succeeded; want the journal closed")
	}
}

// TestOpenJournalFromCode checks that a journal set in code wins over the
// configured one, which is then not opened.
func TestOpenJournalFromCode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	t.Setenv("TOOLRELAY_JOURNAL", "sqlite://"+path)
	mine := journaldriver.NewMemory()
	r, err := adapter.Open(t.Context(), weatherTools(t), &adapter.Options{DefaultBackend: "journal-test", Runner: core.Options{Journal: mine}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Journal() != journaldriver.Journal(mine) {
		t.Errorf("runner's journal is a %T, want the one set in code", r.Journal())
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the configured journal was opened (%v)", err)
	}
}

// TestOpenBadJournal checks that a bad journal setting fails Open before
// any backend is opened.
func TestOpenBadJournal(t *testing.T) {
	t.Setenv("TOOLRELAY_JOURNAL", "sqlite://relative.db")
	before := opened.Load()
	_, err := adapter.Open(t.Context(), weatherTools(t), &adapter.Options{DefaultBackend: "journal-test"})
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("Open: %v, want InvalidArgument", err)
	}
	if opened.Load() != before {
		t.Errorf("a backend was opened despite the bad journal")
	}
}
