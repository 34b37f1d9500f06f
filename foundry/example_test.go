package foundry_test

import (
	"context"
	"fmt"
	"log"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// Example opens the backend against a fake project, creating an agent
// version from the toolbox, and runs the tool loop.
func Example() {
	srv := foundrytest.NewServer(coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`, `Your horoscope for {{output "get_horoscope"}}`), nil)
	defer srv.Close()

	type args struct {
		Sign string `json:"sign" jsonschema:"An astrological sign like Taurus or Aquarius"`
	}
	horoscope, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.",
		func(_ context.Context, in args) (string, error) {
			return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
		}, &core.ToolOptions{Strict: true})
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(horoscope)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	b, err := foundry.Open(ctx, tools, &foundry.Options{
		Endpoint:   srv.ProjectEndpoint(), // https://<resource>.services.ai.azure.com/api/projects/<project>
		Token:      "token",               // or Credential; by default DefaultAzureCredential
		Definition: &foundry.AgentDefinition{Name: "MyAgent", Model: "gpt-4.1-mini", Instructions: "You are a helpful assistant that can use function tools."},
		HTTPClient: srv.Client(),
		Logger:     discard,
	})
	if err != nil {
		log.Fatal(err)
	}
	runner := core.NewRunner(b, tools, &core.Options{Logger: discard})
	defer runner.Close() // deletes the conversation and the agent version

	res, err := runner.Run(ctx, "What is my horoscope? I am an Aquarius.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Agent response:", res.Text)
	name, version := b.Agent()
	fmt.Println("agent:", name, version)
	// Output:
	// Agent response: Your horoscope for Aquarius: Next Tuesday you will befriend a baby otter.
	// agent: MyAgent 1
}
