package replay_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/replay"
)

// TestOpenParsesOnce opens one cassette many times, some at once: its
// file is parsed once; rewritten (a new modification time), it is parsed
// again; and the cache keeps at most replay.MaxCached cassettes.
func TestOpenParsesOnce(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "openai.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "openai.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func() {
		t.Helper()
		c, err := replay.OpenFile(replay.Replay, file, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if n := len(c.Unplayed()); n != 7 {
			t.Errorf("%d recorded requests unplayed, want 7", n)
		}
	}

	before := replay.Parses()
	open()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				open()
			}
		})
	}
	wg.Wait()
	if n := replay.Parses() - before; n != 1 {
		t.Errorf("81 opens of one cassette parsed it %d times, want 1", n)
	}

	// Rewritten: parsed again, once.
	if err := os.Chtimes(file, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	open()
	open()
	if n := replay.Parses() - before; n != 2 {
		t.Errorf("after the file changed, %d parses in all, want 2", n)
	}

	// Bounded: past MaxCached other cassettes, the first is parsed again.
	for i := range replay.MaxCached {
		other := filepath.Join(dir, "other"+string(rune('a'+i%26))+string(rune('a'+i/26))+".yaml")
		if err := os.WriteFile(other, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := replay.OpenFile(replay.Replay, other, nil); err != nil {
			t.Fatal(err)
		}
	}
	before = replay.Parses()
	open()
	if n := replay.Parses() - before; n != 1 {
		t.Errorf("after %d other cassettes, opening the first parsed %d times, want 1 (evicted)", replay.MaxCached, n)
	}
}

// TestOpenReplaysFresh replays a cached cassette twice: each Open starts
// with every recorded request unplayed (the cache shares what was parsed,
// not what was played).
func TestOpenReplaysFresh(t *testing.T) {
	file := filepath.Join("testdata", "openai.yaml")
	for range 2 {
		c, err := replay.OpenFile(replay.Replay, file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.Unplayed()); n != 7 {
			t.Fatalf("%d recorded requests unplayed on open, want 7", n)
		}
	}
}

// BenchmarkOpen opens the checked-in openai cassette for replay.
func BenchmarkOpen(b *testing.B) {
	file := filepath.Join("testdata", "openai.yaml")
	b.ReportAllocs()
	for b.Loop() {
		c, err := replay.OpenFile(replay.Replay, file, nil)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
