package core

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestJSONSizeAtLeast checks that jsonSizeAtLeast never counts more than
// encoding/json writes, counts most of it for plain data (so that an
// output far past the limit is refused before it is encoded), and stops
// early past its limit.
func TestJSONSizeAtLeast(t *testing.T) {
	type row struct {
		ID    int    `json:"id"`
		Name  string `json:"name"`
		Note  string `json:"note,omitempty"`
		Skip  string `json:"-"`
		Dash  string `json:"-,"`
		Bytes []byte
		inner string
	}
	type embedded struct {
		row
		Extra string `json:"extra"`
	}
	type twins struct {
		A string `json:"C"` // wins over C, which is dropped
		C string
		D string
	}
	type marshals struct {
		When time.Time       `json:"when"`
		Raw  json.RawMessage `json:"raw"`
		Num  json.Number     `json:"num"`
		Any  any             `json:"any"`
	}
	type node struct {
		Next *node `json:"next,omitempty"`
		Name string
	}
	deep := &node{Name: "a"}
	for range 1500 {
		deep = &node{Next: deep, Name: "a"}
	}
	tests := []struct {
		name  string
		v     any
		tight float64 // the bound is at least this share of the encoding
	}{
		{"string", "héllo", 1},
		{"number", 12345, 0.2},
		{"json.Number", json.Number("12345"), 1},
		{"bool", true, 1},
		{"nil pointer", (*row)(nil), 1},
		{"slice", []int{1, 22, 333}, 0.5},
		{"nil slice", []string(nil), 1},
		{"bytes", []byte("some bytes to encode"), 1},
		{"empty bytes", []byte{}, 1},
		{"map", map[string]int{"a": 1, "bb": 22}, 0.8},
		{"int-keyed map", map[int]string{1: "x", 22: "yy"}, 0.6},
		{"struct", row{ID: 7, Name: "seven", Note: "n", Skip: "s", Dash: "d", Bytes: []byte("xyz"), inner: "i"}, 0.6},
		{"embedded struct", embedded{row: row{Name: "r"}, Extra: "e"}, 0.2},
		{"fields sharing a name", twins{A: "aaaa", C: "cccc", D: "d"}, 0.4},
		{"marshalers", marshals{When: time.Unix(0, 0).UTC(), Raw: json.RawMessage(` { "a" : [1, 2] } `), Num: "1.5", Any: map[string]any{"k": []any{"v", 1.5, nil}}}, 0.4},
		{"rows", func() []row {
			rs := make([]row, 100)
			for i := range rs {
				rs[i] = row{ID: i, Name: strings.Repeat("n", i)}
			}
			return rs
		}(), 0.8},
		{"deep pointers", deep, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			got := jsonSizeAtLeast(tt.v, math.MaxInt/2)
			if got > len(b) {
				t.Errorf("jsonSizeAtLeast = %d, more than the %d bytes of %s", got, len(b), b)
			}
			if float64(got) < tt.tight*float64(len(b)) {
				t.Errorf("jsonSizeAtLeast = %d, less than %.0f%% of the %d bytes of %s", got, 100*tt.tight, len(b), b)
			}
		})
	}
}

// TestJSONSizeAtLeastStops checks that the walk of a value past the limit
// stops once the bound passes it, without allocating.
func TestJSONSizeAtLeastStops(t *testing.T) {
	const limit = 1000
	elem := strings.Repeat("x", 100)
	rows := make([]string, 1<<16)
	for i := range rows {
		rows[i] = elem
	}
	// The brackets and commas of rows alone pass the limit.
	if got := jsonSizeAtLeast(rows, limit); got <= limit {
		t.Errorf("jsonSizeAtLeast(%d rows) = %d, want past %d", len(rows), got, limit)
	}
	// Twenty rows do not: the walk stops at the row that passes it.
	v := map[string]any{"rows": rows[:20]}
	if got := jsonSizeAtLeast(v, limit); got <= limit || got > limit+len(elem)+2 {
		t.Errorf("jsonSizeAtLeast(20 rows) = %d, want just past %d", got, limit)
	}
	// It allocates a few words (reflect's map iteration), whatever the
	// size of the value.
	if n := testing.AllocsPerRun(10, func() { jsonSizeAtLeast(v, limit) }); n > 3 {
		t.Errorf("jsonSizeAtLeast allocates %v times per call, want at most 3", n)
	}
}
