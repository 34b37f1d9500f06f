package core_test

import (
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// TestCheckResults: results go to the service only when each call of the
// step has exactly one, in call order; anything else is refused (the run
// then ends Internal and the turn is canceled rather than answered
// wrongly).
func TestCheckResults(t *testing.T) {
	calls := []core.Call{{ID: "a"}, {ID: "b"}}
	res := func(ids ...string) []driver.ToolResult {
		var out []driver.ToolResult
		for _, id := range ids {
			out = append(out, driver.ToolResult{Call: core.Call{ID: id}})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		results []driver.ToolResult
		ok      bool
	}{
		{"paired", res("a", "b"), true},
		{"one missing", res("a"), false},
		{"one too many", res("a", "b", "b"), false},
		{"out of order", res("b", "a"), false},
		{"another call's", res("a", "c"), false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := core.CheckResults(calls, tc.results); (err == nil) != tc.ok {
				t.Errorf("CheckResults = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
