// Package fakeapi holds what both fakes (openaitest, foundrytest) answer
// the same way, as the OpenAI-style APIs they imitate do: cursor pages of
// lists, and the error envelope; and how both serve: on a listener of the
// caller's or a free loopback port, holding a request a fault delays.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolrelay/toolrelay/core/driver"
)

// PageError is a refused list parameter.
type PageError struct {
	// Param names the parameter ("limit", "order", "after").
	Param string
	// Message is the service's message.
	Message string
	// NotFound reports an after cursor that names nothing (404 rather
	// than 400).
	NotFound bool
}

// Page applies the list parameters of q to all, which is in creation
// order: after (the id of the element the page starts past), limit (1 to
// 100, default 20) and order ("asc" or "desc", default "desc"). id gives
// an element's id. It returns the page and whether more follow.
func Page[T any](all []T, id func(T) string, q url.Values) (page []T, more bool, err *PageError) {
	limit := 20
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			return nil, false, &PageError{Param: "limit", Message: "limit must be between 1 and 100."}
		}
		limit = n
	}
	list := slices.Clone(all)
	switch strings.ToLower(q.Get("order")) {
	case "", "desc":
		slices.Reverse(list)
	case "asc":
	default:
		return nil, false, &PageError{Param: "order", Message: "order must be 'asc' or 'desc'."}
	}
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(list, func(e T) bool { return id(e) == after })
		if i < 0 {
			return nil, false, &PageError{Param: "after", Message: "Item with id '" + after + "' not found.", NotFound: true}
		}
		list = list[i+1:]
	}
	if len(list) > limit {
		return list[:limit], true, nil
	}
	return list, false, nil
}

// List returns the list object of a page: data, the ids of its first and
// last elements (null for an empty page) and has_more.
func List[T any](page []T, more bool, id func(T) string, data any) map[string]any {
	l := map[string]any{"object": "list", "data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(page) > 0 {
		l["first_id"], l["last_id"] = id(page[0]), id(page[len(page)-1])
	}
	return l
}

// Envelope returns the error object the APIs answer with, its members in
// the services' order: {"error": {"message", "type", "param", "code", then
// extra's members}}; an empty code or param is null.
func Envelope(typ, code, param, message string, extra map[string]any) json.RawMessage {
	nullable := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	b, _ := json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{message, typ, nullable(param), nullable(code)})
	if len(extra) > 0 {
		more, _ := json.Marshal(extra)
		b = append(append(b[:len(b)-1], ','), more[1:]...)
	}
	return append(append([]byte(`{"error":`), b...), '}')
}

// Chunks splits text into pieces of at most size runes, as the fakes
// stream a text in deltas; size ≤ 0, or a text that short, is one piece.
// The pieces concatenate to text, and no rune is split.
func Chunks(text string, size int) []string {
	if size <= 0 || utf8.RuneCountInString(text) <= size {
		return []string{text}
	}
	var out []string
	for len(text) > 0 {
		n, i := 0, 0
		for i < len(text) && n < size {
			_, w := utf8.DecodeRuneInString(text[i:])
			i += w
			n++
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return out
}

// InputParts returns the image and file parts of an input, in order: of a
// content array, or of the content arrays of an array of messages; none
// for a string.
func InputParts(raw json.RawMessage) []driver.Part {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	var parts []driver.Part
	for _, e := range elems {
		var head struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(e, &head) != nil {
			continue
		}
		switch head.Type {
		case "input_image", "input_file":
			var p driver.Part
			if json.Unmarshal(e, &p) == nil {
				parts = append(parts, p)
			}
		default:
			parts = append(parts, InputParts(head.Content)...)
		}
	}
	return parts
}

// Metadata reads the metadata member of a request as the APIs do: absent
// (given false) leaves an object's metadata as it was; null or {} clears
// it (md is empty, not nil); more than 16 pairs, a key longer than 64
// characters or a value longer than 512 is refused, with the service's
// message in refusal.
func Metadata(raw json.RawMessage) (md map[string]string, given bool, refusal string) {
	if len(raw) == 0 {
		return nil, false, ""
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, true, "Invalid 'metadata': expected an object of string values."
	}
	if md == nil {
		md = map[string]string{}
	}
	if len(md) > 16 {
		return nil, true, fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with %d properties instead.", len(md))
	}
	for k, v := range md {
		if n := utf8.RuneCountInString(k); n > 64 {
			return nil, true, fmt.Sprintf("Invalid 'metadata': keys must be at most 64 characters, but a key has %d.", n)
		}
		if n := utf8.RuneCountInString(v); n > 512 {
			return nil, true, fmt.Sprintf("Invalid 'metadata.%s': string too long. Expected a string with maximum length 512, but got a string with length %d instead.", k, n)
		}
	}
	return md, true, ""
}
