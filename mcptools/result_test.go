package mcptools

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
)

// TestOutput: what a server's result becomes for the model, whatever the
// server (one not written with the Go SDK may send structured content
// alone, or an error without text).
func TestOutput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		res     *mcp.CallToolResult
		want    any
		wantErr string // the model's message of a failed call
	}{
		{"one text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "70f"}}}, "70f", ""},
		{"nothing", &mcp.CallToolResult{}, "", ""},
		{"structured content alone", &mcp.CallToolResult{StructuredContent: map[string]any{"sum": 3}}, json.RawMessage(`{"sum":3}`), ""},
		{"text beside structured content", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":3}`}}, StructuredContent: map[string]any{"sum": 3}}, `{"sum":3}`, ""},
		{"two texts", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, core.Content([]core.Part{core.TextPart("a"), core.TextPart("b")}), ""},
		{"an error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city"}}}, nil, "no such city"},
		{"an error without text", &mcp.CallToolResult{IsError: true}, nil, "the tool reported an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := output(tc.res)
			var me *core.ModelError
			switch {
			case tc.wantErr != "" && (!errors.As(err, &me) || me.Message != tc.wantErr):
				t.Errorf("error %v, want the model told %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
