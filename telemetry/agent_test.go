package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/telemetry"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestAgentToolSpans: the run of an agent tool's child (core.NewAgentTool)
// nests in the parent's execute_tool span of the call, its own spans
// inside it, in one trace.
func TestAgentToolSpans(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	hooks := func(name string) *core.Hooks {
		h, err := telemetry.Hooks(&telemetry.Options{TracerProvider: tp, AgentName: name})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	lookup, err := core.NewTool("lookup", "Looks up.", func(context.Context, struct{}) (string, error) { return "found", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	childTools, _ := core.NewToolbox(lookup)
	child := core.NewRunner(coretest.NewBackend(coretest.Simple("lookup", `{}`, `{{output "lookup"}}`), nil), childTools, &core.Options{Logger: quiet, Hooks: hooks("child")})
	ask, err := core.NewAgentTool("ask", "Asks the child.", child, nil)
	if err != nil {
		t.Fatal(err)
	}
	parentTools, _ := core.NewToolbox(ask)
	parent := core.NewRunner(coretest.NewBackend(coretest.Simple("ask", `{"input":"go"}`, `{{output "ask"}}`), nil), parentTools, &core.Options{Logger: quiet, Hooks: hooks("parent")})
	if _, err := parent.Run(t.Context(), "go", nil); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	ids := map[string]string{} // span id → name
	for _, s := range got {
		ids[s.SpanContext.SpanID().String()] = s.Name
	}
	var nesting []string
	for _, s := range got {
		if s.SpanContext.TraceID() != got[0].SpanContext.TraceID() {
			t.Errorf("span %s is in another trace", s.Name)
		}
		if p := ids[s.Parent.SpanID().String()]; p != "" && (p == "execute_tool ask" || p == "invoke_agent child") {
			nesting = append(nesting, p+" > "+s.Name)
		}
	}
	want := []string{"execute_tool ask > invoke_agent child", "invoke_agent child > chat", "invoke_agent child > chat", "invoke_agent child > execute_tool lookup"}
	slices.Sort(want)
	slices.Sort(nesting)
	if diff := cmp.Diff(want, nesting); diff != "" {
		t.Errorf("span nesting (-want +got):\n%s", diff)
	}
}
