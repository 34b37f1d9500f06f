package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/telemetry"
)

// tracingHooks returns the telemetry hooks on an SDK tracer provider that
// batches spans to an exporter that drops them, and a meter provider whose
// reader is never read: OpenTelemetry switched on, as in production, with
// nothing sent anywhere.
func tracingHooks(tb testing.TB) *core.Hooks {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tb.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	h, err := telemetry.Hooks(&telemetry.Options{TracerProvider: tp, MeterProvider: mp, AgentName: "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// BenchmarkTracing (P7) measures what tracing costs a step of one instant
// call, as BenchmarkStep does: the raw loop, toolrelay without hooks, and
// toolrelay with the telemetry hooks on (an invoke_agent span per run, a
// chat span per step, an execute_tool span per call, their metrics). The
// difference between the last two is the cost of tracing one call.
func BenchmarkTracing(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			for _, c := range []client{{name: "raw"}, {name: "toolrelay"}, {name: "toolrelay-traced", traced: true}} {
				b.Run(c.name, func(b *testing.B) { benchSteps(b, backend, c) })
			}
		})
	}
}

// BenchmarkTracingCalls (P7) measures what the telemetry hooks add to a step of instant calls
// on the in-memory backend (no HTTP), for a step of 1 call and of 8: "off"
// runs without hooks, "on" with them, spans batched to an exporter that
// drops them and metrics aggregated for a reader that is never read. One
// op is one step; (on − off) / calls is the cost of tracing a call, its
// share of the step's span included. "sdk" is the baseline of the same
// run: no runner, only the OpenTelemetry SDK, which starts and ends, per
// op, as many spans as a step has calls, each with the attributes of an
// execute_tool span (sdkCallSpan), on a tracer provider made as "on"'s;
// sdk / calls is what the SDK's own span costs a call. Besides the time,
// each reports cpu-ns/op, this process's CPU time per op (the batching
// span processor's goroutine and the collector's work included), which a
// loaded machine disturbs less than the time.
func BenchmarkTracingCalls(b *testing.B) {
	for _, calls := range []int{1, 8} {
		b.Run(fmt.Sprintf("calls=%d/sdk", calls), func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			defer tp.Shutdown(context.Background())
			tracer := tp.Tracer(telemetry.ScopeName)
			ctx, run := tracer.Start(context.Background(), "invoke_agent")
			defer run.End()
			ids := make([]string, calls)
			for i := range ids {
				ids[i] = fmt.Sprintf("call_%d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := range b.N {
				for _, id := range ids {
					sdkCallSpan(ctx, tracer, id, i+1)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
	tracingCalls(b)
}

// sdkCallSpan starts and ends a span as an execute_tool span is, written
// as an SDK user would write it: the same name, kind and attributes (10 as
// it starts, the call's outcome and reuse as it ends).
func sdkCallSpan(ctx context.Context, tracer trace.Tracer, id string, step int) {
	_, span := tracer.Start(ctx, "execute_tool echo", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIProviderNameKey.String("coretest"), telemetry.BackendKey.String("coretest"),
		semconv.GenAIToolNameKey.String("echo"), semconv.GenAIToolCallIDKey.String(id), semconv.GenAIToolTypeKey.String("function"),
		semconv.GenAIConversationIDKey.String("thread_1"), telemetry.ThreadKey.String("thread_1"), telemetry.TurnKey.String("turn_1"),
		telemetry.StepKey.Int(step)))
	span.SetAttributes(telemetry.OutcomeKey.String("ok"), telemetry.ReusedKey.Bool(false))
	span.End()
}

// tracingCalls runs BenchmarkTracingCalls's "off" and "on".
func tracingCalls(b *testing.B) {
	echo, err := core.NewTool("echo", "", func(context.Context, struct{}) (string, error) { return "ok", nil }, nil)
	if err != nil {
		b.Fatal(err)
	}
	tb, _ := core.NewToolbox(echo)
	for _, calls := range []int{1, 8} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("calls=%d/%s", calls, map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
				step := coretest.Step{}
				for range calls {
					step.Calls = append(step.Calls, coretest.Call{Name: "echo", Arguments: json.RawMessage(`{}`)})
				}
				steps := make([]coretest.Step, 0, b.N+1)
				for range b.N {
					steps = append(steps, step)
				}
				steps = append(steps, coretest.Step{Text: "done"})
				backend := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: steps}}}, &coretest.BackendOptions{Tools: tb})
				o := core.Options{MaxSteps: b.N + 1, Logger: quiet}
				if on {
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					defer tp.Shutdown(context.Background())
					defer mp.Shutdown(context.Background())
					if o.Hooks, err = telemetry.Hooks(&telemetry.Options{TracerProvider: tp, MeterProvider: mp}); err != nil {
						b.Fatal(err)
					}
				}
				r := core.NewRunner(backend, tb, &o)
				defer r.Close()
				b.ReportAllocs()
				b.ResetTimer()
				c0 := cpuTime()
				if _, err := r.Run(context.Background(), "go", nil); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
