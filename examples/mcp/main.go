// Command mcp offers the tools of an MCP server to the agent beside one of
// the program's own: the program's get_weather (in Fahrenheit), and the
// units server's to_celsius and what_to_wear (package units: a small Go
// MCP server, which this program starts as a child process over stdio).
// The server is named in the configuration, as a backend is; with none,
// the program names itself (started again as the server):
//
//	{"mcp": {"servers": {"units": {"command": "/path/to/mcp", "env": {"TOOLRELAY_EXAMPLE_MCP_SERVE": "1"}, "trust_hints": true}}}}
//
// With no configuration it runs on the embedded fake Agents API
// (fake-openai), playing testdata/mcp.json: the agent asks for the
// weather, converts it, and asks what to wear. Any backend runs it by
// configuration alone:
//
//	go run ./examples/mcp
//	TOOLRELAY_BACKEND=fake-foundry go run ./examples/mcp
//	TOOLRELAY_BACKEND=openai OPENAI_API_KEY=sk-... go run ./examples/mcp
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/examples/mcp/units"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry, fake-responses, foundry, responses
	"github.com/toolrelay/toolrelay/mcptools"
	_ "github.com/toolrelay/toolrelay/openai/openaitest" // fake-openai and openai
)

// serveEnv, set to 1, makes this program the units MCP server on stdio.
const serveEnv = "TOOLRELAY_EXAMPLE_MCP_SERVE"

func init() {
	if os.Getenv(serveEnv) != "1" {
		return
	}
	if err := units.NewServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
	os.Exit(0)
}

const question = "What should I wear in Lisbon today?"

// script is what the fake agent does (testdata/mcp.json).
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city": "Lisbon"}`)}}},
	{Calls: []coretest.Call{{Name: "to_celsius", Arguments: json.RawMessage(`{"f": 59}`)}}},
	{Calls: []coretest.Call{{Name: "what_to_wear", Arguments: json.RawMessage(`{"c": 15}`)}}},
	{Text: `It is {{output "get_weather"}} ({{output "to_celsius"}}) in Lisbon: wear {{output "what_to_wear"}}.`},
}}}}

type cityArgs struct {
	City string `json:"city" jsonschema:"a city"`
}

// getWeather is the program's own tool.
func getWeather(_ context.Context, in cityArgs) (string, error) {
	if in.City != "Lisbon" {
		return "", core.ModelErrorf("no weather for %s", in.City)
	}
	return "59°F and cloudy", nil
}

// unitsServer names this program, started again as the units server.
func unitsServer() (mcptools.Settings, error) {
	self, err := os.Executable()
	if err != nil {
		return mcptools.Settings{}, err
	}
	return mcptools.Settings{Servers: mcptools.ServerTable{
		"units": {Command: self, Env: map[string]string{serveEnv: "1"}, TrustHints: true},
	}}, nil
}

// configuredServers reports whether the configuration (file or
// environment) names MCP servers.
func configuredServers() (bool, error) {
	req, err := adapter.NewRequest(nil, nil)
	if err != nil {
		return false, err
	}
	var s mcptools.Settings
	if err := req.BackendSettings("mcp", &s); err != nil {
		return false, err
	}
	return len(s.Servers) > 0, nil
}

// run asks the question, printing each call, and the agent's answer.
func run(ctx context.Context, stdout io.Writer) error {
	weather, err := core.NewTool("get_weather", "Gets today's weather in a city, in Fahrenheit.", getWeather, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	tools, err := core.NewToolbox(weather)
	if err != nil {
		return err
	}
	settings := []any{coretest.FakeSettings{Script: script}}
	if configured, err := configuredServers(); err != nil {
		return err
	} else if !configured {
		u, err := unitsServer()
		if err != nil {
			return err
		}
		settings = append(settings, u)
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: settings,
		Runner: core.Options{OnEvent: func(e core.Event) {
			if e.Kind == core.EventCallFinished {
				server := "the program"
				if t := tools.Lookup(e.Call.Name); t != nil && t.Server() != "" {
					server = "MCP server " + t.Server()
				}
				fmt.Fprintf(stdout, "%s (%s): %s\n", e.Call.Name, server, e.Outcome)
			}
		}},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	res, err := runner.Run(ctx, question, nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, "Agent:", res.Text)
	return err
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}
