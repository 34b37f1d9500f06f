package main

import (
	"context"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/examples/mcp/units"
	"github.com/toolrelay/toolrelay/mcptools"
	trOpenAI "github.com/toolrelay/toolrelay/openai"
)

// TestMCPScript: the standalone fake plays testdata/mcp.json, whose model
// calls an MCP server's tools (the mcp example's units server) beside the
// program's own, for a client that offers them as function tools.
func TestMCPScript(t *testing.T) {
	s := start(t, "-backend", "openai", "-script", "../../testdata/mcp.json")
	weather, err := core.NewTool("get_weather", "Gets today's weather in a city, in Fahrenheit.", func(_ context.Context, in struct {
		City string `json:"city"`
	}) (string, error) {
		return "59°F and cloudy in " + in.City, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(weather)
	if err != nil {
		t.Fatal(err)
	}
	set, err := mcptools.Connect(t.Context(), tools, []mcptools.Server{{Name: "units", Transport: mcptools.InMemory(units.NewServer())}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	b, err := trOpenAI.Open(t.Context(), tools, &trOpenAI.Options{BaseURL: s["BASE_URL"], APIKey: "any-token", Model: "gpt-4.1-mini"})
	if err != nil {
		t.Fatal(err)
	}
	r := core.NewRunner(b, tools, nil)
	defer r.Close()
	res, err := r.Run(t.Context(), "What should I wear in Lisbon today?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "It is 59°F and cloudy in Lisbon (15.0°C) in Lisbon: wear a light jacket."; res.Text != want {
		t.Errorf("answer %q, want %q", res.Text, want)
	}
}
