package core

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseArgs checks parseArgs on any input: it never panics; it accepts
// only what is valid JSON (directly, or inside a JSON string); what it
// accepts is an object whose canonical form is valid JSON, parses back to
// itself, and does not depend on the space around the input.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `""`, `{}`, `{"a":1}`, `"{\"a\":1}"`, `{"b":[1,2,{"c":null}],"a":"x"}`,
		`{}]`, "\f{}", `{"a":1}{}`, `[1]`, `"[1]"`, `{"a":1e400}`, `{"a":"\u00e9\ud800"}`, ` {"a" : true } `,
		`{"a":1,"a":2}`, `"\"\""`, `"null"`, `{"<>&":"<>&"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canon, obj, err := parseArgs(raw)
		if err != nil {
			return
		}
		if obj == nil {
			t.Fatalf("parseArgs(%q) gave no object", raw)
		}
		body := trimJSONSpace(raw)
		if len(body) > 0 && body[0] == '"' {
			var inner string
			if json.Unmarshal(body, &inner) != nil {
				t.Fatalf("parseArgs(%q) accepted an invalid JSON string", raw)
			}
			body = trimJSONSpace([]byte(inner))
		}
		if len(body) > 0 && !json.Valid(body) {
			t.Fatalf("parseArgs(%q) accepted invalid JSON", raw)
		}
		if !json.Valid(canon) || canon[0] != '{' {
			t.Fatalf("canonical form %q of %q is not a JSON object", canon, raw)
		}
		again, _, err := parseArgs(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("canonical form %q of %q parses to %q, %v", canon, raw, again, err)
		}
		spaced, _, err := parseArgs(append(append([]byte(" \n\t"), raw...), "\r\n "...))
		if err != nil || !bytes.Equal(spaced, canon) {
			t.Fatalf("%q with space around parses to %q, %v; want %q", raw, spaced, err, canon)
		}
	})
}
