package core

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// encodeOutput turns a handler's result into an Output of at most l.max
// bytes (see [Options.MaxOutputBytes]), or returns a *tooLargeError. A
// string is used as it is, or cut when l.truncate is set; a value
// serialised as JSON is first measured without being encoded
// ([jsonSizeAtLeast]), so that one far past the limit is refused before
// any copy of it is made, and is then encoded once, into the string the
// Output holds.
func encodeOutput(v any, l outputLimit) (Output, error) {
	switch v := v.(type) {
	case nil:
		return Output{Null: true}, nil
	case string:
		return l.text(v)
	case Content:
		return l.parts(nonNil(v))
	case []Part:
		return l.parts(nonNil(v))
	case Part:
		return l.parts([]Part{v})
	case json.RawMessage:
		n := nonSpace(v)
		if n > l.max {
			return Output{}, l.tooLarge(n, true)
		}
		if n == len(v) && json.Valid(v) {
			return Output{Text: string(v)}, nil // already compact
		}
		var buf bytes.Buffer
		buf.Grow(len(v))
		if err := json.Compact(&buf, v); err != nil {
			return Output{}, err
		}
		if buf.Len() > l.max {
			return Output{}, l.tooLarge(buf.Len(), false)
		}
		return Output{Text: buf.String()}, nil
	case Output:
		switch {
		case v.Null:
			return Output{Null: true}, nil
		case v.Parts != nil:
			return l.parts(v.Parts)
		}
		return l.text(v.Text)
	}
	if rv := reflect.ValueOf(v); isNil(rv) {
		return Output{Null: true}, nil
	}
	if n := jsonSizeAtLeast(v, l.max); n > l.max {
		return Output{}, l.tooLarge(n, true)
	}
	var w lastWrite
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return Output{}, err
	}
	if len(w.s) > l.max {
		return Output{}, l.tooLarge(len(w.s), false)
	}
	return Output{Text: w.s}, nil
}

// lastWrite keeps what was last written to it, less a final newline, as a
// string: the one copy of what json.Encoder writes in one Write.
type lastWrite struct{ s string }

func (w *lastWrite) Write(b []byte) (int, error) {
	w.s = string(bytes.TrimSuffix(b, []byte("\n")))
	return len(b), nil
}

func nonNil(p []Part) []Part {
	if p == nil {
		return []Part{}
	}
	return p
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}
