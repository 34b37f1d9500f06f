package foundrytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// textFormat is the text.format of a request: echoed in its response as
// the service echoes it, and, for a strict json_schema, the schema the
// model's text must match.
type textFormat struct {
	name   string          // a json_schema format's name
	echo   json.RawMessage // the response's "text" member
	strict *jsonschema.Resolved
}

// plainText is the text member of a response that asked for no format.
var plainText = &textFormat{echo: json.RawMessage(`{"format":{"type":"text"},"verbosity":"medium"}`)}

// parseTextFormat reads a request's text member (nil: none).
func parseTextFormat(raw json.RawMessage) (*textFormat, *apiError) {
	if raw == nil {
		return plainText, nil
	}
	var text struct {
		Format struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity *string `json:"verbosity"`
	}
	if json.Unmarshal(raw, &text) != nil {
		return nil, schemaError("text")
	}
	verbosity := "medium"
	if text.Verbosity != nil {
		verbosity = *text.Verbosity
	}
	f := text.Format
	echo := map[string]any{"type": f.Type}
	tf := &textFormat{}
	switch f.Type {
	case "", "text":
		echo["type"] = "text"
	case "json_object":
	case "json_schema":
		var schema map[string]any
		if f.Name == "" || json.Unmarshal(f.Schema, &schema) != nil || schema == nil {
			return nil, schemaError("text.format")
		}
		strict := f.Strict != nil && *f.Strict
		echo["name"], echo["schema"], echo["description"], echo["strict"] = f.Name, f.Schema, f.Description, strict
		tf.name = f.Name
		if strict {
			var s jsonschema.Schema
			if err := json.Unmarshal(f.Schema, &s); err != nil {
				return nil, badRequest("invalid_value", "text.format.schema", "Invalid schema for response_format '%s': %v.", f.Name, err)
			}
			resolved, err := s.Resolve(nil)
			if err != nil {
				return nil, badRequest("invalid_value", "text.format.schema", "Invalid schema for response_format '%s': %v.", f.Name, err)
			}
			tf.strict = resolved
		}
	default:
		return nil, badRequest("invalid_value", "text.format.type", "Invalid value: '%s'.", f.Type)
	}
	tf.echo = mustJSON(map[string]any{"format": echo, "verbosity": verbosity})
	return tf, nil
}

// refusal returns, for a text that does not match a strict schema, why:
// the service never answers such a text (Structured Outputs constrain the
// model to the schema), so the fake fails the response instead of
// answering what the real service would never send.
func (f *textFormat) refusal(text string) string {
	if f == nil || f.strict == nil {
		return ""
	}
	var doc any
	err := json.Unmarshal([]byte(text), &doc)
	if err == nil {
		err = f.strict.Validate(doc)
	}
	if err == nil {
		return ""
	}
	msg := err.Error()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		msg = "not JSON: " + msg
	}
	return fmt.Sprintf("The model's output does not match the strict json_schema text.format '%s' (%s); the service never answers such a text (this fake's script does).",
		f.name, strings.TrimPrefix(msg, "validating root: "))
}

// textJSON returns the response's text member.
func (r *response) textJSON() json.RawMessage {
	if r.format == nil {
		return plainText.echo
	}
	return r.format.echo
}
