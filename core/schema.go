package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// inferSchema infers the arguments schema of a typed tool from t, applies
// the field refinements and, when asked, makes it strict.
func inferSchema(t reflect.Type, o ToolOptions) (*jsonschema.Schema, error) {
	st := t
	for st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments type %v is not a struct", t)
	}
	s, err := jsonschema.ForType(st, nil)
	if err != nil {
		return nil, err
	}
	for path, f := range o.Fields {
		p, err := lookupProperty(s, path)
		if err != nil {
			return nil, err
		}
		if f.Description != "" {
			p.Description = f.Description
		}
		if f.Enum != nil {
			p.Enum = slices.Clone(f.Enum)
		}
		if f.Default != nil {
			d, err := json.Marshal(f.Default)
			if err != nil {
				return nil, fmt.Errorf("field %q: default: %w", path, err)
			}
			p.Default = d
		}
	}
	if o.Strict {
		if err := makeStrict(s, ""); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func lookupProperty(s *jsonschema.Schema, path string) (*jsonschema.Schema, error) {
	cur := s
	for name := range strings.SplitSeq(path, ".") {
		next := cur.Properties[name]
		if next == nil {
			return nil, fmt.Errorf("Fields: no property %q in the arguments schema", path)
		}
		cur = next
	}
	return cur, nil
}

// makeStrict rewrites s in place into its strict variant: every object lists
// all its properties as required, a property that was optional becomes
// nullable, and no object allows additional properties. It refuses schemas
// that cannot be strict: maps (objects with open properties) and values of
// any type.
func makeStrict(s *jsonschema.Schema, path string) error {
	if s.Type == "" && len(s.Types) == 0 {
		return fmt.Errorf("field %s has no fixed type (Go any or interface); strict mode cannot describe it", fieldName(path))
	}
	if slices.Contains(append([]string{s.Type}, s.Types...), "object") {
		if !isFalseSchema(s.AdditionalProperties) {
			return fmt.Errorf("field %s is a map; strict mode needs a struct with fixed fields", fieldName(path))
		}
		names := s.PropertyOrder
		if len(names) != len(s.Properties) {
			names = slices.Sorted(maps.Keys(s.Properties))
		}
		for _, name := range names {
			p := s.Properties[name]
			if err := makeStrict(p, joinPath(path, name)); err != nil {
				return err
			}
			if !slices.Contains(s.Required, name) {
				nullable(p)
			}
		}
		s.Required = slices.Clone(names)
	}
	if s.Items != nil {
		if err := makeStrict(s.Items, path+"[]"); err != nil {
			return err
		}
	}
	return nil
}

// nullable lets s accept null as well.
func nullable(s *jsonschema.Schema) {
	switch {
	case s.Type != "":
		s.Types = []string{s.Type, "null"}
		s.Type = ""
	case !slices.Contains(s.Types, "null"):
		s.Types = append(s.Types, "null")
	}
	if s.Enum != nil && !slices.Contains(s.Enum, any(nil)) {
		s.Enum = append(s.Enum, nil)
	}
}

// checkStrict reports the first place where the raw schema s is not strict.
func checkStrict(s *jsonschema.Schema, path string) error {
	isObject := s.Type == "object" || slices.Contains(s.Types, "object")
	if path == "" && s.Type == "" && len(s.Types) == 0 && len(s.Properties) == 0 {
		return fmt.Errorf("the root must be an object with additionalProperties: false")
	}
	if s.Type == "" && len(s.Types) == 0 && s.Ref == "" && len(s.AnyOf) == 0 {
		return fmt.Errorf("field %s has no type", fieldName(path))
	}
	if isObject {
		if !isFalseSchema(s.AdditionalProperties) {
			return fmt.Errorf("object %s must set additionalProperties: false", fieldName(path))
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if !slices.Contains(s.Required, name) {
				return fmt.Errorf("property %s must be required (make it nullable to allow a missing value)", fieldName(joinPath(path, name)))
			}
			if err := checkStrict(s.Properties[name], joinPath(path, name)); err != nil {
				return err
			}
		}
	}
	if s.Items != nil {
		return checkStrict(s.Items, path+"[]")
	}
	for _, a := range s.AnyOf {
		if err := checkStrict(a, path); err != nil {
			return err
		}
	}
	return nil
}

func isFalseSchema(s *jsonschema.Schema) bool {
	if s == nil || s.Not == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fieldName(path string) string {
	if path == "" {
		return "(root)"
	}
	return fmt.Sprintf("%q", path)
}

var (
	validatingRE = regexp.MustCompile(`validating (\S+?): `)
	propertiesRE = regexp.MustCompile(`/properties/`)
)

// validationMessage turns a jsonschema-go validation error into a message a
// model can act on: the path of the offending field and what is wrong.
func validationMessage(err error) string {
	msg := err.Error()
	field := ""
	if ms := validatingRE.FindAllStringSubmatchIndex(msg, -1); len(ms) > 0 {
		last := ms[len(ms)-1]
		field = msg[last[2]:last[3]]
		msg = msg[last[1]:]
	}
	field = strings.TrimPrefix(propertiesRE.ReplaceAllString(field, "."), ".")
	field = strings.ReplaceAll(field, "/items", "[]")
	if field == "root" || field == "" {
		return msg
	}
	return field + ": " + msg
}

// hasDefaults reports whether s or a property or item schema below it has a
// default value.
func hasDefaults(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Default != nil || hasDefaults(s.Items) {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(p) {
			return true
		}
	}
	return false
}
