package journaltest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// listingJournal is a journal that lists its entries.
type listingJournal interface {
	journaldriver.Journal
	journaldriver.Entries
}

// entryCases are the rules of [journaldriver.Entries], checked for journals that
// implement it.
var entryCases = []optionalCase[listingJournal]{
	{
		name:        "ListEntries",
		explanation: "ListEntries returns the entries of a backend, a thread, a state (or any), or those in doubt (started, lease ended), least recently updated first, at most limit, each as Get returns it.",
		f: func(t *testing.T, j listingJournal) {
			running, doubt, failed, done := key("running"), key("doubt"), key("failed"), key("done")
			other := journaldriver.Key{Backend: "journaltest", Thread: "thread-2", Turn: "turn-1", Call: "other"}
			pause := func() { time.Sleep(5 * time.Millisecond) } // distinct update times
			claim(t, j, running, "owner-a", live)
			pause()
			claim(t, j, doubt, "owner-dead", expired)
			pause()
			claim(t, j, failed, "owner-a", live)
			finish(t, j, failed, "owner-a", journaldriver.Result{Failed: true, Error: "no", Outcome: driver.ToolError})
			pause()
			claim(t, j, other, "owner-a", live)
			finish(t, j, other, "owner-a", textResult("elsewhere"))
			pause()
			claim(t, j, done, "owner-a", live)
			finish(t, j, done, "owner-a", textResult("fine"))
			markSubmitted(t, j, done)

			calls := func(es []journaldriver.Entry) []string {
				out := []string{}
				for _, e := range es {
					out = append(out, e.Key.Call)
				}
				return out
			}
			for _, tc := range []struct {
				name  string
				f     journaldriver.EntryFilter
				limit int
				want  []string
			}{
				{"all", journaldriver.EntryFilter{}, 10, []string{"running", "doubt", "failed", "other", "done"}},
				{"limit", journaldriver.EntryFilter{}, 2, []string{"running", "doubt"}},
				{"backend", journaldriver.EntryFilter{Backend: "journaltest"}, 10, []string{"running", "doubt", "failed", "other", "done"}},
				{"other backend", journaldriver.EntryFilter{Backend: "nope"}, 10, []string{}},
				{"thread", journaldriver.EntryFilter{Thread: "thread-2"}, 10, []string{"other"}},
				{"started", journaldriver.EntryFilter{State: journaldriver.Started}, 10, []string{"running", "doubt"}},
				{"in doubt", journaldriver.EntryFilter{InDoubt: true}, 10, []string{"doubt"}},
				{"failed", journaldriver.EntryFilter{State: journaldriver.Failed}, 10, []string{"failed"}},
				{"submitted in thread", journaldriver.EntryFilter{Thread: "thread-1", State: journaldriver.Submitted}, 10, []string{"done"}},
			} {
				got, err := j.ListEntries(t.Context(), tc.f, tc.limit)
				if err != nil {
					t.Fatalf("ListEntries(%s): %v", tc.name, err)
				}
				if diff := cmp.Diff(tc.want, calls(got)); diff != "" {
					t.Errorf("ListEntries(%s %+v, %d) (-want +got):\n%s", tc.name, tc.f, tc.limit, diff)
				}
				for _, e := range got {
					want := mustGet(t, j, e.Key)
					if diff := cmp.Diff(want, e, equateTimes); diff != "" {
						t.Errorf("ListEntries(%s): %s differs from Get (-Get +listed):\n%s", tc.name, e.Key.Call, diff)
					}
				}
			}
		},
	},
}
