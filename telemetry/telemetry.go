// Package telemetry follows toolrelay's runs with OpenTelemetry: spans and
// metrics named after the OpenTelemetry semantic conventions for
// generative AI, the same on every backend. Programs that do not import it
// do not link OpenTelemetry.
//
// [Hooks] returns the [core.Hooks] to set in core.Options.Hooks. A run is
// an invoke_agent span; each request for a step (the user's input, a
// step's results, a resume) a chat span inside it; each call an
// execute_tool span inside the run, whose context is the handler's parent,
// so that the handler's own spans nest in it. [Transport] wraps an HTTP
// transport so that the requests to the service are spans inside the step
// that made them (pass it to a backend's HTTPClient, or to
// adapter.Options.WrapTransport).
//
// Spans carry gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.agent.name (when set), gen_ai.conversation.id (the
// conversation, core.RunInfo.Conversation: the thread, the same on every
// span of every run of it; in a chain of responses, whose thread moves on
// with each step, the thread the chain began on, from run to run when the
// journal keeps notes), toolrelay.thread (the thread as it is then),
// toolrelay.backend and toolrelay.turn; tool spans
// gen_ai.tool.name, gen_ai.tool.call.id, gen_ai.tool.type and
// toolrelay.call.outcome; chat and run spans gen_ai.request.model (the
// model the service said made the step, or the backend's or agent's) and
// the token counts gen_ai.usage.input_tokens and
// gen_ai.usage.output_tokens; chat spans gen_ai.response.id (the
// service's response, on sessions its turn). A failed piece has error.type (the call's
// outcome, such as "panicked", "timed_out" or "in_doubt", or the run's
// error code) and an error status. Arguments, outputs and error messages
// are never recorded unless Options.RecordContent is set: they may hold
// what the program must keep to itself.
//
// A resumed run links to the run that started its turn, in this process or
// another: the run's trace context travels in the journal's notes (see
// core.RunInfo.Origin).
//
// Metrics: gen_ai.client.operation.duration (seconds, by
// gen_ai.operation.name, gen_ai.provider.name, error.type and, for tools,
// gen_ai.tool.name), gen_ai.client.token.usage (by gen_ai.token.type),
// toolrelay.tool.calls (by gen_ai.tool.name, toolrelay.call.outcome and
// toolrelay.call.reused) and toolrelay.journal.write.duration (seconds, by
// toolrelay.journal.op and error.type).
package telemetry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/toolrelay/toolrelay/telemetry"

// Options configure [Hooks] and [Transport]. nil is usable.
type Options struct {
	// TracerProvider makes the tracer; nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// AgentName, if set, is gen_ai.agent.name, and names the run spans
	// ("invoke_agent <name>").
	AgentName string
	// RecordContent records what calls carry on their spans: the
	// arguments (gen_ai.tool.call.arguments), the output or the message of
	// a failed call (gen_ai.tool.call.result). Off by default.
	RecordContent bool
}

