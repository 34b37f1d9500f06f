package core_test

import (
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/journal/journaltest"
)

func TestMemoryJournalContract(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) core.Journal { return core.NewMemoryJournal() })
}

func TestMemoryJournalRace(t *testing.T) {
	j := core.NewMemoryJournal()
	journaltest.Race(t, []core.Journal{j, j, j, j}, 1000)
}

func BenchmarkMemoryJournal(b *testing.B) {
	journaltest.Benchmark(b, core.NewMemoryJournal())
}
