package mcptools_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry
	"github.com/toolrelay/toolrelay/mcptools"
)

type fahrenheit struct {
	F float64 `json:"f" jsonschema:"degrees Fahrenheit"`
}

// unitsServer is an MCP server with one tool, in this process (it could
// be a command or a URL: see Server).
func unitsServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "units"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "to_celsius", Description: "Converts Fahrenheit to Celsius."},
		func(_ context.Context, _ *mcp.CallToolRequest, in fahrenheit) (*mcp.CallToolResult, any, error) {
			c := (in.F - 32) * 5 / 9
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%.1f°C", c)}}}, nil, nil
		})
	return srv
}

// The tools of an MCP server offered to a hosted agent beside the
// program's own, on the embedded Foundry fake.
func ExampleConnect() {
	ctx := context.Background()
	weather, err := core.NewTool("get_weather", "Gets the weather in a city, in Fahrenheit.",
		func(context.Context, struct {
			City string `json:"city"`
		}) (string, error) {
			return "70°F and sunny", nil
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(weather)
	if err != nil {
		log.Fatal(err)
	}
	set, err := mcptools.Connect(ctx, tools, []mcptools.Server{{Name: "units", Transport: mcptools.InMemory(unitsServer())}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close()
	fmt.Println(tools.Names())

	// What the fake's model does: look the weather up, convert it.
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_weather", Arguments: []byte(`{"city":"Lisbon"}`)}}},
		{Calls: []coretest.Call{{Name: "to_celsius", Arguments: []byte(`{"f":70}`)}}},
		{Text: `{{output "get_weather"}} in Celsius: {{output "to_celsius"}}`},
	}}}}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-foundry",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer runner.Close()
	res, err := runner.Run(ctx, "How warm is it in Lisbon, in Celsius?", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	// Output:
	// [get_weather to_celsius]
	// 70°F and sunny in Celsius: 21.1°C
}

// A program's toolbox served over MCP, called by the SDK's client (here
// in memory; ServeStdio and Handler serve it over stdio and HTTP).
func ExampleToolboxServer() {
	ctx := context.Background()
	weather, err := core.NewTool("get_weather", "Gets the weather in a city.",
		func(_ context.Context, in struct {
			City string `json:"city"`
		}) (string, error) {
			return "70°F in " + in.City, nil
		}, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(weather)
	if err != nil {
		log.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	if _, err := mcptools.ToolboxServer(tools, nil).Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	for _, args := range []map[string]any{{"city": "Lisbon"}, {"city": 7}} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_weather", Arguments: args})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	}
	// Output:
	// false 70°F in Lisbon
	// true invalid arguments for tool "get_weather": city: type: 7 has type "integer", want "string"
}