// The attributes of toolrelay's own.
const (
	BackendKey = attribute.Key("toolrelay.backend")
	// ThreadKey is the backend's thread: the conversation, or, in a chain
	// of responses, the latest response (gen_ai.conversation.id names the
	// run's conversation, which stays the same).
	ThreadKey     = attribute.Key("toolrelay.thread")
	TurnKey       = attribute.Key("toolrelay.turn")
	StepKey       = attribute.Key("toolrelay.step")
	StepOpKey     = attribute.Key("toolrelay.step.op")
	ResultsKey    = attribute.Key("toolrelay.step.results")
	CallsKey      = attribute.Key("toolrelay.step.calls")
	ResumeKey     = attribute.Key("toolrelay.resume")
	OutcomeKey    = attribute.Key("toolrelay.call.outcome")
	ReusedKey     = attribute.Key("toolrelay.call.reused")
	RunOutcomeKey = attribute.Key("toolrelay.run.outcome")
	JournalOpKey  = attribute.Key("toolrelay.journal.op")
	// The budget's remains (core.Remaining), on the run span at its end
	// and on the chat spans that send results, for the limits the run's
	// budget sets; the run span also carries its cost and tool calls
	// (core.Result.Cost, ToolCalls) when it has a budget.
	BudgetInputTokensKey  = attribute.Key("toolrelay.budget.remaining.input_tokens")
	BudgetOutputTokensKey = attribute.Key("toolrelay.budget.remaining.output_tokens")
	BudgetTotalTokensKey  = attribute.Key("toolrelay.budget.remaining.total_tokens")
	BudgetToolCallsKey    = attribute.Key("toolrelay.budget.remaining.tool_calls")
	BudgetCostKey         = attribute.Key("toolrelay.budget.remaining.cost")
	RunToolCallsKey       = attribute.Key("toolrelay.run.tool_calls")
	RunCostKey            = attribute.Key("toolrelay.run.cost")
	// ServerKey names where a tool forwards its calls, such as an MCP
	// server (core.ToolOptions.Server).
	ServerKey     = attribute.Key("toolrelay.tool.server")
	ToolArgsKey   = attribute.Key("gen_ai.tool.call.arguments")
	ToolResultKey = attribute.Key("gen_ai.tool.call.result")
)

// providers maps backend names to gen_ai.provider.name.
var providers = map[string]string{"openai": "openai", "responses": "openai", "foundry": "azure.ai.openai"}

func provider(backend string) attribute.KeyValue {
	if p, ok := providers[backend]; ok {
		return semconv.GenAIProviderNameKey.String(p)
	}
	return semconv.GenAIProviderNameKey.String(backend)
}

type telemetry struct {
	o        Options
	tracer   trace.Tracer
	duration metric.Float64Histogram
	tokens   metric.Int64Histogram
	calls    metric.Int64Counter
	journal  metric.Float64Histogram
	agent    []attribute.KeyValue // gen_ai.agent.name, when set
	runName  string

	// Measurement options and span names, made once per distinct set of
	// attributes (attribute sets cost allocations to make).
	durations cache[[4]string, []metric.RecordOption]
	toolCalls cache[[3]string, []metric.AddOption]
	usage     cache[[2]string, []metric.RecordOption]
	writes    cache[[2]string, []metric.RecordOption]
	names     cache[string, string]
}

// maxCached bounds each cache: past it, values are made each time.
const maxCached = 4096

// A cache holds values by key, made once, at most maxCached of them; safe
// for concurrent use.
type cache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// load returns the value of key, if it is cached.
func (c *cache[K, V]) load(key K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[key]
	return v, ok
}

// store caches v for key, unless the cache is full, and returns v.
func (c *cache[K, V]) store(key K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]V{}
	}
	if len(c.m) < maxCached {
		c.m[key] = v
	}
	return v
}

// recordOpts and addOpts are the options of a measurement with attributes
// attrs (kept in a slice, so that passing them allocates nothing).
func recordOpts(attrs ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

func addOpts(attrs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// metricTool is the tool name metrics use: the call's, unless the model
// called a tool the program does not have (any name at all: a metric must
// not have a series per name the model makes up).
func metricTool(name string, o core.Outcome) string {
	if o == core.UnknownTool {
		return "_unknown"
	}
	return name
}

// Hooks returns the hooks that trace and measure a runner's work (set them
// in core.Options.Hooks). o may be nil.
func Hooks(o *Options) (*core.Hooks, error) {
	t := &telemetry{runName: "invoke_agent"}
	if o != nil {
		t.o = *o
	}
	tp, mp := t.o.TracerProvider, t.o.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t.tracer = tp.Tracer(ScopeName)
	m := mp.Meter(ScopeName)
	var err error
	if t.duration, err = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)); err != nil {
		return nil, err
	}
	if t.tokens, err = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)); err != nil {
		return nil, err
	}
	if t.calls, err = m.Int64Counter("toolrelay.tool.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls answered, by tool and outcome.")); err != nil {
		return nil, err
	}
	if t.journal, err = m.Float64Histogram("toolrelay.journal.write.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the journal writes on a call's path."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)); err != nil {
		return nil, err
	}
	if t.o.AgentName != "" {
		t.agent = []attribute.KeyValue{semconv.GenAIAgentNameKey.String(t.o.AgentName)}
		t.runName += " " + t.o.AgentName
	}
	return &core.Hooks{Run: t.run, Step: t.step, Call: t.call, JournalWrite: t.journalWrite}, nil
}

