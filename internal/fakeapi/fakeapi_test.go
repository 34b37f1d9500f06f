package fakeapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

func TestPage(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e"} // creation order
	id := func(s string) string { return s }
	tests := []struct {
		query string
		want  []string
		more  bool
		err   string // the refused parameter
	}{
		{"", []string{"e", "d", "c", "b", "a"}, false, ""},
		{"order=asc&limit=2", []string{"a", "b"}, true, ""},
		{"order=asc&limit=2&after=b", []string{"c", "d"}, true, ""},
		{"order=ASC&after=d", []string{"e"}, false, ""},
		{"after=b", []string{"a"}, false, ""},
		{"limit=0", nil, false, "limit"},
		{"limit=101", nil, false, "limit"},
		{"limit=x", nil, false, "limit"},
		{"order=up", nil, false, "order"},
		{"after=z", nil, false, "after"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		page, more, err := fakeapi.Page(all, id, q)
		if tt.err != "" {
			if err == nil || err.Param != tt.err || err.NotFound != (tt.err == "after") {
				t.Errorf("Page(%q) error = %+v, want one about %s", tt.query, err, tt.err)
			}
			continue
		}
		if err != nil || more != tt.more {
			t.Errorf("Page(%q) = more %v, err %+v; want more %v", tt.query, more, err, tt.more)
		}
		if diff := cmp.Diff(tt.want, page); diff != "" {
			t.Errorf("Page(%q) (-want +got):\n%s", tt.query, diff)
		}
	}
	if got := fakeapi.List([]string{}, false, id, []string{}); got["first_id"] != nil || got["last_id"] != nil {
		t.Errorf("an empty list's ids = %v, %v; want null", got["first_id"], got["last_id"])
	}
}

func TestEnvelope(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []byte
		want string
	}{
		{"openai", fakeapi.Envelope("invalid_request_error", "", "", "No.", nil),
			`{"error":{"message":"No.","type":"invalid_request_error","param":null,"code":null}}`},
		{"azure", fakeapi.Envelope("invalid_request_error", "not_found", "id", "Gone.", map[string]any{"details": []any{}}),
			`{"error":{"message":"Gone.","type":"invalid_request_error","param":"id","code":"not_found","details":[]}}`},
	} {
		if string(tt.got) != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		text string
		size int
		want []string
	}{
		{"hello", 0, []string{"hello"}},
		{"hello", 5, []string{"hello"}},
		{"hello", 2, []string{"he", "ll", "o"}},
		{"", 3, []string{""}},
		{"日本語です", 2, []string{"日本", "語で", "す"}},
		{"a\xffb", 1, []string{"a", "\xff", "b"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, fakeapi.Chunks(tt.text, tt.size)); diff != "" {
			t.Errorf("Chunks(%q, %d) (-want +got):\n%s", tt.text, tt.size, diff)
		}
	}
}

func TestMetadata(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    map[string]string
		given   bool
		refused bool
	}{
		{"absent", ``, nil, false, false},
		{"null clears", `null`, map[string]string{}, true, false},
		{"{} clears", `{}`, map[string]string{}, true, false},
		{"pairs", `{"a":"1","b":"2"}`, map[string]string{"a": "1", "b": "2"}, true, false},
		{"a 64-rune key", `{"` + strings.Repeat("é", 64) + `":"v"}`, map[string]string{strings.Repeat("é", 64): "v"}, true, false},
		{"a 65-rune key", `{"` + strings.Repeat("k", 65) + `":"v"}`, nil, true, true},
		{"a 513-rune value", `{"k":"` + strings.Repeat("v", 513) + `"}`, nil, true, true},
		{"17 pairs", `{"a":"","b":"","c":"","d":"","e":"","f":"","g":"","h":"","i":"","j":"","k":"","l":"","m":"","n":"","o":"","p":"","q":""}`, nil, true, true},
		{"a number", `{"a":1}`, nil, true, true},
	}
	for _, tt := range tests {
		md, given, refusal := fakeapi.Metadata(json.RawMessage(tt.raw))
		if diff := cmp.Diff(tt.want, md); diff != "" {
			t.Errorf("%s: metadata (-want +got):\n%s", tt.name, diff)
		}
		if given != tt.given || (refusal != "") != tt.refused {
			t.Errorf("%s: given %v, refusal %q; want given %v, refused %v", tt.name, given, refusal, tt.given, tt.refused)
		}
	}
}
