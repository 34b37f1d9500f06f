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

	// Measurement options, made once per distinct set of attributes
	// (attribute sets cost allocations to make), and the tools' entries.
	durations cache[[4]string, []metric.RecordOption]
	toolCalls cache[[3]string, []metric.AddOption]
	usage     cache[[2]string, []metric.RecordOption]
	writes    cache[[2]string, []metric.RecordOption]
	tools     cache[[3]string, *tool]
	okWrites  [len(journalOps)][]metric.RecordOption

	// callSpans and stepSpans hold the callSpans and stepSpans of calls
	// and steps that ended, for the next.
	callSpans, stepSpans sync.Pool
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
	t.callSpans.New, t.stepSpans.New = newCallSpan, newStepSpan
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
	for i, op := range journalOps {
		t.okWrites[i] = recordOpts(JournalOpKey.String(op))
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

// step starts a chat span: one request of the backend for a step. As a
// call's span, its attributes are written into a stepSpan taken from a
// pool, whose start options and end function were made with it.
func (t *telemetry) step(ctx context.Context, info *core.StepInfo) (context.Context, func(*driver.Step, error)) {
	start := time.Now()
	ss := t.stepSpans.Get().(*stepSpan)
	ss.attrs = [len(ss.attrs)]attribute.KeyValue{semconv.GenAIOperationNameChat, provider(info.Backend), BackendKey.String(info.Backend),
		StepOpKey.String(info.Op), StepKey.Int(info.Step), ResultsKey.Int(info.Results)}
	// The tracer copies the attributes as it starts the span (see call).
	ctx, ss.span = t.tracer.Start(ctx, "chat", ss.opts[:]...)
	clear(ss.attrs[:])
	if info.Remaining.Set {
		setRemaining(ss.span, info.Remaining)
	}
	ss.t, ss.ctx, ss.backend, ss.start = t, ctx, info.Backend, start
	return ctx, ss.endFn
}

// A stepSpan is a step's span while the backend is asked for the step, and
// the room its attributes are written in; telemetry.stepSpans keeps them
// for the next steps.
type stepSpan struct {
	t       *telemetry
	ctx     context.Context // the span's
	span    trace.Span
	backend string
	start   time.Time
	// attrs holds the attributes the span starts with; opts the start
	// options (the span's kind, trace.WithAttributes(attrs[:]...)), made
	// once with the stepSpan.
	attrs [6]attribute.KeyValue
	opts  [2]trace.SpanStartOption
	// end holds the attributes set as the step ends.
	end [9]attribute.KeyValue
	// endFn is ss.finish, made once.
	endFn func(*driver.Step, error)
}

// newStepSpan makes a stepSpan for t.stepSpans.
func newStepSpan() any {
	ss := &stepSpan{}
	ss.opts = [2]trace.SpanStartOption{client, trace.WithAttributes(ss.attrs[:]...)}
	ss.endFn = ss.finish
	return ss
}

// finish ends the step's span, records its metrics, and gives ss back to
// stepSpans: the runner calls it once, as the step ends.
func (ss *stepSpan) finish(next *driver.Step, err error) {
	t, span, ctx, backend := ss.t, ss.span, ss.ctx, ss.backend
	errType := ""
	n := 0
	if err != nil {
		errType = errcode.Of(err).String()
		ss.end[n] = semconv.ErrorTypeKey.String(errType)
		n++
		span.SetStatus(codes.Error, errType)
	}
	if next != nil {
		ss.end[n] = semconv.GenAIConversationIDKey.String(stateOf(ctx).learn(next))
		ss.end[n+1] = ThreadKey.String(next.Thread)
		ss.end[n+2] = TurnKey.String(next.Turn)
		ss.end[n+3] = CallsKey.Int(len(next.Calls))
		ss.end[n+4] = semconv.GenAIUsageInputTokensKey.Int64(next.Usage.InputTokens)
		ss.end[n+5] = semconv.GenAIUsageOutputTokensKey.Int64(next.Usage.OutputTokens)
		n += 6
		if next.Model != "" {
			ss.end[n] = semconv.GenAIRequestModelKey.String(next.Model)
			n++
		}
		if next.Turn != "" {
			// The service's response (on sessions, its turn).
			ss.end[n] = semconv.GenAIResponseIDKey.String(next.Turn)
			n++
		}
	}
	span.SetAttributes(ss.end[:n]...) // which copies them
	clear(ss.end[:n])
	if next != nil {
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
	t.record(ctx, ss.start, "chat", backend, errType, "")
	ss.t, ss.ctx, ss.span, ss.backend = nil, nil, nil, ""
	t.stepSpans.Put(ss)
}

// call starts an execute_tool span, the handler's parent.
//
// A call is the hottest of the hooks (every call of every step), so its
// work is made of what was prepared before: the span's name, its fixed
// attributes and the measurement options of a call that succeeds come from
// the tool's entry (toolOf), and the attributes of this call are written
// into a callSpan taken from a pool, whose span start options and end
// function were made with it; a call allocates nothing of its own beyond
// what the tracer does.
func (t *telemetry) call(ctx context.Context, info *core.CallInfo) (context.Context, func(*core.CallEnd)) {
	c := info.Call
	start := time.Now()
	conv, _ := stateOf(ctx).get(c.Thread)
	tl := t.toolOf(info.Backend, c.Name, info.Server)
	cs := t.callSpans.Get().(*callSpan)
	n := copy(cs.attrs[:], tl.attrs[:tl.n])
	cs.attrs[n] = semconv.GenAIToolCallIDKey.String(c.ID)
	cs.attrs[n+1] = semconv.GenAIConversationIDKey.String(conv)
	cs.attrs[n+2] = ThreadKey.String(c.Thread)
	cs.attrs[n+3] = TurnKey.String(c.Turn)
	cs.attrs[n+4] = StepKey.Int(info.Step)
	n += 5
	if t.o.RecordContent {
		cs.attrs[n] = ToolArgsKey.String(string(c.Arguments))
		n++
	}
	// The tracer copies the attributes as it starts the span (the options
	// are applied by trace.NewSpanStartConfig, which appends them to a
	// slice of its own), so cs.attrs is free again once Start returns.
	cs.opts[1] = cs.withAttrs[n-minCallAttrs]
	ctx, cs.span = t.tracer.Start(ctx, tl.name, cs.opts[:]...)
	cs.opts[1] = nil
	clear(cs.attrs[:n])
	cs.t, cs.tool, cs.ctx, cs.call, cs.backend, cs.start = t, tl, ctx, c, info.Backend, start
	return ctx, cs.endFn
}

// The number of attributes an execute_tool span starts with: 10 (the
// operation, the provider, the backend, the tool's name and type, the call's
// id, the conversation, the thread, the turn and the step), then the
// server and the arguments when there are.
const (
	minCallAttrs = 10
	maxCallAttrs = minCallAttrs + 2
)

// A callSpan is a call's span while the call runs, and the room its
// attributes are written in; telemetry.callSpans keeps them for the next
// calls.
type callSpan struct {
	t       *telemetry
	tool    *tool
	ctx     context.Context // the span's
	span    trace.Span
	call    *core.Call
	backend string
	start   time.Time

	// attrs holds the attributes the span starts with; withAttrs[i] is
	// trace.WithAttributes(attrs[:minCallAttrs+i]...), and opts the start
	// options (the span's kind, then one of withAttrs), all made once
	// with the callSpan, so that starting a span allocates none of them.
	attrs     [maxCallAttrs]attribute.KeyValue
	withAttrs [maxCallAttrs - minCallAttrs + 1]trace.SpanStartOption
	opts      [2]trace.SpanStartOption
	// end holds the attributes set as the call ends.
	end [4]attribute.KeyValue
	// endFn is cs.finish, made once.
	endFn func(*core.CallEnd)
}

// newCallSpan makes a callSpan for t.callSpans.
func newCallSpan() any {
	cs := &callSpan{}
	for i := range cs.withAttrs {
		cs.withAttrs[i] = trace.WithAttributes(cs.attrs[:minCallAttrs+i]...)
	}
	cs.opts[0] = internal
	cs.endFn = cs.finish
	return cs
}

// finish ends the call's span, records its metrics, and gives cs back to
// callSpans: the runner calls it once, as the call ends.
func (cs *callSpan) finish(e *core.CallEnd) {
	t, tl, span, ctx, c := cs.t, cs.tool, cs.span, cs.ctx, cs.call
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
	cs.end[0], cs.end[1] = OutcomeKey.String(outcome), ReusedKey.Bool(e.Reused)
	n := 2
	if errType != "" {
		cs.end[n] = semconv.ErrorTypeKey.String(errType)
		n++
		span.SetStatus(codes.Error, errType)
	}
	if t.o.RecordContent && e.Err == nil && !e.Paused {
		cs.end[n] = ToolResultKey.String(resultText(e.Result))
		n++
	}
	span.SetAttributes(cs.end[:n]...) // which copies them
	span.End()
	seconds := time.Since(cs.start).Seconds()
	if errType == "" && outcome == okOutcome {
		// The common case: the options were made with the tool's entry.
		reused := 0
		if e.Reused {
			reused = 1
		}
		t.duration.Record(ctx, seconds, tl.okDuration...)
		t.calls.Add(ctx, 1, tl.okCalls[reused]...)
	} else {
		name := metricTool(c.Name, e.Result.Outcome)
		t.recordSeconds(ctx, seconds, "execute_tool", cs.backend, errType, name)
		key := [3]string{name, outcome, strconv.FormatBool(e.Reused)}
		opt, ok := t.toolCalls.load(key)
		if !ok {
			opt = t.toolCalls.store(key, addOpts(semconv.GenAIToolNameKey.String(name), OutcomeKey.String(outcome), ReusedKey.Bool(e.Reused)))
		}
		t.calls.Add(ctx, 1, opt...)
	}
	clear(cs.end[:n])
	cs.t, cs.tool, cs.ctx, cs.span, cs.call, cs.backend = nil, nil, nil, nil, nil, ""
	t.callSpans.Put(cs)
}

// okOutcome is the outcome of a call whose handler returned a result.
var okOutcome = core.OK.String()

// A tool is what the spans and metrics of a tool's calls share, made once
// per backend, tool name and server (see toolOf).
type tool struct {
	name  string // the span's: "execute_tool <tool>"
	attrs [6]attribute.KeyValue
	n     int // attrs[:n] start every span of the tool's calls
	// The options of a call that succeeds: its duration, and its count by
	// toolrelay.call.reused (false, true).
	okDuration []metric.RecordOption
	okCalls    [2][]metric.AddOption
}

// toolOf returns the entry of a tool's calls on backend, made once (past
// maxCached entries, made each time).
func (t *telemetry) toolOf(backend, name, server string) *tool {
	key := [3]string{backend, name, server}
	if tl, ok := t.tools.load(key); ok {
		return tl
	}
	p := provider(backend)
	tl := &tool{name: "execute_tool " + name}
	tl.attrs = [6]attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, p, BackendKey.String(backend),
		semconv.GenAIToolNameKey.String(name), semconv.GenAIToolTypeKey.String("function")}
	tl.n = 5
	if server != "" {
		tl.attrs[5] = ServerKey.String(server)
		tl.n = 6
	}
	tl.okDuration = recordOpts(semconv.GenAIOperationNameExecuteTool, p, semconv.GenAIToolNameKey.String(name))
	for i, reused := range []bool{false, true} {
		tl.okCalls[i] = addOpts(semconv.GenAIToolNameKey.String(name), OutcomeKey.String(okOutcome), ReusedKey.Bool(reused))
	}
	return t.tools.store(key, tl)
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
	t.recordSeconds(ctx, time.Since(start).Seconds(), op, backend, errType, tool)
}

// recordSeconds adds an operation's duration, in seconds, to
// gen_ai.client.operation.duration.
func (t *telemetry) recordSeconds(ctx context.Context, seconds float64, op, backend, errType, tool string) {
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
	t.duration.Record(ctx, seconds, opt...)
}

// journalOps are the ops of core.Hooks.JournalWrite; telemetry.okWrites
// holds, for each, the options of a write that succeeded.
var journalOps = [...]string{"claim", "finish", "takeover", "release", "submitted"}

func (t *telemetry) journalWrite(ctx context.Context, op string, d time.Duration, err error) {
	errType := ""
	if err != nil {
		errType = errcode.Of(err).String()
	} else {
		// Two of these a call: the options were made with the hooks.
		for i, o := range journalOps {
			if o == op {
				t.journal.Record(ctx, d.Seconds(), t.okWrites[i]...)
				return
			}
		}
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
