package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	jdriver "github.com/toolrelay/toolrelay/journal/driver"
)

// deadJournal is the journal as a worker that stopped sees it: its lease
// renewals never reach the store.
type deadJournal struct{ *jdriver.Memory }

func (deadJournal) Renew(context.Context, jdriver.Key, string, time.Duration) error { return nil }
func (deadJournal) RenewRun(context.Context, string, string, string, time.Duration) error {
	return nil
}

// TestRecover: a run whose worker stopped renewing its lease (here: stuck
// in a handler, its renewals lost, as a killed process's would be) is
// found by another worker sharing the journal, without being named, and
// finished there; the first worker's late result is refused; the records
// say who finished it; a second Recover finds nothing.
func TestRecover(t *testing.T) {
	mem := jdriver.NewMemory()
	release := make(chan struct{})
	var runs atomic.Int32
	book := mustTool(t)(core.NewTool("book", "Books a table.", func(ctx context.Context, _ struct{}) (string, error) {
		if runs.Add(1) == 1 {
			<-release // the first worker is stuck here
		}
		return "booked", nil
	}, &core.ToolOptions{Idempotent: true}))
	tools, _ := core.NewToolbox(book)
	backend := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "book", Arguments: json.RawMessage(`{}`)}}},
		{Text: `{{output "book"}}`},
	}}}}, &coretest.BackendOptions{Tools: tools})
	const lease = 300 * time.Millisecond // far longer than a run takes to reach its handler, even under -race
	dead := core.NewRunner(backend, tools, &core.Options{Journal: deadJournal{mem}, Owner: "dead", Lease: lease, Logger: quiet})
	alive := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "alive", Lease: lease, Logger: quiet})

	firstDone := make(chan error, 1)
	go func() {
		_, err := dead.Run(context.Background(), "book a table", nil)
		firstDone <- err
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if got, _ := alive.Recover(t.Context()); len(got) != 0 {
		t.Fatalf("Recover while the lease holds took %d runs, want none", len(got))
	}
	time.Sleep(lease + 20*time.Millisecond)
	got, err := alive.Recover(t.Context())
	if err != nil || len(got) != 1 || got[0].Text != "booked" {
		t.Fatalf("Recover = %+v, %v; want the run finished here", got, err)
	}
	close(release)
	if err := <-firstDone; !errors.Is(err, jdriver.ErrLeaseLost) {
		t.Errorf("the stuck worker's run = %v, want its late result refused (lease lost)", err)
	}
	list, _ := mem.ListRuns(t.Context(), backend.Name(), "", 10)
	if len(list) != 1 || list[0].State != jdriver.RunFinished || list[0].Owner != "alive" {
		t.Errorf("run records %+v, want one, finished by alive", list)
	}
	if again, err := alive.Recover(t.Context()); err != nil || len(again) != 0 {
		t.Errorf("a second Recover = %d runs, %v; want none", len(again), err)
	}
}
