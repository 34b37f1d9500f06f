package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
)

type weatherArgs struct {
	Location string `json:"location" jsonschema:"The city and state, e.g. San Francisco, CA"`
	Unit     string `json:"unit,omitempty"`
}

func weather(ctx context.Context, in weatherArgs) (string, error) {
	if in.Location != "Seattle, WA" {
		return "", core.ModelErrorf("no weather for %q", in.Location)
	}
	if in.Unit == "c" {
		return "21c", nil
	}
	return "70f", nil
}

var weatherOpts = &core.ToolOptions{Fields: map[string]core.Field{
	"unit": {Enum: []any{"c", "f"}, Default: "f"},
}}

// compactJSON removes insignificant space from s, keeping key order.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return buf.String()
}

func TestToolSchemas(t *testing.T) {
	type nested struct {
		City string `json:"city"`
	}
	type optional struct {
		Name    string   `json:"name"`
		Nick    string   `json:"nick,omitempty" jsonschema:"a nickname"`
		Age     *int     `json:"age,omitempty"`
		Address nested   `json:"address"`
		Tags    []string `json:"tags"`
	}
	tests := []struct {
		name string
		make func() (*core.Tool, error)
		want string
	}{{
		name: "seed weather schema with enum and default",
		make: func() (*core.Tool, error) {
			return core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", weather, weatherOpts)
		},
		want: `{"type":"object","properties":{
			"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
			"unit":{"type":"string","default":"f","enum":["c","f"]}},
			"required":["location"],"additionalProperties":false}`,
	}, {
		name: "no parameters",
		make: func() (*core.Tool, error) {
			return core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.",
				func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil)
		},
		want: `{"type":"object","additionalProperties":false}`,
	}, {
		name: "strict variant: all required, optional ones nullable",
		make: func() (*core.Tool, error) {
			return core.NewTool("person", "d", func(context.Context, optional) (string, error) { return "", nil },
				&core.ToolOptions{Strict: true, Fields: map[string]core.Field{"address.city": {Description: "where"}}})
		},
		want: `{"type":"object","properties":{
			"name":{"type":"string"},
			"nick":{"type":["string","null"],"description":"a nickname"},
			"age":{"type":["null","integer"]},
			"address":{"type":"object","properties":{"city":{"type":"string","description":"where"}},"required":["city"],"additionalProperties":false},
			"tags":{"type":["null","array"],"items":{"type":"string"}}},
			"required":["name","nick","age","address","tags"],"additionalProperties":false}`,
	}, {
		name: "raw schema kept as given",
		make: func() (*core.Tool, error) {
			return core.NewRawTool("get_customer", "Look up a customer by ID.", json.RawMessage(`{
				"type": "object",
				"properties": { "customer_id": { "type": "string" } },
				"required": ["customer_id"],
				"additionalProperties": false
			}`), rawEcho, &core.ToolOptions{Strict: true})
		},
		want: `{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"],"additionalProperties":false}`,
	}, {
		name: "raw empty schema",
		make: func() (*core.Tool, error) {
			return core.NewRawTool("getUserFavoriteCity", "Gets the user's favorite city.", json.RawMessage(`{}`), rawEcho, nil)
		},
		want: `{}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := tt.make()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(compactJSON(t, tt.want), string(tool.Parameters())); diff != "" {
				t.Errorf("schema mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func rawEcho(_ context.Context, args json.RawMessage) (any, error) { return args, nil }

func TestToolRegistrationErrors(t *testing.T) {
	type withMap struct {
		Meta map[string]string `json:"meta"`
	}
	type withAny struct {
		Payload any `json:"payload"`
	}
	type inner struct {
		Extra map[string]int `json:"extra"`
	}
	type deep struct {
		In inner `json:"in"`
	}
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	tests := []struct {
		name    string
		make    func() (*core.Tool, error)
		wantErr string
	}{
		{"name with space", func() (*core.Tool, error) { return core.NewTool("get weather", "", noop, nil) }, `invalid tool name "get weather"`},
		{"empty name", func() (*core.Tool, error) { return core.NewTool("", "", noop, nil) }, `invalid tool name ""`},
		{"name too long", func() (*core.Tool, error) { return core.NewTool(strings.Repeat("a", 65), "", noop, nil) }, "invalid tool name"},
		{"two namespaces", func() (*core.Tool, error) { return core.NewTool("a.b.c", "", noop, nil) }, `invalid tool name "a.b.c"`},
		{"empty namespace", func() (*core.Tool, error) { return core.NewTool(".lookup", "", noop, nil) }, `invalid tool name ".lookup"`},
		{"namespace without a function", func() (*core.Tool, error) { return core.NewTool("crm.", "", noop, nil) }, `invalid tool name "crm."`},
		{"strict map field", func() (*core.Tool, error) {
			return core.NewTool("m", "", func(context.Context, withMap) (string, error) { return "", nil }, &core.ToolOptions{Strict: true})
		}, `field "meta" is a map`},
		{"strict any field", func() (*core.Tool, error) {
			return core.NewTool("a", "", func(context.Context, withAny) (string, error) { return "", nil }, &core.ToolOptions{Strict: true})
		}, `field "payload" has no fixed type`},
		{"strict nested map field", func() (*core.Tool, error) {
			return core.NewTool("d", "", func(context.Context, deep) (string, error) { return "", nil }, &core.ToolOptions{Strict: true})
		}, `field "in.extra" is a map`},
		{"arguments not a struct", func() (*core.Tool, error) {
			return core.NewTool("s", "", func(context.Context, string) (string, error) { return "", nil }, nil)
		}, "is not a struct"},
		{"unknown field refined", func() (*core.Tool, error) {
			return core.NewTool("w", "", weather, &core.ToolOptions{Fields: map[string]core.Field{"units": {Enum: []any{"c"}}}})
		}, `no property "units"`},
		{"default outside enum", func() (*core.Tool, error) {
			return core.NewTool("w", "", weather, &core.ToolOptions{Fields: map[string]core.Field{"unit": {Enum: []any{"c", "f"}, Default: "k"}}})
		}, "enum"},
		{"raw strict without additionalProperties", func() (*core.Tool, error) {
			return core.NewRawTool("r", "", json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), rawEcho, &core.ToolOptions{Strict: true})
		}, "additionalProperties: false"},
		{"raw strict with optional property", func() (*core.Tool, error) {
			return core.NewRawTool("r", "", json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`), rawEcho, &core.ToolOptions{Strict: true})
		}, `property "b" must be required`},
		{"raw schema not JSON", func() (*core.Tool, error) {
			return core.NewRawTool("r", "", json.RawMessage(`{"type":`), rawEcho, nil)
		}, "invalid schema"},
		{"raw schema not an object", func() (*core.Tool, error) {
			return core.NewRawTool("r", "", json.RawMessage(`{"type":"string"}`), rawEcho, nil)
		}, `want "object"`},
		{"raw with Fields", func() (*core.Tool, error) {
			return core.NewRawTool("r", "", nil, rawEcho, &core.ToolOptions{Fields: map[string]core.Field{"a": {}}})
		}, "Fields refine inferred schemas only"},
		{"nil function", func() (*core.Tool, error) {
			return core.NewTool[struct{}, string]("n", "", nil, nil)
		}, "nil function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := tt.make()
			if err == nil {
				t.Fatalf("got tool %q, want error containing %q", tool.Name(), tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestToolboxRefusesDuplicates(t *testing.T) {
	a := mustTool(t)(core.NewTool("a", "", func(context.Context, struct{}) (string, error) { return "", nil }, nil))
	a2 := mustTool(t)(core.NewTool("a", "", func(context.Context, struct{}) (int, error) { return 0, nil }, nil))
	b := mustTool(t)(core.NewTool("b", "", func(context.Context, struct{}) (int, error) { return 0, nil }, nil))
	if _, err := core.NewToolbox(a, a2); err == nil || !strings.Contains(err.Error(), `duplicate tool name "a"`) {
		t.Errorf("NewToolbox(a, a) error = %v, want duplicate", err)
	}
	tb, err := core.NewToolbox(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Add(b, a2); err == nil {
		t.Fatal("Add(b, a) succeeded, want duplicate error")
	}
	if diff := cmp.Diff([]string{"a"}, tb.Names()); diff != "" {
		t.Errorf("a refused Add changed the toolbox (-want +got):\n%s", diff)
	}
	if err := tb.Add(nil); err == nil {
		t.Error("Add(nil) succeeded")
	}
}

func TestToolboxReplace(t *testing.T) {
	mk := func(name string) *core.Tool {
		return mustTool(t)(core.NewTool(name, "", func(context.Context, struct{}) (string, error) { return name, nil }, nil))
	}
	tests := []struct {
		name     string
		remove   []string
		add      []string
		want     []string
		wantErr  string
		wantBump bool
	}{
		{name: "swap one", remove: []string{"b"}, add: []string{"b", "d"}, want: []string{"a", "c", "b", "d"}, wantBump: true},
		{name: "remove only", remove: []string{"a", "c"}, want: []string{"b"}, wantBump: true},
		{name: "unknown names ignored", remove: []string{"zz"}, want: []string{"a", "b", "c"}},
		{name: "clash with a kept tool", remove: []string{"b"}, add: []string{"a"}, want: []string{"a", "b", "c"}, wantErr: `duplicate tool name "a"`},
		{name: "repeated in the new set", add: []string{"d", "d"}, want: []string{"a", "b", "c"}, wantErr: `duplicate tool name "d"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := core.NewToolbox(mk("a"), mk("b"), mk("c"))
			if err != nil {
				t.Fatal(err)
			}
			v0 := tb.Version()
			var add []*core.Tool
			for _, n := range tt.add {
				add = append(add, mk(n))
			}
			err = tb.Replace(tt.remove, add...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Replace error = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, tb.Names()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if got := tb.Version() != v0; got != tt.wantBump {
				t.Errorf("version changed = %v, want %v", got, tt.wantBump)
			}
			for _, n := range tt.want {
				if tb.Lookup(n) == nil {
					t.Errorf("Lookup(%q) = nil", n)
				}
			}
			if tools, v := tb.Snapshot(); len(tools) != len(tt.want) || v != tb.Version() {
				t.Errorf("Snapshot = %d tools at version %d, want %d at %d", len(tools), v, len(tt.want), tb.Version())
			}
		})
	}
}

func mustTool(t *testing.T) func(*core.Tool, error) *core.Tool {
	return func(tool *core.Tool, err error) *core.Tool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
}

// TestNamespacedNames: a tool in a namespace is named by the namespace, a
// dot and the function ("crm.lookup"), so that functions of the same name
// in two namespaces are two tools of one toolbox, beside one of no
// namespace; a format's name takes no namespace.
func TestNamespacedNames(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	var tools []*core.Tool
	for _, name := range []string{"crm.lookup", "docs.lookup", "lookup", strings.Repeat("n", 64) + "." + strings.Repeat("f", 64)} {
		tool, err := core.NewTool(name, "", noop, nil)
		if err != nil {
			t.Fatalf("NewTool(%q): %v", name, err)
		}
		tools = append(tools, tool)
	}
	tb, err := core.NewToolbox(tools...)
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Lookup("docs.lookup"); got == nil || got.Name() != "docs.lookup" {
		t.Errorf("Lookup(docs.lookup) = %v", got)
	}
	if _, err := core.NewFormat[struct{}]("crm.answer", nil); err == nil || !strings.Contains(err.Error(), `invalid format name "crm.answer"`) {
		t.Errorf("NewFormat(crm.answer) = %v, want the name refused", err)
	}
}
