package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/telemetry"
)

// traceMode says what -trace prints after the answer.
type traceMode int

const (
	noTrace   traceMode = iota
	traceTree           // a tree of the spans: name, duration, key attributes
	traceJSON           // every span as JSON (OpenTelemetry's stdout exporter)
)

// tracing returns the options that trace the run, and a function that
// prints the spans to w, as mode says, once the run is over.
func tracing(w io.Writer, mode traceMode) (*adapter.Options, func(context.Context) error, error) {
	var tp *sdktrace.TracerProvider
	var print func() error
	switch mode {
	case traceJSON:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint())
		if err != nil {
			return nil, nil, err
		}
		tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		print = func() error { return nil }
	default:
		rec := tracetest.NewSpanRecorder()
		tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		print = func() error { return printTree(w, rec.Ended()) }
	}
	to := &telemetry.Options{TracerProvider: tp, AgentName: "weather-bot"}
	hooks, err := telemetry.Hooks(to)
	if err != nil {
		return nil, nil, err
	}
	done := func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return err
		}
		return print()
	}
	return &adapter.Options{
		Runner:        core.Options{Hooks: hooks},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return telemetry.Transport(rt, to) },
	}, done, nil
}

// keyAttributes are the attributes the tree shows, under shorter names
// (the thread on the run's span only: its steps and calls share it).
var keyAttributes = []struct{ key, label string }{
	{"toolrelay.step.op", "op"},
	{"toolrelay.step.calls", "calls"},
	{"toolrelay.step.results", "results"},
	{"gen_ai.tool.call.id", "call"},
	{"toolrelay.call.outcome", "outcome"},
	{"gen_ai.usage.input_tokens", "tokens in"},
	{"gen_ai.usage.output_tokens", "out"},
	{"http.response.status_code", "status"},
	{"error.type", "error"},
}

// printTree prints spans as a tree, each child under its parent in the
// order they started: name, duration, and the key attributes.
func printTree(w io.Writer, spans []sdktrace.ReadOnlySpan) error {
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	known := map[trace.SpanID]bool{}
	for _, s := range spans {
		known[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); s.Parent().IsValid() && known[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }
	slices.SortFunc(roots, byStart)
	width := 0
	var measure func(s sdktrace.ReadOnlySpan, depth int)
	measure = func(s sdktrace.ReadOnlySpan, depth int) {
		width = max(width, 3*depth+utf8.RuneCountInString(spanName(s)))
		for _, c := range children[s.SpanContext().SpanID()] {
			measure(c, depth+1)
		}
	}
	for _, r := range roots {
		measure(r, 0)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d spans:\n", len(spans))
	var walk func(s sdktrace.ReadOnlySpan, prefix, branch string)
	walk = func(s sdktrace.ReadOnlySpan, prefix, branch string) {
		label := prefix + branch + spanName(s)
		fmt.Fprintf(&b, "%-*s %9s  %s\n", width, label, duration(s.EndTime().Sub(s.StartTime())), attributes(s))
		kids := children[s.SpanContext().SpanID()]
		slices.SortFunc(kids, byStart)
		next := prefix
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, c := range kids {
			branch := "├─ "
			if i == len(kids)-1 {
				branch = "└─ "
			}
			walk(c, next, branch)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// spanName returns a span's name; an HTTP request's with its path (past a
// Foundry project's /api/projects/<name>).
func spanName(s sdktrace.ReadOnlySpan) string {
	for _, a := range s.Attributes() {
		if a.Key == "url.full" {
			if u, err := url.Parse(a.Value.Emit()); err == nil {
				path := u.Path
				if rest, ok := strings.CutPrefix(path, "/api/projects/"); ok {
					if _, after, ok := strings.Cut(rest, "/"); ok {
						path = "…/" + after
					}
				}
				return s.Name() + " " + path
			}
		}
	}
	return s.Name()
}

// attributes returns a span's key attributes as label=value, and its
// error status.
func attributes(s sdktrace.ReadOnlySpan) string {
	var parts []string
	if strings.HasPrefix(s.Name(), "invoke_agent") {
		for _, a := range s.Attributes() {
			if a.Key == "gen_ai.conversation.id" {
				parts = append(parts, "thread="+a.Value.Emit())
			}
		}
	}
	for _, k := range keyAttributes {
		for _, a := range s.Attributes() {
			if a.Key == attribute.Key(k.key) && a.Value.Emit() != "" {
				parts = append(parts, k.label+"="+a.Value.Emit())
			}
		}
	}
	if st := s.Status(); st.Code == codes.Error {
		parts = append(parts, "ERROR "+st.Description)
	}
	return strings.Join(parts, " ")
}

// duration rounds d for reading: µs under a millisecond, else 0.1 ms.
func duration(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}
