package sqlitejournal_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
)

// BenchmarkSetNote measures one note set, as a run's totals are after
// every step (issue 48, item 1).
func BenchmarkSetNote(b *testing.B) {
	j, err := sqlitejournal.Open(context.Background(), filepath.Join(b.TempDir(), "j.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	v := `{"steps":3,"calls":[{"thread":"conv_1","turn":"t","id":"call_1"}]}` + strings.Repeat(" ", 100)
	b.ReportAllocs()
	for b.Loop() {
		if err := j.SetNote(context.Background(), "foundry", "conv_1", "totals", v); err != nil {
			b.Fatal(err)
		}
	}
}
