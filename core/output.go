package core

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// Output is what a call returns to the model: text, a content array, or
// nothing. Backends read it to build their protocol's result.
type Output struct {
	// Text is the output as a string: a string result as it was returned,
	// anything else serialised as JSON. It is empty when Parts or Null is set.
	Text string `json:"text,omitempty"`
	// Parts holds a content array, when the handler returned [Content].
	Parts []Part `json:"parts,omitempty"`
	// Null is set when the handler returned nil.
	Null bool `json:"null,omitempty"`
}

// String returns the output as a single string, for protocols that accept
// only strings: Text; "null" for a nil result; for a content array, the text
// parts joined by newlines when all parts are text, else the parts as a JSON
// array of input content items.
func (o Output) String() string {
	switch {
	case o.Null:
		return "null"
	case o.Parts == nil:
		return o.Text
	}
	texts := make([]string, 0, len(o.Parts))
	for _, p := range o.Parts {
		if p.Type != PartText {
			b, _ := json.Marshal(o.Parts)
			return string(b)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// PartType names the kind of a content Part.
type PartType string

// The kinds of content part.
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
	PartFile  PartType = "file"
)

// A Part is one element of a content array: text, an image or a file.
// It marshals to JSON in the OpenAI input-content shape both supported
// services read ({"type":"input_text","text":…}, "input_image",
// "input_file").
type Part struct {
	// Type is the kind of part.
	Type PartType
	// Text is the text of a text part.
	Text string
	// URL is an image's or file's URL (which may be a data: URL).
	URL string
	// FileID names a file uploaded to the service.
	FileID string
	// Filename names a file part.
	Filename string
	// Data holds a file's content, base64-encoded.
	Data string
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// ImagePart returns an image part for an image URL (https: or data:).
func ImagePart(url string) Part { return Part{Type: PartImage, URL: url} }

// FilePart returns a file part naming a file uploaded to the service.
func FilePart(fileID string) Part { return Part{Type: PartFile, FileID: fileID} }

// Content is a content array. A handler returns one to send its output as
// an array of parts, where the backend accepts arrays; elsewhere it is sent
// as [Output.String] renders it.
type Content []Part

type partJSON struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
}

// MarshalJSON encodes the part as an OpenAI input-content item.
func (p Part) MarshalJSON() ([]byte, error) {
	j := partJSON{Type: "input_" + string(p.Type), Text: p.Text, FileID: p.FileID, Filename: p.Filename, FileData: p.Data}
	switch p.Type {
	case PartImage:
		j.ImageURL = p.URL
	case PartFile:
		j.FileURL = p.URL
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes an OpenAI input-content item.
func (p *Part) UnmarshalJSON(b []byte) error {
	var j partJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Part{Type: PartType(strings.TrimPrefix(j.Type, "input_")), Text: j.Text, URL: j.ImageURL + j.FileURL, FileID: j.FileID, Filename: j.Filename, Data: j.FileData}
	return nil
}

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
