package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// parseArgs parses the arguments of a call and returns them in canonical
// JSON (an object with sorted keys and no insignificant space) and as the
// object parsed, its numbers as json.Number. Arguments may arrive as a
// JSON object, as a JSON string holding one (both protocols do this), or
// empty (or null, or "") for a function without parameters.
func parseArgs(raw []byte) ([]byte, map[string]any, error) {
	raw = trimJSONSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, nil, fmt.Errorf("not valid JSON: %v", err)
		}
		raw = trimJSONSpace([]byte(inner))
	}
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}"), map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("not valid JSON: data after the value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), obj, nil
}

// trimJSONSpace removes the white space JSON allows around a value (space,
// tab, CR, LF; not the other Unicode spaces bytes.TrimSpace removes).
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// floatNumbers replaces, in place, the json.Numbers of a parsed JSON value
// with float64s, as encoding/json decodes numbers into an interface, and
// returns the value. (The schema validator takes numbers that way.) A
// number no float64 holds (1e400) is an error naming its field: path is
// the value's ("" for the arguments).
func floatNumbers(v any, path string) (any, error) {
	var err error
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("%snumber %.40s is out of range (a JSON number here must fit a 64-bit float)", fieldPrefix(path), v)
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			if v[k], err = floatNumbers(e, joinPath(path, k)); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range v {
			if v[i], err = floatNumbers(e, path+"[]"); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// fieldPrefix returns "path: ", or "" for the arguments themselves.
func fieldPrefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// argumentsDigest returns the digest a journal keeps of a call's arguments:
// the hex SHA-256 of their canonical JSON (of the raw bytes when they are
// not valid arguments). Arguments sent as an object or as a string holding
// the same object have the same digest. (For arguments past the runner's
// Options.MaxArgumentBytes, which it does not parse, the runner keeps the
// digest of the raw bytes.)
func argumentsDigest(raw json.RawMessage) string {
	c, _, _ := parseArgs(raw)
	return digestOf(raw, c)
}

// digestOf returns argumentsDigest(raw) given canon, raw's canonical form
// (nil when raw is not valid arguments).
func digestOf(raw, canon []byte) string {
	if canon == nil {
		canon = raw
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
