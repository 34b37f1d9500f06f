// Command horoscope runs the function-calling sample of the Azure AI
// Foundry Agent Service documentation: the agent has one function,
// get_horoscope, that the program implements; the user asks for their
// horoscope; the program prints the agent's answer.
//
// With no configuration it runs on the embedded fake Foundry project
// (backend fake-foundry), whose scripted model calls get_horoscope for
// Aquarius:
//
//	go run ./examples/horoscope
//
// On the real service, with an endpoint and a credential (here a token
// from the Azure CLI; without AGENT_TOKEN, DefaultAzureCredential is
// used), it creates an agent version from its tools (model deployment
// gpt-4.1-mini unless TOOLRELAY_FOUNDRY_MODEL says otherwise), runs it in
// a conversation and deletes both on exit:
//
//	export AZURE_AI_PROJECT_ENDPOINT=https://<resource>.services.ai.azure.com/api/projects/<project>
//	export AGENT_TOKEN=$(az account get-access-token --scope https://ai.azure.com/.default --query accessToken -o tsv)
//	TOOLRELAY_BACKEND=foundry go run ./examples/horoscope
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry and foundry
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai and openai
)

const (
	question     = "What is my horoscope? I am an Aquarius."
	instructions = "You are a helpful assistant that can use function tools."
)

// script is what the fake model does: call get_horoscope for Aquarius,
// then answer with its output.
var script = coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for {{output "get_horoscope"}}`)

type horoscopeArgs struct {
	Sign string `json:"sign"`
}

// getHoroscope generates a horoscope for the given astrological sign.
func getHoroscope(_ context.Context, in horoscopeArgs) (string, error) {
	return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
}

// newTools returns the agent's function tools, with the sample's schema.
func newTools() (*core.Toolbox, error) {
	horoscope, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.", getHoroscope, &core.ToolOptions{
		Strict: true,
		Fields: map[string]core.Field{"sign": {Description: "An astrological sign like Taurus or Aquarius"}},
	})
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(horoscope)
}

func run(ctx context.Context, stdout io.Writer) error {
	tools, err := newTools()
	if err != nil {
		return err
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-foundry",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
		Settings:        adapter.Settings{Instructions: instructions},
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	res, err := runner.Run(ctx, question, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Agent response: %s\n", res.Text)
	return runner.Close()
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}
