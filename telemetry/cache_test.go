package telemetry

import (
	"strconv"
	"testing"
)

// TestCacheBounded: a cache holds at most maxCached values, so that names
// a model makes up (a span's name is made of the tool's) cannot grow it
// without end; past the bound, store still returns the value it was given,
// and what was cached stays.
func TestCacheBounded(t *testing.T) {
	var c cache[string, string]
	for i := range maxCached + 100 {
		k := strconv.Itoa(i)
		if v := c.store(k, "execute_tool "+k); v != "execute_tool "+k {
			t.Fatalf("store(%q) = %q, want the value given", k, v)
		}
	}
	if n := len(c.m); n != maxCached {
		t.Errorf("the cache holds %d values, want %d", n, maxCached)
	}
	if v, ok := c.load("0"); !ok || v != "execute_tool 0" {
		t.Errorf("load(0) = %q, %v; want the first value, cached", v, ok)
	}
	if _, ok := c.load(strconv.Itoa(maxCached)); ok {
		t.Errorf("a value past the bound was cached")
	}
}
