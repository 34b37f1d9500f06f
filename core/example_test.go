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

// ExampleRunner_Stream streams a run: the model's text as it is written,
// and each call as it runs.
func ExampleRunner_Stream() {
	lookup, err := core.NewTool("get_customer", "Look up a customer by ID.",
		func(ctx context.Context, in struct {
			ID string `json:"customer_id"`
		}) (string, error) {
			return "Ada Lovelace", nil
		}, nil)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := core.NewToolbox(lookup)
	if err != nil {
		log.Fatal(err)
	}
	script := coretest.Simple("get_customer", `{"customer_id": "123"}`, `Customer 123 is {{output "get_customer"}}.`)
	backend := coretest.NewBackend(script, &coretest.BackendOptions{DeltaSize: 8})
	runner := core.NewRunner(backend, tools, &core.Options{Logger: slog.New(slog.DiscardHandler)})
	defer runner.Close()

	st := runner.Stream(context.Background(), "Who is customer 123?", nil)
	for ev, err := range st.Events() {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case core.EventCallStarted:
			fmt.Printf("[calling %s]\n", ev.Call.Name)
		case core.EventTextDelta:
			fmt.Printf("%q\n", ev.Text)
		}
	}
	res, _ := st.Result()
	fmt.Println(res.Text)
	// Output:
	// [calling get_customer]
	// "Customer"
	// " 123 is "
	// "Ada Love"
	// "lace."
	// Customer 123 is Ada Lovelace.
}

// ExampleNewFormat asks for an answer of a Go type's schema and decodes it.
func ExampleNewFormat() {
	type forecast struct {
		City  string `json:"city"`
		TempF int    `json:"temp_f"`
	}
	format, err := core.NewFormat[forecast]("forecast", &core.ToolOptions{Strict: true})
	if err != nil {
		log.Fatal(err)
	}
	backend := coretest.NewBackend(coretest.Answer(`{"city": "Seattle, WA", "temp_f": 70}`), nil)
	runner := core.NewRunner(backend, nil, &core.Options{Logger: slog.New(slog.DiscardHandler)})
	defer runner.Close()

	res, err := runner.Run(context.Background(), "The forecast?", &core.RunOptions{Format: format})
	if err != nil {
		log.Fatal(err)
	}
	f, err := core.Decode[forecast](format, res)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", f)
	fmt.Println(string(format.Schema()))
	// Output:
	// {City:Seattle, WA TempF:70}
	// {"type":"object","properties":{"city":{"type":"string"},"temp_f":{"type":"integer"}},"required":["city","temp_f"],"additionalProperties":false}
}
