package core_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// Example registers a typed tool and runs the loop on the in-memory
// scripted backend: the fake model asks for the horoscope of Aquarius and
// answers with what the function returned.
func Example() {
	type signArgs struct {
		Sign string `json:"sign" jsonschema:"An astrological sign like Taurus or Aquarius"`
	}
	horoscope, err := core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.",
		func(ctx context.Context, in signArgs) (string, error) {
			return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
		}, &core.ToolOptions{Strict: true})
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(horoscope)
	if err != nil {
		log.Fatal(err)
	}

	script := coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`,
		`Your horoscope for Aquarius: {{output "get_horoscope"}}`)
	runner := core.NewRunner(coretest.NewBackend(script, nil), tools, &core.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(e core.Event) {
			if e.Kind == core.EventCallStarted {
				fmt.Printf("Calling %s...\n", e.Call.Name)
			}
		},
	})
	defer runner.Close()

	res, err := runner.Run(context.Background(), "What is my horoscope? I am an Aquarius.", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Agent response:", res.Text)
	fmt.Println(string(horoscope.Parameters()))
	// Output:
	// Calling get_horoscope...
	// Agent response: Your horoscope for Aquarius: Aquarius: Next Tuesday you will befriend a baby otter.
	// {"type":"object","properties":{"sign":{"type":"string","description":"An astrological sign like Taurus or Aquarius"}},"required":["sign"],"additionalProperties":false}
}
