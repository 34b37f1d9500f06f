package journal_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/driver"
)

// TestPruner checks that a Pruner prunes the entries finished longer ago
// than the retention, and only those, as time goes by.
func TestPruner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := driver.NewMemory()
		p := journal.StartPruning(s, time.Hour, nil)
		key := func(c string) driver.Key { return driver.Key{Backend: "b", Thread: "t", Call: c} }
		claim := func(c string) {
			t.Helper()
			if _, _, err := s.Claim(ctx, key(c), "d", "i", "o", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		finish := func(c string) {
			t.Helper()
			claim(c)
			if err := s.Finish(ctx, key(c), "o", driver.Result{}); err != nil {
				t.Fatal(err)
			}
		}
		has := func(c string) bool {
			t.Helper()
			_, ok, err := s.Get(ctx, key(c))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		finish("old")
		claim("started")
		time.Sleep(40 * time.Minute)
		finish("newer")
		time.Sleep(21 * time.Minute) // an hour and a minute after "old" finished
		synctest.Wait()
		// The store prunes every 6 minutes (an hour / 10): last at 60m, when
		// "old" was not yet older than an hour.
		if !has("old") {
			t.Errorf("at 61m: old was pruned, want it kept until the next pruning")
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		for c, want := range map[string]bool{"old": false, "newer": true, "started": true} {
			if got := has(c); got != want {
				t.Errorf("at 66m: has(%s) = %v, want %v", c, got, want)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
