package sqlitejournal

import (
	"testing"

	"github.com/toolrelay/toolrelay/journal/journaltest"
)

// BatchingForTest returns the hooks journaltest.SyncsBatched needs into
// j's writer.
func BatchingForTest(j *Journal) journaltest.Batching {
	return journaltest.Batching{Hold: func(t *testing.T) func() { return hold(t, j.w) }, Queued: j.w.q.Len}
}
