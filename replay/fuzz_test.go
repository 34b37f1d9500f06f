package replay_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrelay/toolrelay/replay"
	"go.yaml.in/yaml/v4"
)

// FuzzRedact puts a secret in every form a cassette can hold it (header,
// query, JSON field, form field, event stream, free text) and checks that
// no form of it is left after Redact, and that Redact of a redacted
// interaction changes nothing (replay compares both the same way).
func FuzzRedact(f *testing.F) {
	f.Add("s3cr3t-value-1", "note")
	f.Add("sk-proj-abcdefghijklmnop", "hello world")
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "x=1")
	f.Add(`quote"and\back`, `{"a":1}`)
	f.Fuzz(func(t *testing.T, secret, text string) {
		if len(secret) < 8 || strings.ContainsFunc(secret, func(r rune) bool {
			return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '&' || r == '=' || r == ';' || r == ',' || r == '"' || r == '\'' || r == '\\'
		}) {
			t.Skip("not a secret the forms can carry whole")
		}
		if strings.Contains(text, secret) || strings.Contains(replay.Mask, secret) {
			t.Skip("the text holds the secret itself")
		}
		q := url.QueryEscape(secret)
		jsonSecret := strings.ReplaceAll(secret, `"`, `\"`)
		i := &replay.Interaction{
			Request: replay.Request{
				Method: "POST",
				URL:    "https://example.test/v1/things?api-version=1&sig=" + q + "&key=" + q + "&code=" + q + "&text=" + url.QueryEscape(text),
				Headers: http.Header{
					"Authorization":     {"Bearer " + secret},
					"Api-Key":           {secret},
					"Cookie":            {"session=" + secret},
					"X-Ms-Client-Token": {secret},
					"X-Note":            {text},
				},
				Body: `{"text":` + strings.TrimSpace(jsonQuote(text)) + `,"api_key":"` + jsonSecret + `","nested":{"client_secret":"` + jsonSecret + `","auth":"Bearer ` + jsonSecret + `"}}`,
			},
			Response: replay.Response{
				Code:    200,
				Headers: http.Header{"Set-Cookie": {"a=" + secret}, "Content-Type": {"text/event-stream"}},
				Body:    "event: token\ndata: {\"access_token\":\"" + jsonSecret + "\",\"token_type\":\"Bearer\"}\n\ndata: Authorization: Bearer " + secret + "\n\n",
			},
		}
		form := &replay.Interaction{Request: replay.Request{Method: "POST", URL: "https://login.test/token",
			Body: "grant_type=client_credentials&client_secret=" + q + "&refresh_token=" + q + "&scope=x"}}
		for _, it := range []*replay.Interaction{i, form} {
			replay.Redact(it)
			b, err := yaml.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{secret, q} {
				if strings.Contains(string(b), s) {
					t.Fatalf("the redacted interaction holds %q:\n%s", s, b)
				}
			}
			again := *it
			again.Request.Headers = it.Request.Headers.Clone()
			again.Response.Headers = it.Response.Headers.Clone()
			replay.Redact(&again)
			if diff := cmp.Diff(it, &again); diff != "" {
				t.Fatalf("Redact is not idempotent (-once +twice):\n%s", diff)
			}
		}
	})
}

func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(" ")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