// Transport returns base (http.DefaultTransport when nil) wrapped so that
// each request is a client span, a child of the step that sends it, with
// the trace context propagated in its headers. o may be nil.
func Transport(base http.RoundTripper, o *Options) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	var opts []otelhttp.Option
	if o != nil && o.TracerProvider != nil {
		opts = append(opts, otelhttp.WithTracerProvider(o.TracerProvider))
	}
	if o != nil && o.MeterProvider != nil {
		opts = append(opts, otelhttp.WithMeterProvider(o.MeterProvider))
	}
	return otelhttp.NewTransport(base, opts...)
}

var traceContext = propagation.TraceContext{}

// A runState is what a run's span learns from its steps, for the spans
// inside it: the conversation (core.RunInfo.Conversation, else the first
// step's thread: in a chain of responses the thread moves on with each
// step, the conversation does not) and the model.
type runState struct {
	mu                  sync.Mutex
	conversation, model string
}

type runStateKey struct{}

// learn records what step next tells of the run, and returns the
// conversation. rs may be nil (a step outside a traced run).
func (rs *runState) learn(next *driver.Step) string {
	if rs == nil {
		return next.Thread
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.conversation == "" {
		rs.conversation = next.Thread
	}
	if next.Model != "" {
		rs.model = next.Model
	}
	return rs.conversation
}

// get returns the conversation (or thread, when none is known yet) and the
// model.
func (rs *runState) get(thread string) (conversation, model string) {
	if rs == nil {
		return thread, ""
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return cmp.Or(rs.conversation, thread), rs.model
}

func stateOf(ctx context.Context) *runState {
	rs, _ := ctx.Value(runStateKey{}).(*runState)
	return rs
}

// run starts an invoke_agent span. A new run's trace context becomes its
// Origin; a resume links to its Origin's.
func (t *telemetry) run(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
	attrs := make([]attribute.KeyValue, 0, 6+len(t.agent))
	attrs = append(attrs, semconv.GenAIOperationNameInvokeAgent, provider(info.Backend), BackendKey.String(info.Backend), ResumeKey.Bool(info.Resume))
	attrs = append(attrs, t.agent...)
	opts := []trace.SpanStartOption{client, trace.WithAttributes(attrs...)}
	if info.Resume && info.Origin != "" {
		origin := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": info.Origin}))
		if origin.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: origin}))
		}
	}
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, t.runName, opts...)
	rs := &runState{conversation: cmp.Or(info.Conversation, info.Thread)}
	ctx = context.WithValue(ctx, runStateKey{}, rs)
	if !info.Resume && span.SpanContext().IsValid() {
		c := propagation.MapCarrier{}
		traceContext.Inject(ctx, c)
		info.Origin = c["traceparent"]
	}
	return ctx, func(res *core.Result, err error) {
		if res != nil {
			conv, model := rs.get(res.Thread)
			span.SetAttributes(semconv.GenAIConversationIDKey.String(conv), ThreadKey.String(res.Thread), TurnKey.String(res.Turn),
				semconv.GenAIUsageInputTokensKey.Int64(res.Usage.InputTokens), semconv.GenAIUsageOutputTokensKey.Int64(res.Usage.OutputTokens))
			if model != "" {
				span.SetAttributes(semconv.GenAIRequestModelKey.String(model))
			}
			if res.Remaining.Set {
				setRemaining(span, res.Remaining)
				span.SetAttributes(RunToolCallsKey.Int(res.ToolCalls), RunCostKey.Float64(res.Cost))
			}
		}
		errType := ""
		switch {
		case errors.Is(err, core.ErrAwaitingApproval):
			span.SetAttributes(RunOutcomeKey.String("awaiting_approval"))
		case errors.Is(err, core.ErrBudgetExceeded):
			errType = errcode.Of(err).String()
			span.SetAttributes(RunOutcomeKey.String("budget_exceeded"), semconv.ErrorTypeKey.String(errType))
			span.SetStatus(codes.Error, errType)
		case err != nil:
			errType = errcode.Of(err).String()
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			span.SetStatus(codes.Error, errType)
		}
		span.End()
		t.record(ctx, start, "invoke_agent", info.Backend, errType, "")
	}
}

