package openai_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// ExampleOpen opens the backend on a fake Agents API (in a program, leave
// BaseURL and APIKey empty to use OPENAI_BASE_URL and OPENAI_API_KEY) and
// runs the tool loop: the agent asks for a horoscope, the runner runs the
// function, the agent answers.
func ExampleOpen() {
	ctx := context.Background()
	srv := openaitest.NewServer(coretest.Simple("get_horoscope", `{"sign":"Aquarius"}`,
		`Your horoscope: {{output "get_horoscope"}}`), nil)
	defer srv.Close()

	horoscope, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.",
		func(ctx context.Context, in struct {
			Sign string `json:"sign"`
		}) (string, error) {
			return in.Sign + ": next Tuesday you will befriend a baby otter.", nil
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(horoscope)
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend, err := openai.Open(ctx, tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	runner := core.NewRunner(backend, tools, &core.Options{Logger: quiet})
	defer runner.Close()

	res, err := runner.Run(ctx, "What is my horoscope? I am an Aquarius.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println("steps:", res.Steps, "agent:", backend.Agent())
	// Output:
	// Your horoscope: Aquarius: next Tuesday you will befriend a baby otter.
	// steps: 1 agent: agent_1
}
