// Package units is the MCP server of the mcp example: two tools, on the
// official Go SDK. Command mcp runs it as a child process over stdio
// (started again as "mcp" with TOOLRELAY_EXAMPLE_MCP_SERVE=1); any MCP
// client can run it the same way.
package units

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Fahrenheit is to_celsius's input.
type Fahrenheit struct {
	F float64 `json:"f" jsonschema:"a temperature in degrees Fahrenheit"`
}

// Celsius is what_to_wear's input.
type Celsius struct {
	C float64 `json:"c" jsonschema:"a temperature in degrees Celsius"`
}

// NewServer returns the server: to_celsius converts a temperature,
// what_to_wear advises on clothes for one.
func NewServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "units", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "to_celsius", Description: "Converts a temperature from Fahrenheit to Celsius.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in Fahrenheit) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("%.1f°C", (in.F-32)*5/9)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "what_to_wear", Description: "Says what to wear at a temperature in Celsius.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in Celsius) (*mcp.CallToolResult, any, error) {
			switch {
			case in.C < 10:
				return text("a warm coat"), nil, nil
			case in.C < 20:
				return text("a light jacket"), nil, nil
			}
			return text("a t-shirt"), nil, nil
		})
	return srv
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
