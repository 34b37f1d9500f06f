package core

import (
	"fmt"
	"strings"
	"unicode/utf8"

	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// tooLargeError reports arguments or an output past the runner's limit.
// Its text is what the model is told.
type tooLargeError struct {
	what    string // "arguments" or "output"
	size    int    // bytes, or a lower bound of them when atLeast
	atLeast bool
	limit   int
}

func (e *tooLargeError) Error() string {
	if e.atLeast {
		return fmt.Sprintf("%s too large (at least %d bytes; the limit is %d)", e.what, e.size, e.limit)
	}
	return fmt.Sprintf("%s too large (%d bytes; the limit is %d)", e.what, e.size, e.limit)
}

// outputLimit is what the runner accepts of one call's output.
type outputLimit struct {
	max      int  // bytes
	truncate bool // cut a text past max instead of failing the call
}

func (l outputLimit) tooLarge(size int, atLeast bool) error {
	return &tooLargeError{what: "output", size: size, atLeast: atLeast, limit: l.max}
}

// text returns s as an output, or cut to the limit, or an error saying it
// is too large.
func (l outputLimit) text(s string) (Output, error) {
	switch {
	case len(s) <= l.max:
		return Output{Text: s}, nil
	case l.truncate:
		return Output{Text: truncateText(s, l.max)}, nil
	}
	return Output{}, l.tooLarge(len(s), false)
}

// parts returns a content array as an output, or an error saying it is
// too large. Content arrays are never cut: a part cut short (an image, a
// file) is no use.
func (l outputLimit) parts(p []Part) (Output, error) {
	if n := partsSize(p); n > l.max {
		return Output{}, l.tooLarge(n, false)
	}
	return Output{Parts: p}, nil
}

// result returns jr within the limit, whatever produced it (a handler, a
// middleware, a *ModelError, a person's denial): a failure's message cut
// to the limit (a failure stays a failure); an output as [encodeOutput]
// bounds a handler's, refused (a TooLarge failure, with the error) or cut
// when l.truncate is set. Only lengths are read when jr is within the
// limit.
func (l outputLimit) result(jr journaldriver.Result) (journaldriver.Result, error) {
	switch {
	case jr.Failed:
		if len(jr.Error) > l.max {
			jr.Error = truncateText(jr.Error, l.max)
		}
		return jr, nil
	case jr.Output.Null:
		return jr, nil
	}
	var (
		out Output
		err error
	)
	if jr.Output.Parts != nil {
		out, err = l.parts(jr.Output.Parts)
	} else {
		out, err = l.text(jr.Output.Text)
	}
	if err != nil {
		return failed(TooLarge, err.Error()), err
	}
	jr.Output = out
	return jr, nil
}

// partsSize counts the bytes of the parts' contents.
func partsSize(parts []Part) int {
	n := 0
	for _, p := range parts {
		n += len(p.Type) + len(p.Text) + len(p.URL) + len(p.FileID) + len(p.Filename) + len(p.Data)
	}
	return n
}

// truncateText returns the start of s followed by a note saying how long s
// was, in at most max bytes (the note alone when max leaves no room for
// text). The cut never splits a UTF-8 sequence, and the result shares no
// memory with s, which may be dropped.
func truncateText(s string, max int) string {
	note := fmt.Sprintf("\n[output truncated: it was %d bytes; the limit is %d]", len(s), max)
	cut := min(len(s), max-len(note))
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	var b strings.Builder
	b.Grow(cut + len(note))
	b.WriteString(s[:cut])
	b.WriteString(note)
	return b.String()
}
