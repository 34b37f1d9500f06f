package journaltest

import (
	"testing"
	"time"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// noteCases are the rules of [journaldriver.Notes], checked for journals that
// implement it.
var noteCases = []optionalCase[journaldriver.Notes]{
	{
		name:        "NoteSetGet",
		explanation: "Note returns what SetNote recorded for the same backend, thread and name, the last value set; nothing for another backend, thread or name.",
		f: func(t *testing.T, j journaldriver.Notes) {
			ctx := t.Context()
			if _, ok, err := j.Note(ctx, "journaltest", "thread-1", "trace"); ok || err != nil {
				t.Fatalf("Note before any = %v, %v; want none", ok, err)
			}
			for _, v := range []string{"first", "second"} {
				if err := j.SetNote(ctx, "journaltest", "thread-1", "trace", v); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.SetNote(ctx, "journaltest", "thread-2", "trace", "other thread"); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				backend, thread, name string
				want                  string
				ok                    bool
			}{
				{"journaltest", "thread-1", "trace", "second", true},
				{"journaltest", "thread-2", "trace", "other thread", true},
				{"another", "thread-1", "trace", "", false},
				{"journaltest", "thread-1", "other", "", false},
			} {
				got, ok, err := j.Note(ctx, tc.backend, tc.thread, tc.name)
				if got != tc.want || ok != tc.ok || err != nil {
					t.Errorf("Note(%s, %s, %s) = %q, %v, %v; want %q, %v", tc.backend, tc.thread, tc.name, got, ok, err, tc.want, tc.ok)
				}
			}
		},
	},
	{
		name:        "NotePrune",
		explanation: "Prune deletes the notes set before its time and keeps the others.",
		f: func(t *testing.T, j journaldriver.Notes) {
			ctx := t.Context()
			if err := j.SetNote(ctx, "journaltest", "thread-1", "trace", "v"); err != nil {
				t.Fatal(err)
			}
			prune := j.(journaldriver.Journal).Prune
			if _, err := prune(ctx, time.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := j.Note(ctx, "journaltest", "thread-1", "trace"); !ok || err != nil {
				t.Fatalf("a note set after Prune's time: %v, %v; want it kept", ok, err)
			}
			if _, err := prune(ctx, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := j.Note(ctx, "journaltest", "thread-1", "trace"); ok || err != nil {
				t.Errorf("a note set before Prune's time: %v, %v; want it deleted", ok, err)
			}
		},
	},
}
