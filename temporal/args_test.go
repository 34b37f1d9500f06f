package temporal

import (
	"encoding/json"
	"testing"
)

// TestArgsRoundTrip: arguments of any form survive the history's JSON.
func TestArgsRoundTrip(t *testing.T) {
	for _, args := range []string{``, `{}`, `{"a":1}`, `{"a":`, `not json`, `"{\"a\":1}"`, `null`, `{"toolrelay.raw_arguments":"x"}`} {
		w := wrapArgs(json.RawMessage(args))
		if !json.Valid(w) {
			t.Errorf("wrapArgs(%q) = %q, not JSON", args, w)
		}
		b, err := json.Marshal(struct{ A json.RawMessage }{w})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		var back struct{ A json.RawMessage }
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := string(unwrapArgs(back.A)); got != args {
			t.Errorf("round trip of %q gave %q", args, got)
		}
	}
}
