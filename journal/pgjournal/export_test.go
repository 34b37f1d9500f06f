package pgjournal

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/journal/journaltest"
)

// ExecForTest makes stmt as the journal's writes are made (batched).
func ExecForTest(ctx context.Context, j *Journal, stmt string) error {
	_, err := j.exec(ctx, false, "", stmt)
	return err
}

// BatchingForTest returns the hooks journaltest.SyncsBatched needs into
// j's batcher. The held write is a statement of a batch of its own, not
// synced, whose row is read once release is called.
func BatchingForTest(j *Journal) journaltest.Batching {
	hold := func(t *testing.T) func() {
		t.Helper()
		started, proceed := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- j.w.q.Do(t.Context(), &write{stmt: "SELECT 1", scan: func(row pgx.Row) error {
				close(started)
				<-proceed
				var one int
				return row.Scan(&one)
			}})
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("held write, made before it was held: %v", err)
		}
		return func() {
			close(proceed)
			if err := <-done; err != nil {
				t.Errorf("held write: %v", err)
			}
		}
	}
	return journaltest.Batching{Hold: hold, Queued: j.w.q.Len}
}