// setRemaining sets on span what is left of each limit a budget sets.
func setRemaining(span trace.Span, rem core.Remaining) {
	var attrs [5]attribute.KeyValue
	n := 0
	for _, l := range [...]struct {
		key attribute.Key
		v   int64
	}{{BudgetInputTokensKey, rem.InputTokens}, {BudgetOutputTokensKey, rem.OutputTokens}, {BudgetTotalTokensKey, rem.TotalTokens}, {BudgetToolCallsKey, rem.ToolCalls}} {
		if l.v != core.Unlimited {
			attrs[n] = l.key.Int64(l.v)
			n++
		}
	}
	if rem.Cost != core.Unlimited {
		attrs[n] = BudgetCostKey.Float64(rem.Cost)
		n++
	}
	span.SetAttributes(attrs[:n]...)
}

// step starts a chat span: one request of the backend for a step.
func (t *telemetry) step(ctx context.Context, info *core.StepInfo) (context.Context, func(*driver.Step, error)) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "chat", client, trace.WithAttributes(
		semconv.GenAIOperationNameChat, provider(info.Backend), BackendKey.String(info.Backend),
		StepOpKey.String(info.Op), StepKey.Int(info.Step), ResultsKey.Int(info.Results)))
	if info.Remaining.Set {
		setRemaining(span, info.Remaining)
	}
	backend := info.Backend
	return ctx, func(next *driver.Step, err error) {
		errType := ""
		if err != nil {
			errType = errcode.Of(err).String()
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			span.SetStatus(codes.Error, errType)
		}
		if next != nil {
			span.SetAttributes(semconv.GenAIConversationIDKey.String(stateOf(ctx).learn(next)), ThreadKey.String(next.Thread),
				TurnKey.String(next.Turn), CallsKey.Int(len(next.Calls)),
				semconv.GenAIUsageInputTokensKey.Int64(next.Usage.InputTokens), semconv.GenAIUsageOutputTokensKey.Int64(next.Usage.OutputTokens))
			if next.Model != "" {
				span.SetAttributes(semconv.GenAIRequestModelKey.String(next.Model))
			}
			if next.Turn != "" {
				// The service's response (on sessions, its turn).
				span.SetAttributes(semconv.GenAIResponseIDKey.String(next.Turn))
			}
			if u := next.Usage; u.InputTokens > 0 || u.OutputTokens > 0 {
				for _, tt := range [...]struct {
					typ string
					n   int64
				}{{"input", u.InputTokens}, {"output", u.OutputTokens}} {
					key := [2]string{backend, tt.typ}
					opt, ok := t.usage.load(key)
					if !ok {
						opt = t.usage.store(key, recordOpts(semconv.GenAIOperationNameChat, provider(backend), semconv.GenAITokenTypeKey.String(tt.typ)))
					}
					t.tokens.Record(ctx, tt.n, opt...)
				}
			}
		}
		span.End()
		t.record(ctx, start, "chat", backend, errType, "")
	}
}

