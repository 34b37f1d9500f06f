package defaults_test

import (
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/internal/defaults"
)

func TestPositive(t *testing.T) {
	tests := []struct {
		set, want time.Duration
	}{
		{set: 0, want: time.Minute},
		{set: -time.Second, want: time.Minute},
		{set: time.Nanosecond, want: time.Nanosecond},
		{set: time.Hour, want: time.Hour},
	}
	for _, tt := range tests {
		got := tt.set
		defaults.Positive(&got, time.Minute)
		if got != tt.want {
			t.Errorf("Positive(%v, 1m) set %v, want %v", tt.set, got, tt.want)
		}
	}
	n := 0
	defaults.Positive(&n, 8)
	if n != 8 {
		t.Errorf("Positive(0, 8) on an int set %d, want 8", n)
	}
}
