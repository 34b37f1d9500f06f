package telemetry_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"sort"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	_ "github.com/toolrelay/toolrelay/openai/openaitest" // the fake-openai backend
	"github.com/toolrelay/toolrelay/telemetry"
)

// ExampleHooks traces a run on the embedded fake sessions backend: the
// hooks make the run, step and call spans; Transport puts the HTTP
// requests inside their step. A program exports them where it likes (here
// to memory; stdouttrace prints them).
func ExampleHooks() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	o := &telemetry.Options{TracerProvider: tp, AgentName: "horoscope"}
	hooks, err := telemetry.Hooks(o)
	if err != nil {
		log.Fatal(err)
	}

	horoscope, _ := core.NewTool("get_horoscope", "Get today's horoscope.", func(_ context.Context, in struct {
		Sign string `json:"sign"`
	}) (string, error) {
		return "Next Tuesday you will befriend a baby otter.", nil
	}, nil)
	tools, _ := core.NewToolbox(horoscope)
	runner, err := adapter.Open(context.Background(), tools, &adapter.Options{
		Settings:        adapter.Settings{Backend: "fake-openai"},
		BackendSettings: []any{&coretest.FakeSettings{Script: coretest.Simple("get_horoscope", `{"sign":"Aquarius"}`, `{{output "get_horoscope"}}`)}},
		Runner:          core.Options{Hooks: hooks},
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return telemetry.Transport(rt, o) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer runner.Close()
	if _, err := runner.Run(context.Background(), "My horoscope? I am an Aquarius.", nil); err != nil {
		log.Fatal(err)
	}

	var names []string
	for _, s := range spans.GetSpans() {
		if s.SpanKind.String() != "client" || s.Name == "chat" || s.Name == "invoke_agent horoscope" {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	fmt.Println(names)
	// Output:
	// [chat chat execute_tool get_horoscope invoke_agent horoscope]
}
