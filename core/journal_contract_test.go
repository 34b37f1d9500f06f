package core_test

import (
	"testing"

	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/journaltest"
)

func TestMemoryJournalContract(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) driver.Journal { return driver.NewMemory() })
}

func TestMemoryJournalRace(t *testing.T) {
	j := driver.NewMemory()
	journaltest.Race(t, []driver.Journal{j, j, j, j}, 1000)
}

func BenchmarkMemoryJournal(b *testing.B) {
	journaltest.Benchmark(b, driver.NewMemory())
}
