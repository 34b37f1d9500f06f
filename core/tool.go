package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// A Tool is a function the model may call: a name, a description, the JSON
// Schema of its arguments and the Go code that runs it. Make one with
// [NewTool] (from a typed Go function; the schema is inferred) or [NewRawTool]
// (from a JSON Schema document), and put it in a [Toolbox].
//
// A Tool is immutable and safe for concurrent use.
type Tool struct {
	name        string
	description string
	params      json.RawMessage // the schema as sent to the service
	resolved    *jsonschema.Resolved
	opts        ToolOptions
	defaults    bool // the schema has defaults to apply
	run         func(ctx context.Context, args []byte) (any, error)
	agent       *agentTool // the child of an agent tool (NewAgentTool); nil for others
}

// ToolOptions configure a Tool. The zero value (or a nil pointer) gives a
// tool with a non-strict schema, loaded eagerly, with no timeout of its own
// (the runner's applies), whose text outputs past the runner's limit fail
// rather than being cut, and with side effects.
type ToolOptions struct {
	// Strict asks for a strict schema: every property required, optional
	// ones nullable, no additional properties. For a typed tool the strict
	// variant is produced from the inferred schema; a raw schema must already
	// be strict. Types that cannot be strict (maps, any) are refused when the
	// tool is made, with an error naming the field.
	Strict bool
	// DeferLoading asks the service to load the tool only when the model
	// searches for it (where the backend supports it).
	DeferLoading bool
	// Timeout bounds one run of the handler; zero means the runner's
	// Options.ToolTimeout (DefaultToolTimeout unless set). The run's own
	// time limit (Options.RunTimeout) bounds it too.
	Timeout time.Duration
	// TruncateOutput cuts a text output past the runner's
	// Options.MaxOutputBytes instead of failing the call, as
	// Options.TruncateOutput does for every tool.
	TruncateOutput bool
	// Idempotent declares that running the tool twice with the same
	// arguments has the same effect as running it once. A call found started
	// but not finished after a crash (in doubt) runs again only if the tool
	// is idempotent or its Verify hook says the call did not take effect;
	// otherwise the model is told the outcome is unknown and the program gets
	// a CallInDoubt event.
	Idempotent bool
	// ReadOnly declares that the tool changes nothing outside the program
	// (it looks things up): for the journal, it is idempotent.
	//
	// The calls of an idempotent or read-only tool need no sync to disk
	// before they run: their claims and results are written without
	// waiting for the disk (on journals that implement
	// journal/driver.Unsynced), since one lost to a power loss only makes
	// the call run again.
	ReadOnly bool
	// Verify, if set, checks the outside world for the outcome of a call
	// that may have run but whose result was not saved. It returns the
	// result (as a handler would) and found = true if the call took effect;
	// found = false if it is sure the call did not take effect (the call then
	// runs again); an error if it cannot tell (the call is then treated as if
	// there were no Verify hook). It runs under the tool's timeout, as a
	// handler does: a hook that panics or runs past it cannot tell either.
	// If the run ends while it runs, the call stays in doubt.
	Verify func(ctx context.Context, call Call) (result any, found bool, err error)
	// Abandon, if set, is called by [Runner.Cancel] for each call of the
	// tool among the pending calls of the turn it abandons, once the
	// service's turn is canceled: a handler that started work elsewhere
	// which waits on the call (a remote agent's task awaiting an answer,
	// say, paused by [Ask]) ends it there, as no one will resume the call.
	// It runs under Cancel's context; an error it returns is logged, and
	// Cancel goes on. (An agent tool, [NewAgentTool], has one: it cancels
	// its child's waiting turn.)
	Abandon func(ctx context.Context, call Call) error
	// Approval, if set, says which calls need a person's approval before
	// they run ([ApprovalAlways], [ApprovalIf]). A step with such calls runs the
	// others, then the run pauses: it returns an error matching
	// ErrAwaitingApproval with the calls in [Result.Pending], the
	// approvals kept in the journal. [Runner.Decide] records a decision;
	// [Runner.Resume] then goes on: approved calls run (once, as every
	// call), denied ones tell the model they were denied.
	Approval ApprovalRule
	// Middleware wraps the running of this tool's calls, inside the
	// runner's (Options.Middleware), the first outermost (see
	// [Middleware]).
	Middleware []Middleware
	// Server names where the tool's calls go, for a tool that forwards
	// them (such as an MCP server's, from package mcptools): hooks get it
	// in [CallInfo], and package telemetry records it on the call's
	// span.
	Server string
	// Fields refines the inferred schema of a typed tool, property by
	// property. Keys are JSON property names; a nested property is named by
	// its path, as in "address.city". Raw tools refuse Fields.
	Fields map[string]Field
}

// Field refines one property of an inferred schema. jsonschema-go reads only
// a description from struct tags; Field adds what the tags cannot say.
type Field struct {
	// Description replaces the property's description.
	Description string
	// Enum lists the values the property may take.
	Enum []any
	// Default is the property's default value. It is written into the
	// schema, and applied to the arguments before they are decoded.
	Default any
}

// toolName matches a tool's name: a function's name, or a namespace's
// name, a dot and a function's name.
var toolName = regexp.MustCompile(`^([a-zA-Z0-9_-]{1,64}\.)?[a-zA-Z0-9_-]{1,64}$`)

