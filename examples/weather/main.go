// Command weather runs the weather bot of the Azure AI Foundry Agent
// Service documentation: three local functions (the user's favorite city,
// a city's nickname, the weather at a location) that the agent calls one
// after the other to answer "What's the weather like in my favorite
// city?". The program prints each call as it runs, then the answer.
//
// With no configuration it runs on the embedded fake Foundry project
// (backend fake-foundry), whose scripted model chains the three calls:
//
//	go run ./examples/weather
//
// On the real service, with an endpoint and a credential, it creates an
// agent version from its tools (model deployment gpt-4.1-mini unless
// TOOLRELAY_FOUNDRY_MODEL says otherwise) and deletes it on exit:
//
//	export AZURE_AI_PROJECT_ENDPOINT=https://<resource>.services.ai.azure.com/api/projects/<project>
//	export AGENT_TOKEN=$(az account get-access-token --scope https://ai.azure.com/.default --query accessToken -o tsv)
//	TOOLRELAY_BACKEND=foundry TOOLRELAY_FOUNDRY_MODE=previous_response_id go run ./examples/weather
//
// With -trace it also prints the run's OpenTelemetry spans as a tree, each
// with its duration and key attributes: the run (invoke_agent), each
// request for a step (chat) with its HTTP requests inside, each call
// (execute_tool); -trace-json prints every span whole, as JSON, with
// OpenTelemetry's stdout exporter:
//
//	go run ./examples/weather -trace
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry, fake-responses, foundry, responses
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai, openai
)

const (
	question     = "What's the weather like in my favorite city?"
	instructions = "You are a weather bot. Use the provided functions to help answer questions. " +
		"Customize your responses to the user's preferences as much as possible and use friendly " +
		"nicknames for cities whenever possible."
	locationDescription = "The city and state, e.g. San Francisco, CA"
)

// script is what the fake model does: ask for the favorite city, then its
// nickname, then its weather, and answer with the three outputs.
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
	{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: json.RawMessage(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`},
}}}}

// getUserFavoriteCity returns the user's favorite city.
func getUserFavoriteCity(context.Context, struct{}) (string, error) {
	return "Seattle, WA", nil
}

type nicknameArgs struct {
	Location string `json:"location"`
}

// getCityNickname knows only Seattle's nickname.
func getCityNickname(_ context.Context, in nicknameArgs) (string, error) {
	if in.Location == "Seattle, WA" {
		return "The Emerald City", nil
	}
	return "", core.ModelErrorf("no nickname is known for %s", in.Location)
}

type weatherArgs struct {
	Location string `json:"location"`
	Unit     string `json:"unit,omitempty"`
}

// getCurrentWeatherAtLocation knows only Seattle's weather; the unit is
// "f" unless the model asks for "c".
func getCurrentWeatherAtLocation(_ context.Context, in weatherArgs) (string, error) {
	if in.Location != "Seattle, WA" {
		return "", core.ModelErrorf("no weather is known for %s", in.Location)
	}
	if in.Unit == "c" {
		return "21c", nil
	}
	return "70f", nil
}

// newTools returns the agent's function tools, with the sample's schemas.
func newTools() (*core.Toolbox, error) {
	city, err := core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", getUserFavoriteCity, nil)
	if err != nil {
		return nil, err
	}
	nickname, err := core.NewTool("getCityNickname", "Gets the nickname of a city, e.g. 'LA' for 'Los Angeles, CA'.", getCityNickname, &core.ToolOptions{
		Fields: map[string]core.Field{"location": {Description: locationDescription}},
	})
	if err != nil {
		return nil, err
	}
	weather, err := core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", getCurrentWeatherAtLocation, &core.ToolOptions{
		Fields: map[string]core.Field{
			"location": {Description: locationDescription},
			"unit":     {Enum: []any{"c", "f"}, Default: "f"},
		},
	})
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(city, nickname, weather)
}

func run(ctx context.Context, stdout io.Writer, trace traceMode) error {
	tools, err := newTools()
	if err != nil {
		return err
	}
	traced := &adapter.Options{}
	if trace != noTrace {
		o, flush, err := tracing(stdout, trace)
		if err != nil {
			return err
		}
		defer flush(context.WithoutCancel(ctx))
		traced = o
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-foundry",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
		Settings:        adapter.Settings{Instructions: instructions},
		WrapTransport:   traced.WrapTransport,
		Runner: core.Options{
			Hooks: traced.Runner.Hooks,
			// One call at a time, so that the lines come in the model's order.
			Concurrency: 1,
			OnEvent: func(e core.Event) {
				if e.Kind == core.EventCallStarted {
					fmt.Fprintf(stdout, "Calling %s...\n", e.Call.Name)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	res, err := runner.Run(ctx, question, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, res.Text)
	return runner.Close()
}

func main() {
	tree := flag.Bool("trace", false, "print the run's OpenTelemetry spans after the answer, as a tree")
	asJSON := flag.Bool("trace-json", false, "print the run's OpenTelemetry spans after the answer, as JSON")
	flag.Parse()
	mode := noTrace
	switch {
	case *asJSON:
		mode = traceJSON
	case *tree:
		mode = traceTree
	}
	if err := run(context.Background(), os.Stdout, mode); err != nil {
		log.Fatal(err)
	}
}
