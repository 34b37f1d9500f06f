package journaltest

import (
	"testing"

	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// RunDamaged checks how a journal reads an entry that says its call
// finished but holds no result (a row damaged, or written by a faulty
// program): Get, Claim and (when the journal lists its entries) ListEntries
// return an error whose code is DataLoss, the entry is neither replaced nor
// handed out as new (its call must not run again), and the other entries
// read as before. damage must empty the stored result of k's entry, which
// the case has finished (a SQL store sets its result column to NULL).
// newJournal is as for [Run]. A journal that cannot hold such an entry (the
// memory journal) has no need of it.
func RunDamaged(t *testing.T, newJournal func(t *testing.T) journaldriver.Journal, damage func(t *testing.T, j journaldriver.Journal, k journaldriver.Key)) {
	t.Helper()
	t.Run("FinishedWithoutResult", func(t *testing.T) {
		explain(t, "A finished entry without its result is damaged: reading it gives DataLoss, and it is neither replaced nor claimed anew.")
		j := newJournal(t)
		bad, good := key("damaged"), key("intact")
		for _, k := range []journaldriver.Key{bad, good} {
			claim(t, j, k, "owner-a", live)
			finish(t, j, k, "owner-a", textResult("charged"))
		}
		damage(t, j, bad)
		if _, _, err := j.Get(t.Context(), bad); errcode.Of(err) != errcode.DataLoss {
			t.Errorf("Get of the damaged entry = %v (%v), want DataLoss", err, errcode.Of(err))
		}
		if _, created, err := j.Claim(t.Context(), bad, digest(bad), idem(bad), "owner-b", live); errcode.Of(err) != errcode.DataLoss || created {
			t.Errorf("Claim of the damaged entry = created %v, %v (%v); want DataLoss, nothing created", created, err, errcode.Of(err))
		}
		if _, _, err := j.Get(t.Context(), bad); errcode.Of(err) != errcode.DataLoss {
			t.Errorf("Get after the Claim = %v, want DataLoss still (the entry left as it was)", err)
		}
		if e := mustGet(t, j, good); e.Result == nil || e.Result.Output.Text != "charged" {
			t.Errorf("the intact entry: %+v, want its result", e)
		}
		if l, ok := j.(journaldriver.Entries); ok {
			if _, err := l.ListEntries(t.Context(), journaldriver.EntryFilter{}, 10); errcode.Of(err) != errcode.DataLoss {
				t.Errorf("ListEntries over the damaged entry = %v, want DataLoss", err)
			}
		}
	})
}
