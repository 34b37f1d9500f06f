package record_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/internal/record"
)

// FuzzResultRoundTrip checks that every result with a known outcome reads
// back exactly as it was written, and that one with an unknown outcome is
// refused rather than written.
func FuzzResultRoundTrip(f *testing.F) {
	f.Add("hello", "", false, false, 0, "", "")
	f.Add("", "boom", true, false, int(driver.ToolError), "", "")
	f.Add("", "", false, true, 0, "", "")
	f.Add("", "", false, false, 0, "text", "part")
	f.Add("", "", false, false, 0, "image", "https://example.com/a.png")
	f.Add("\x00\xff", "\u2028", true, false, 49, "", "")
	f.Add("", "", false, false, -1, "", "")
	f.Fuzz(func(t *testing.T, text, errText string, failed, null bool, outcome int, partType, partValue string) {
		r := &journaldriver.Result{Output: driver.Output{Text: text, Null: null}, Failed: failed, Error: errText, Outcome: driver.Outcome(outcome)}
		switch partType {
		case "text":
			r.Output = driver.Output{Parts: driver.Content{driver.TextPart(partValue)}}
		case "image":
			r.Output = driver.Output{Parts: driver.Content{driver.ImagePart(partValue)}}
		case "empty":
			r.Output = driver.Output{Parts: driver.Content{}}
		}
		s, err := record.EncodeResult(r)
		if outcome < int(driver.OK) || outcome > int(driver.Denied) {
			if err == nil {
				t.Fatalf("EncodeResult wrote a result of unknown outcome %d: %s", outcome, s)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		back, err := record.DecodeResult(s)
		if err != nil {
			t.Fatalf("DecodeResult(%s): %v", s, err)
		}
		// JSON holds only valid UTF-8: invalid bytes read back as U+FFFD,
		// as they would be sent to the service; the rest reads back exactly.
		if isUTF8(text, errText, partValue) {
			if diff := cmp.Diff(r, back); diff != "" {
				t.Fatalf("round trip of %s (-want +got):\n%s", s, diff)
			}
		}
	})
}

// FuzzDecodeResult checks DecodeResult on any text: it never panics, never
// gives an unknown outcome, and what it reads writes back to text that
// reads the same.
func FuzzDecodeResult(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hi","parts":null,"outcome":"ok"}`,
		`{"parts":[{"type":"input_text","text":"a"}],"outcome":"ok"}`,
		`{"failed":true,"error":"boom","parts":null,"outcome":"tool_error"}`,
		`{"parts":null,"outcome":49}`, `{"parts":null,"outcome":-1}`, `{"outcome":"nope"}`,
		`{}`, `null`, `[]`, `{"text":1}`, `{"parts":[{"type":3}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := record.DecodeResult(s)
		if err != nil {
			return
		}
		if r.Outcome < driver.OK || r.Outcome > driver.Denied {
			t.Fatalf("DecodeResult(%s) gave unknown outcome %d", s, int(r.Outcome))
		}
		s2, err := record.EncodeResult(r)
		if err != nil {
			t.Fatalf("EncodeResult of what DecodeResult(%s) read: %v", s, err)
		}
		r2, err := record.DecodeResult(s2)
		if err != nil {
			t.Fatalf("DecodeResult(%s): %v", s2, err)
		}
		s3, err := record.EncodeResult(r2)
		if err != nil || s3 != s2 {
			t.Fatalf("%s encodes to %s, then %s (%v)", s, s2, s3, err)
		}
	})
}

func isUTF8(ss ...string) bool {
	for _, s := range ss {
		for _, r := range s {
			if r == '\uFFFD' {
				return false
			}
		}
	}
	return true
}