// plainName matches a name without a namespace (a format's).
var plainName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// NewTool makes a tool from a typed Go function. The JSON Schema of the
// arguments is inferred from In, which must be a struct type (or a pointer
// to one); struct{} makes a tool without parameters. Arguments are
// validated against the schema before fn runs and decoded into In.
//
// A name is 1 to 64 letters, digits, '_' or '-'. A tool in a namespace
// (a group of functions the Responses API and Foundry offer the model as
// one namespace tool) is named by the namespace, a dot and the function:
// "crm.lookup" is function lookup of namespace crm, offered so on those
// backends, and their calls of lookup in namespace crm are its calls;
// "crm.lookup" and "docs.lookup" are two tools. A backend whose service
// has no namespaces (driver.Capabilities.Namespaces false) offers it by
// its whole name, which that service may refuse.
//
// What fn returns is sent to the model: a string as it is; a [Content]
// (or [Part], or []Part) as a content array where the backend accepts one;
// nil as the protocol allows; anything else serialised as JSON. An error
// from fn becomes a failed result: the model reads the message of a
// [*ModelError] and a generic message for anything else.
//
// opts may be nil.
func NewTool[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts *ToolOptions) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("core: tool %q: nil function", name)
	}
	o := optsOrZero(opts)
	schema, err := inferSchema(reflect.TypeFor[In](), o)
	if err != nil {
		return nil, fmt.Errorf("core: tool %q: %w", name, err)
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("core: tool %q: marshal schema: %w", name, err)
	}
	run := func(ctx context.Context, args []byte) (any, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, &argError{msg: decodeMessage(err)}
		}
		return fn(ctx, in)
	}
	return newTool(name, description, schema, params, o, run)
}

// NewRawTool makes a tool from a JSON Schema document, for tools whose
// schema comes from elsewhere (the form the services document). fn receives
// the arguments as a canonical JSON object that has passed validation, with
// schema defaults applied. Its results are treated as [NewTool] describes.
//
// The schema is sent as given. An empty schema ({}) accepts any object.
// opts may be nil; Fields is refused.
func NewRawTool(name, description string, schema json.RawMessage, fn func(ctx context.Context, args json.RawMessage) (any, error), opts *ToolOptions) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("core: tool %q: nil function", name)
	}
	o := optsOrZero(opts)
	if len(o.Fields) > 0 {
		return nil, fmt.Errorf("core: tool %q: Fields refine inferred schemas only; edit the raw schema instead", name)
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("core: tool %q: invalid schema: %w", name, err)
	}
	if o.Strict {
		if err := checkStrict(&s, ""); err != nil {
			return nil, fmt.Errorf("core: tool %q: schema is not strict: %w", name, err)
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return nil, fmt.Errorf("core: tool %q: invalid schema: %w", name, err)
	}
	run := func(ctx context.Context, args []byte) (any, error) { return fn(ctx, args) }
	return newTool(name, description, &s, compact.Bytes(), o, run)
}

func optsOrZero(opts *ToolOptions) ToolOptions {
	if opts == nil {
		return ToolOptions{}
	}
	return *opts
}

func newTool(name, description string, schema *jsonschema.Schema, params json.RawMessage, o ToolOptions, run func(context.Context, []byte) (any, error)) (*Tool, error) {
	if !toolName.MatchString(name) {
		return nil, fmt.Errorf("core: invalid tool name %q: want 1 to 64 letters, digits, '_' or '-' (after a namespace and a dot, as in \"crm.lookup\", for a tool in a namespace)", name)
	}
	if t := schema.Type; t != "" && t != "object" {
		return nil, fmt.Errorf("core: tool %q: arguments schema has type %q, want \"object\"", name, t)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("core: tool %q: negative timeout", name)
	}
	resolved, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("core: tool %q: %w", name, err)
	}
	return &Tool{name: name, description: description, params: params, resolved: resolved, opts: o, defaults: hasDefaults(schema), run: run}, nil
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.name }

// Description returns the tool's description.
func (t *Tool) Description() string { return t.description }

// Parameters returns the JSON Schema of the tool's arguments, as it is sent
// to the service. The caller must not modify it.
func (t *Tool) Parameters() json.RawMessage { return t.params }

// Strict reports whether the tool's schema is strict.
func (t *Tool) Strict() bool { return t.opts.Strict }

// DeferLoading reports whether the tool is loaded on demand.
func (t *Tool) DeferLoading() bool { return t.opts.DeferLoading }

// Idempotent reports whether the tool was declared idempotent.
func (t *Tool) Idempotent() bool { return t.opts.Idempotent }

// ReadOnly reports whether the tool was declared read-only.
func (t *Tool) ReadOnly() bool { return t.opts.ReadOnly }

// mayRerun reports whether a call of t may run again without harm: t is
// idempotent or read-only.
func (t *Tool) mayRerun() bool { return t.opts.Idempotent || t.opts.ReadOnly }

// Verifies reports whether the tool has a Verify hook ([ToolOptions.Verify]).
func (t *Tool) Verifies() bool { return t.opts.Verify != nil }

// Server returns where the tool's calls go ([ToolOptions.Server]).
func (t *Tool) Server() string { return t.opts.Server }

// Timeout returns the tool's own timeout; zero means the runner's.
func (t *Tool) Timeout() time.Duration { return t.opts.Timeout }

// argError is a failure of the arguments; its text is meant for the model.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func decodeMessage(err error) string {
	if ute, ok := err.(*json.UnmarshalTypeError); ok && ute.Field != "" {
		return fmt.Sprintf("%s: cannot use %s as %s", ute.Field, ute.Value, ute.Type)
	}
	return err.Error()
}
