package core

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// A Format asks the model to answer with a JSON document of a schema (on
// the Responses API, text.format of type json_schema). A run asks for one
// with [RunOptions.Format]; [Decode] reads the answer. Make one with
// [NewFormat]. Backends that cannot set a run's format refuse the run (see
// driver.Capabilities.ResponseFormat).
type Format struct {
	wire     driver.Format
	resolved *jsonschema.Resolved
}

// NewFormat returns a format named name whose schema is inferred from T,
// a struct, as a tool's arguments schema is from its input type: opts
// refines its fields and makes it strict (the services' structured
// outputs want strict schemas). opts may be nil.
func NewFormat[T any](name string, opts *ToolOptions) (*Format, error) {
	if !plainName.MatchString(name) {
		return nil, fmt.Errorf("core: invalid format name %q: want 1 to 64 letters, digits, '_' or '-'", name)
	}
	o := optsOrZero(opts)
	s, err := inferSchema(reflect.TypeFor[T](), o)
	if err != nil {
		return nil, fmt.Errorf("core: format %q: %w", name, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("core: format %q: marshal schema: %w", name, err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("core: format %q: %w", name, err)
	}
	return &Format{wire: driver.Format{Name: name, Schema: raw, Strict: o.Strict}, resolved: resolved}, nil
}

// Name returns the format's name.
func (f *Format) Name() string { return f.wire.Name }

// Schema returns the format's JSON Schema.
func (f *Format) Schema() json.RawMessage { return f.wire.Schema }

// Strict reports whether the service is asked to keep to the schema
// exactly (ToolOptions.Strict).
func (f *Format) Strict() bool { return f.wire.Strict }

// Decode decodes the answer of a run made with format f into a T. An
// answer that is not JSON, or not of the format's schema, gives an error
// saying so (code Internal: the model did not keep to the format).
func Decode[T any](f *Format, res *Result) (T, error) {
	var v T
	if res == nil {
		return v, &errcode.Error{Code: errcode.InvalidArgument, Op: "core: decode", Err: fmt.Errorf("no result")}
	}
	var doc any
	if err := json.Unmarshal([]byte(res.Text), &doc); err != nil {
		return v, &errcode.Error{Code: errcode.Internal, Op: "core: decode", Err: fmt.Errorf("the answer is not JSON (format %q): %w", f.Name(), err)}
	}
	if err := f.resolved.Validate(doc); err != nil {
		return v, &errcode.Error{Code: errcode.Internal, Op: "core: decode", Err: fmt.Errorf("the answer does not match format %q: %s", f.Name(), validationMessage(err))}
	}
	if err := json.Unmarshal([]byte(res.Text), &v); err != nil {
		return v, &errcode.Error{Code: errcode.Internal, Op: "core: decode", Err: fmt.Errorf("the answer does not decode (format %q): %w", f.Name(), err)}
	}
	return v, nil
}

// driverFormat returns f as backends read it (nil for nil).
func (f *Format) driverFormat() *driver.Format {
	if f == nil {
		return nil
	}
	return &f.wire
}
