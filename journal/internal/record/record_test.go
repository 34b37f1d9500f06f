package record

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/journal/driver"
)

func TestStates(t *testing.T) {
	for _, s := range []driver.State{driver.Started, driver.Succeeded, driver.Failed, driver.Submitted} {
		got, err := ParseState(s.String())
		if err != nil || got != s {
			t.Errorf("ParseState(%v.String()) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseState("done"); err == nil {
		t.Errorf("ParseState(done) succeeded, want an error")
	}
}

func TestResult(t *testing.T) {
	for _, r := range []driver.Result{
		{},
		{Output: core.Output{Parts: []core.Part{}}},
		{Output: core.Output{Null: true}},
		{Failed: true, Error: "e", Outcome: core.InDoubt},
	} {
		s, err := EncodeResult(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeResult(s)
		if err != nil {
			t.Fatalf("DecodeResult(%s): %v", s, err)
		}
		if diff := cmp.Diff(r, *got); diff != "" {
			t.Errorf("%s read back (-want +got):\n%s", s, diff)
		}
	}
	for _, bad := range []string{"", "{", `{"outcome":"exploded"}`} {
		if _, err := DecodeResult(bad); err == nil {
			t.Errorf("DecodeResult(%q) succeeded, want an error", bad)
		}
	}
}