// call starts an execute_tool span, the handler's parent.
func (t *telemetry) call(ctx context.Context, info *core.CallInfo) (context.Context, func(*core.CallEnd)) {
	c := info.Call
	start := time.Now()
	conv, _ := stateOf(ctx).get(c.Thread)
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool, provider(info.Backend), BackendKey.String(info.Backend),
		semconv.GenAIToolNameKey.String(c.Name), semconv.GenAIToolCallIDKey.String(c.ID), semconv.GenAIToolTypeKey.String("function"),
		semconv.GenAIConversationIDKey.String(conv), ThreadKey.String(c.Thread), TurnKey.String(c.Turn), StepKey.Int(info.Step),
	}
	if info.Server != "" {
		attrs = append(attrs, ServerKey.String(info.Server))
	}
	if t.o.RecordContent {
		attrs = append(attrs, ToolArgsKey.String(string(c.Arguments)))
	}
	name, ok := t.names.load(c.Name)
	if !ok {
		name = t.names.store(c.Name, "execute_tool "+c.Name)
	}
	ctx, span := t.tracer.Start(ctx, name, internal, trace.WithAttributes(attrs...))
	backend := info.Backend
	return ctx, func(e *core.CallEnd) {
		var outcome, errType string
		switch {
		case e.Paused:
			outcome = "awaiting_approval"
		case e.Err != nil:
			outcome, errType = "error", errcode.Of(e.Err).String()
		default:
			outcome = e.Result.Outcome.String()
			if e.Result.Failed {
				errType = outcome
			}
		}
		end := [4]attribute.KeyValue{OutcomeKey.String(outcome), ReusedKey.Bool(e.Reused)}
		n := 2
		if errType != "" {
			end[n] = semconv.ErrorTypeKey.String(errType)
			n++
			span.SetStatus(codes.Error, errType)
		}
		if t.o.RecordContent && e.Err == nil && !e.Paused {
			end[n] = ToolResultKey.String(resultText(e.Result))
			n++
		}
		span.SetAttributes(end[:n]...)
		span.End()
		tool := metricTool(c.Name, e.Result.Outcome)
		t.record(ctx, start, "execute_tool", backend, errType, tool)
		key := [3]string{tool, outcome, strconv.FormatBool(e.Reused)}
		opt, ok := t.toolCalls.load(key)
		if !ok {
			opt = t.toolCalls.store(key, addOpts(semconv.GenAIToolNameKey.String(tool), OutcomeKey.String(outcome), ReusedKey.Bool(e.Reused)))
		}
		t.calls.Add(ctx, 1, opt...)
	}
}

// resultText is what a result says to the model.
func resultText(r core.CallResult) string {
	switch {
	case r.Failed:
		return r.Error
	case r.Output.Parts != nil:
		b, _ := json.Marshal(r.Output.Parts)
		return string(b)
	}
	return r.Output.Text
}

// record adds an operation's duration to gen_ai.client.operation.duration.
func (t *telemetry) record(ctx context.Context, start time.Time, op, backend, errType, tool string) {
	key := [4]string{op, backend, errType, tool}
	opt, ok := t.durations.load(key)
	if !ok {
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameKey.String(op), provider(backend)}
		if errType != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
		}
		if tool != "" {
			attrs = append(attrs, semconv.GenAIToolNameKey.String(tool))
		}
		opt = t.durations.store(key, recordOpts(attrs...))
	}
	t.duration.Record(ctx, time.Since(start).Seconds(), opt...)
}

func (t *telemetry) journalWrite(ctx context.Context, op string, d time.Duration, err error) {
	errType := ""
	if err != nil {
		errType = errcode.Of(err).String()
	}
	key := [2]string{op, errType}
	opt, ok := t.writes.load(key)
	if !ok {
		if errType != "" {
			opt = t.writes.store(key, recordOpts(JournalOpKey.String(op), semconv.ErrorTypeKey.String(errType)))
		} else {
			opt = t.writes.store(key, recordOpts(JournalOpKey.String(op)))
		}
	}
	t.journal.Record(ctx, d.Seconds(), opt...)
}

// Span start options made once.
var (
	internal = trace.WithSpanKind(trace.SpanKindInternal)
	client   = trace.WithSpanKind(trace.SpanKindClient)
)
