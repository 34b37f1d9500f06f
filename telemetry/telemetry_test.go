package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/openai"
	_ "github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/telemetry"
)

// backends are the backends the suite runs on, each on its embedded fake,
// with the gen_ai.provider.name it reports.
var backends = []struct {
	name, backend, provider string
	settings                []any
}{
	{"openai", "fake-openai", "openai", nil},
	{"openai-polling", "fake-openai", "openai", []any{&openai.Settings{Delivery: "polling"}}},
	{"foundry", "fake-foundry", "azure.ai.openai", nil},
	{"foundry-chain-streaming", "fake-foundry", "azure.ai.openai", []any{&foundry.Settings{Mode: "chain", Delivery: "streaming"}}},
	{"responses", "fake-responses", "openai", nil},
}

// secret is planted in the arguments and outputs of calls: it must appear
// in no exported attribute unless content recording is on.
const secret = "s3cr3t-planted-value"

// env is a runner on one backend, traced and measured in memory.
type env struct {
	t        *testing.T
	spans    *tracetest.InMemoryExporter
	reader   *sdkmetric.ManualReader
	tracer   trace.Tracer // the handlers'
	runner   *core.Runner
	provider string
}

func newEnv(t *testing.T, name string, script *coretest.Script, tools func(*env) []*core.Tool, o *telemetry.Options, ro core.Options) *env {
	t.Helper()
	var be = backends[slices.IndexFunc(backends, func(b struct {
		name, backend, provider string
		settings                []any
	}) bool {
		return b.name == name
	})]
	e := &env{t: t, spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(), provider: be.provider}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(e.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	e.tracer = tp.Tracer("handlers")
	opts := telemetry.Options{}
	if o != nil {
		opts = *o
	}
	opts.TracerProvider, opts.MeterProvider = tp, mp
	hooks, err := telemetry.Hooks(&opts)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tools(e)...)
	if err != nil {
		t.Fatal(err)
	}
	ro.Hooks, ro.Logger = hooks, slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := adapter.Open(t.Context(), tb, &adapter.Options{
		Settings:        adapter.Settings{Backend: be.backend},
		BackendSettings: append([]any{&coretest.FakeSettings{Script: script}}, be.settings...),
		Runner:          ro,
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return telemetry.Transport(rt, &opts) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e.runner = r
	return e
}

// handled wraps a handler in a span of its own, named after the tool.
func handled[In any](e *env, name string, f func(context.Context, In) (string, error)) func(context.Context, In) (string, error) {
	return func(ctx context.Context, in In) (string, error) {
		ctx, span := e.tracer.Start(ctx, "handler "+name)
		defer span.End()
		return f(ctx, in)
	}
}

type cityArgs struct {
	Location string `json:"location"`
	Note     string `json:"note,omitempty"`
}

func (e *env) weatherTools() []*core.Tool {
	must := func(t *core.Tool, err error) *core.Tool {
		if err != nil {
			e.t.Fatal(err)
		}
		return t
	}
	return []*core.Tool{
		must(core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", handled(e, "getUserFavoriteCity", func(context.Context, struct{}) (string, error) {
			return "Seattle, WA", nil
		}), nil)),
		must(core.NewTool("getCityNickname", "Gets a city's nickname.", handled(e, "getCityNickname", func(context.Context, cityArgs) (string, error) {
			return "The Emerald City " + secret, nil
		}), nil)),
		must(core.NewTool("getCurrentWeatherAtLocation", "Gets the weather.", handled(e, "getCurrentWeatherAtLocation", func(context.Context, cityArgs) (string, error) {
			return "70f", nil
		}), nil)),
	}
}

// weatherScript: three calls in one step, then the answer.
var weatherScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{
		{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`)},
		{Name: "getCityNickname", Arguments: json.RawMessage(`{"location":"Seattle, WA","note":"` + secret + `"}`)},
		{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Seattle, WA"}`)},
	}},
	{Text: "{{result 0}} is {{result 1}}, {{result 2}}"},
}}}}

// attrs returns a span's attributes as a map of their values' text.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// isHTTP reports whether s is a span of an HTTP request to the service.
func isHTTP(s tracetest.SpanStub) bool {
	return s.SpanKind == trace.SpanKindClient && attrs(s.Attributes)["http.request.method"] != ""
}

// tree returns the spans of the trace of root as "parent > child" lines,
// sorted, leaving out the HTTP requests, and those HTTP requests.
func tree(spans tracetest.SpanStubs, root tracetest.SpanStub) (lines []string, requests []tracetest.SpanStub) {
	names := map[trace.SpanID]string{}
	for _, s := range spans {
		names[s.SpanContext.SpanID()] = s.Name
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() || s.SpanContext.SpanID() == root.SpanContext.SpanID() {
			continue
		}
		if isHTTP(s) {
			requests = append(requests, s)
			continue
		}
		lines = append(lines, names[s.Parent.SpanID()]+" > "+s.Name)
	}
	sort.Strings(lines)
	return lines, requests
}

func byName(spans tracetest.SpanStubs, prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestWeatherTrace: the weather flow, on every backend, gives the span
// tree run → chat (start), 3 × execute_tool (each with its handler's span
// inside), chat (submit); each chat holds the HTTP requests it made; the
// attributes are exactly the documented ones (the model and the
// service's response id on chat and run spans, one conversation id on
// every span of the run, in chain mode too); the token usage metric adds
// up to what the fake reported; no argument or output text is exported.
func TestWeatherTrace(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := newEnv(t, be.name, weatherScript, (*env).weatherTools, &telemetry.Options{AgentName: "weather-bot"}, core.Options{})
			res, err := e.runner.Run(t.Context(), "What's the weather in my favorite city?", nil)
			if err != nil {
				t.Fatal(err)
			}
			spans := e.spans.GetSpans()
			runs := byName(spans, "invoke_agent")
			if len(runs) != 1 {
				t.Fatalf("%d invoke_agent spans, want 1", len(runs))
			}
			run := runs[0]
			lines, requests := tree(spans, run)
			want := []string{
				"execute_tool getCityNickname > handler getCityNickname",
				"execute_tool getCurrentWeatherAtLocation > handler getCurrentWeatherAtLocation",
				"execute_tool getUserFavoriteCity > handler getUserFavoriteCity",
				"invoke_agent weather-bot > chat",
				"invoke_agent weather-bot > chat",
				"invoke_agent weather-bot > execute_tool getCityNickname",
				"invoke_agent weather-bot > execute_tool getCurrentWeatherAtLocation",
				"invoke_agent weather-bot > execute_tool getUserFavoriteCity",
			}
			if diff := cmp.Diff(want, lines); diff != "" {
				t.Errorf("span tree (-want +got):\n%s", diff)
			}
			chats := map[trace.SpanID]int{}
			for _, c := range byName(spans, "chat") {
				chats[c.SpanContext.SpanID()] = 0
			}
			for _, r := range requests {
				if _, ok := chats[r.Parent.SpanID()]; !ok {
					t.Errorf("HTTP span %q (%s) is not inside a chat span", r.Name, attrs(r.Attributes)["url.full"])
					continue
				}
				chats[r.Parent.SpanID()]++
			}
			for id, n := range chats {
				if n == 0 {
					t.Errorf("chat span %s holds no HTTP request", id)
				}
			}

			// The conversation is the first step's thread, on every span
			// of the run, also in a chain of responses whose thread moves
			// on with each step.
			var first tracetest.SpanStub
			for _, c := range byName(spans, "chat") {
				if attrs(c.Attributes)["toolrelay.step.op"] == "start" {
					first = c
				}
			}
			conv := attrs(first.Attributes)["toolrelay.thread"]
			chain := strings.Contains(be.name, "chain") || be.name == "responses" // the responses backend chains by default
			if conv == "" || chain == (conv == res.Thread) {
				t.Errorf("the first step's thread %q, the run's %q: want them equal, but in a chain", conv, res.Thread)
			}
			wantRun := map[string]string{
				"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": be.provider, "gen_ai.agent.name": "weather-bot",
				"toolrelay.backend": e.runner.Backend().Name(), "toolrelay.resume": "false",
				"gen_ai.conversation.id": conv, "toolrelay.thread": res.Thread, "toolrelay.turn": res.Turn, "gen_ai.request.model": "gpt-4.1-mini",
				"gen_ai.usage.input_tokens": fmt.Sprint(res.Usage.InputTokens), "gen_ai.usage.output_tokens": fmt.Sprint(res.Usage.OutputTokens),
			}
			if diff := cmp.Diff(wantRun, attrs(run.Attributes)); diff != "" {
				t.Errorf("invoke_agent attributes (-want +got):\n%s", diff)
			}
			for _, c := range res.Calls {
				spans := byName(spans, "execute_tool "+c.Call.Name)
				if len(spans) != 1 {
					t.Fatalf("%d spans of %s", len(spans), c.Call.Name)
				}
				want := map[string]string{
					"gen_ai.operation.name": "execute_tool", "gen_ai.provider.name": be.provider, "toolrelay.backend": e.runner.Backend().Name(),
					"gen_ai.tool.name": c.Call.Name, "gen_ai.tool.call.id": c.Call.ID, "gen_ai.tool.type": "function",
					"gen_ai.conversation.id": conv, "toolrelay.thread": c.Call.Thread, "toolrelay.turn": c.Call.Turn, "toolrelay.step": "1",
					"toolrelay.call.outcome": "ok", "toolrelay.call.reused": "false",
				}
				if diff := cmp.Diff(want, attrs(spans[0].Attributes)); diff != "" {
					t.Errorf("execute_tool %s attributes (-want +got):\n%s", c.Call.Name, diff)
				}
				if spans[0].Status.Code == codes.Error {
					t.Errorf("execute_tool %s has an error status", c.Call.Name)
				}
			}
			var inTok, outTok int64
			for _, c := range byName(spans, "chat") {
				a := attrs(c.Attributes)
				keys := slices.Sorted(func(yield func(string) bool) {
					for k := range a {
						if !yield(k) {
							return
						}
					}
				})
				wantKeys := []string{"gen_ai.conversation.id", "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.id",
					"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
					"toolrelay.backend", "toolrelay.step", "toolrelay.step.calls", "toolrelay.step.op", "toolrelay.step.results", "toolrelay.thread", "toolrelay.turn"}
				if diff := cmp.Diff(wantKeys, keys); diff != "" {
					t.Errorf("chat attributes (-want +got):\n%s", diff)
				}
				if a["gen_ai.conversation.id"] != conv || a["gen_ai.request.model"] != "gpt-4.1-mini" || a["gen_ai.response.id"] == "" || a["gen_ai.response.id"] != a["toolrelay.turn"] {
					t.Errorf("chat: conversation %q, model %q, response %q (turn %q); want %q, gpt-4.1-mini, the turn",
						a["gen_ai.conversation.id"], a["gen_ai.request.model"], a["gen_ai.response.id"], a["toolrelay.turn"], conv)
				}
				var in, out int64
				fmt.Sscan(a["gen_ai.usage.input_tokens"], &in)
				fmt.Sscan(a["gen_ai.usage.output_tokens"], &out)
				inTok, outTok = inTok+in, outTok+out
			}
			if inTok != res.Usage.InputTokens || outTok != res.Usage.OutputTokens || res.Usage.InputTokens == 0 {
				t.Errorf("chat spans count %d/%d tokens, the run %d/%d; want equal and not zero", inTok, outTok, res.Usage.InputTokens, res.Usage.OutputTokens)
			}

			rm := e.collect()
			usage := sumInt(rm, "gen_ai.client.token.usage", "gen_ai.token.type")
			if diff := cmp.Diff(map[string]int64{"input": res.Usage.InputTokens, "output": res.Usage.OutputTokens}, usage); diff != "" {
				t.Errorf("gen_ai.client.token.usage (-want +got):\n%s", diff)
			}
			calls := sumInt(rm, "toolrelay.tool.calls", "gen_ai.tool.name")
			if diff := cmp.Diff(map[string]int64{"getCityNickname": 1, "getCurrentWeatherAtLocation": 1, "getUserFavoriteCity": 1}, calls); diff != "" {
				t.Errorf("toolrelay.tool.calls (-want +got):\n%s", diff)
			}
			ops := countHist(rm, "gen_ai.client.operation.duration", "gen_ai.operation.name")
			if diff := cmp.Diff(map[string]uint64{"chat": 2, "execute_tool": 3, "invoke_agent": 1}, ops); diff != "" {
				t.Errorf("gen_ai.client.operation.duration counts (-want +got):\n%s", diff)
			}
			writes := countHist(rm, "toolrelay.journal.write.duration", "toolrelay.journal.op")
			if writes["claim"] != 3 || writes["finish"] != 3 || writes["submitted"] != 1 {
				t.Errorf("journal writes %v, want 3 claims, 3 finishes, 1 submitted", writes)
			}
			e.checkNoSecret(rm)
		})
	}
}

func (e *env) collect() metricdata.ResourceMetrics {
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	return rm
}

// sumInt sums the values of an int64 counter or histogram by the value of
// attribute key.
func sumInt(rm metricdata.ResourceMetrics, name string, key attribute.Key) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value(key)
					out[v.Emit()] += p.Value
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value(key)
					out[v.Emit()] += p.Sum
				}
			}
		}
	}
	return out
}

// countHist counts the recordings of a float64 histogram by the value of
// attribute key.
func countHist(rm metricdata.ResourceMetrics, name string, key attribute.Key) map[string]uint64 {
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value(key)
					out[v.Emit()] += p.Count
				}
			}
		}
	}
	return out
}

// checkNoSecret fails if the planted secret is in any exported span
// (name, attribute, event, status) or metric attribute.
func (e *env) checkNoSecret(rm metricdata.ResourceMetrics) {
	e.t.Helper()
	for _, s := range e.spans.GetSpans() {
		text := fmt.Sprint(s.Name, s.Attributes, s.Events, s.Status, s.Links)
		if strings.Contains(text, secret) {
			e.t.Errorf("span %q exports the secret: %s", s.Name, text)
		}
	}
	if text := fmt.Sprintf("%+v", rm); strings.Contains(text, secret) {
		e.t.Errorf("the metrics export the secret")
	}
}

// failingFinish is a journal whose Finish fails for the calls of one
// tool, once each: the process "dies" with the call run but its result
// unsaved.
type failingFinish struct {
	*journaldriver.Memory
	mu   sync.Mutex
	tool string
	keys map[journaldriver.Key]bool // claimed calls of tool
	done map[journaldriver.Key]bool
}

var errDisk = errors.New("disk on fire")

func (j *failingFinish) Finish(ctx context.Context, key journaldriver.Key, owner string, res journaldriver.Result) error {
	j.mu.Lock()
	fail := j.keys[key] && !j.done[key]
	if fail {
		j.done[key] = true
	}
	j.mu.Unlock()
	if fail {
		return errDisk
	}
	return j.Memory.Finish(ctx, key, owner, res)
}

func (j *failingFinish) mark(key journaldriver.Key) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys[key] = true
}

// TestFailureTrace: failed, panicked and timed-out calls carry error.type
// and an error status; a call whose result could not be saved fails its
// run, and on the resume, which links to the first run, it is in doubt.
func TestFailureTrace(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{
			{Name: "fails", Arguments: json.RawMessage(`{}`)},
			{Name: "panics", Arguments: json.RawMessage(`{}`)},
			{Name: "slow", Arguments: json.RawMessage(`{}`)},
			{Name: "made_up", Arguments: json.RawMessage(`{}`), Unoffered: true}, // a tool the program does not have
		}},
		{Calls: []coretest.Call{{Name: "charge", Arguments: json.RawMessage(`{"amount":5}`)}}},
		{Text: "{{result 0}}"},
	}}}}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			j := &failingFinish{Memory: journaldriver.NewMemory(), tool: "charge", keys: map[journaldriver.Key]bool{}, done: map[journaldriver.Key]bool{}}
			const lease = 100 * time.Millisecond
			must := func(tl *core.Tool, err error) *core.Tool {
				if err != nil {
					t.Fatal(err)
				}
				return tl
			}
			var e *env
			tools := func(*env) []*core.Tool {
				return []*core.Tool{
					must(core.NewTool("fails", "", func(context.Context, struct{}) (string, error) { return "", errors.New("no " + secret) }, nil)),
					must(core.NewTool("panics", "", func(context.Context, struct{}) (string, error) { panic(secret) }, nil)),
					must(core.NewTool("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
						<-ctx.Done()
						return "", ctx.Err()
					}, &core.ToolOptions{Timeout: 10 * time.Millisecond})),
					must(core.NewTool("charge", "", func(ctx context.Context, _ chargeArgs) (string, error) {
						c, _ := core.CallFromContext(ctx)
						j.mark(journaldriver.Key{Backend: e.runner.Backend().Name(), Thread: c.Thread, Turn: c.Turn, Call: c.ID})
						return "charged", nil
					}, nil)),
				}
			}
			e = newEnv(t, be.name, script, tools, nil, core.Options{Journal: j, Lease: lease})
			first, err := e.runner.Run(t.Context(), "go", nil)
			if !errors.Is(err, errDisk) {
				t.Fatalf("Run = %v, want the journal's failure", err)
			}
			time.Sleep(lease + 20*time.Millisecond) // the claim's lease passes
			if _, err := e.runner.Resume(t.Context(), first.Thread, nil); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			spans := e.spans.GetSpans()
			errTypes := map[string][]string{}
			for _, s := range byName(spans, "execute_tool") {
				a := attrs(s.Attributes)
				if a["error.type"] != "" && s.Status.Code != codes.Error {
					t.Errorf("%s: error.type %q without an error status", s.Name, a["error.type"])
				}
				errTypes[s.Name] = append(errTypes[s.Name], a["error.type"]+"/"+a["toolrelay.call.reused"])
			}
			// The first step's results went before the failure: the resume
			// finds only the charge pending.
			want := map[string][]string{
				"execute_tool fails":   {"tool_error/false"},
				"execute_tool panics":  {"panicked/false"},
				"execute_tool slow":    {"timed_out/false"},
				"execute_tool made_up": {"unknown_tool/false"},
				"execute_tool charge":  {"Unknown/false", "in_doubt/false"},
			}
			for k := range errTypes {
				sort.Strings(errTypes[k])
				sort.Strings(want[k])
			}
			if diff := cmp.Diff(want, errTypes); diff != "" {
				t.Errorf("error.type/reused of the call spans (-want +got):\n%s", diff)
			}
			runs := byName(spans, "invoke_agent")
			if len(runs) != 2 {
				t.Fatalf("%d run spans, want 2", len(runs))
			}
			if a := attrs(runs[0].Attributes); a["error.type"] == "" || runs[0].Status.Code != codes.Error {
				t.Errorf("the failed run: attributes %v, status %v; want error.type and an error status", a, runs[0].Status)
			}
			if len(runs[1].Links) != 1 || runs[1].Links[0].SpanContext.SpanID() != runs[0].SpanContext.SpanID() {
				t.Errorf("the resume's links %+v, want one to the first run %s", runs[1].Links, runs[0].SpanContext.SpanID())
			}
			rm := e.collect()
			outcomes := sumInt(rm, "toolrelay.tool.calls", "toolrelay.call.outcome")
			if diff := cmp.Diff(map[string]int64{"error": 1, "in_doubt": 1, "panicked": 1, "timed_out": 1, "tool_error": 1, "unknown_tool": 1}, outcomes); diff != "" {
				t.Errorf("toolrelay.tool.calls by outcome (-want +got):\n%s", diff)
			}
			// A name the model made up is no metric series of its own.
			byTool := sumInt(rm, "toolrelay.tool.calls", "gen_ai.tool.name")
			if diff := cmp.Diff(map[string]int64{"fails": 1, "panics": 1, "slow": 1, "_unknown": 1, "charge": 2}, byTool); diff != "" {
				t.Errorf("toolrelay.tool.calls by tool (-want +got):\n%s", diff)
			}
			e.checkNoSecret(rm)
		})
	}
}

// TestRecordContent: with RecordContent, a call's arguments and output are
// on its span; without it (the other tests), they are nowhere.
func TestRecordContent(t *testing.T) {
	e := newEnv(t, "openai", weatherScript, (*env).weatherTools, &telemetry.Options{RecordContent: true}, core.Options{})
	if _, err := e.runner.Run(t.Context(), "weather?", nil); err != nil {
		t.Fatal(err)
	}
	s := byName(e.spans.GetSpans(), "execute_tool getCityNickname")[0]
	a := attrs(s.Attributes)
	if !strings.Contains(a["gen_ai.tool.call.arguments"], secret) || !strings.Contains(a["gen_ai.tool.call.result"], secret) {
		t.Errorf("attributes %v, want the arguments and the result recorded", a)
	}
}

type chargeArgs struct {
	Amount int `json:"amount"`
}

// TestToolServer: the execute_tool span of a tool that forwards its calls
// (an MCP server's, core.ToolOptions.Server) names where they go; the
// program's own tools have no such attribute.
func TestToolServer(t *testing.T) {
	tools := func(e *env) []*core.Tool {
		ts := e.weatherTools()
		forwarded, err := core.NewTool("getCurrentWeatherAtLocation", "Gets the weather.", func(context.Context, cityArgs) (string, error) {
			return "70f", nil
		}, &core.ToolOptions{Server: "weather-mcp"})
		if err != nil {
			t.Fatal(err)
		}
		return append(ts[:2], forwarded)
	}
	e := newEnv(t, "openai", weatherScript, tools, nil, core.Options{})
	if _, err := e.runner.Run(t.Context(), "weather?", nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"getCurrentWeatherAtLocation": "weather-mcp", "getCityNickname": ""} {
		s := byName(e.spans.GetSpans(), "execute_tool "+name)[0]
		if got := attrs(s.Attributes)[string(telemetry.ServerKey)]; got != want {
			t.Errorf("%s: %s = %q, want %q", name, telemetry.ServerKey, got, want)
		}
	}
}

// TestConversationAcrossRuns: every span of every run of a thread names
// one conversation — a run, a second one continuing the thread, a pause
// for approval and the resume after the decision — the thread's first, on
// every backend, also in a chain of responses, whose thread moves on with
// each step (there every later run named its own thread before).
func TestConversationAcrossRuns(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`)}}},
			{Text: "{{result 0}}"},
		}},
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "forecast", Arguments: json.RawMessage(`{"location":"Seattle, WA"}`)}}},
			{Text: "{{result 0}}"},
		}},
	}}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			var e *env
			tools := func(e *env) []*core.Tool {
				forecast, err := core.NewTool("forecast", "Forecasts the weather.", func(context.Context, cityArgs) (string, error) {
					return "rain", nil
				}, &core.ToolOptions{Approval: core.ApprovalAlways("forecasts cost money")})
				if err != nil {
					t.Fatal(err)
				}
				return append(e.weatherTools(), forecast)
			}
			e = newEnv(t, be.name, script, tools, nil, core.Options{Journal: journaldriver.NewMemory()})
			first, err := e.runner.Run(t.Context(), "my city?", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			second, err := e.runner.Run(t.Context(), "its forecast?", &core.RunOptions{Thread: first.Thread})
			if !errors.Is(err, core.ErrAwaitingApproval) || len(second.Pending) != 1 {
				t.Fatalf("the second Run = %v, %d pending; want a pause for the forecast", err, len(second.Pending))
			}
			if err := e.runner.Decide(t.Context(), second.Thread, second.Pending[0].Key.Call, core.Decision{Approved: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.runner.Resume(t.Context(), second.Thread, nil); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			spans := e.spans.GetSpans()
			if n := len(byName(spans, "invoke_agent")); n != 3 {
				t.Fatalf("%d run spans, want 3", n)
			}
			var conv string
			threads := map[string]bool{}
			for _, s := range spans {
				if isHTTP(s) || strings.HasPrefix(s.Name, "handler ") {
					continue
				}
				a := attrs(s.Attributes)
				if conv == "" && a["toolrelay.step.op"] == "start" {
					conv = a["toolrelay.thread"] // the first run's first step
				}
				threads[a["toolrelay.thread"]] = true
			}
			chain := strings.Contains(be.name, "chain") || be.name == "responses"
			if conv == "" || chain != (len(threads) > 1) {
				t.Fatalf("the first step's thread %q, threads %v: want one, or, in a chain, several", conv, threads)
			}
			for _, s := range spans {
				if isHTTP(s) || strings.HasPrefix(s.Name, "handler ") {
					continue
				}
				if a := attrs(s.Attributes); a["gen_ai.conversation.id"] != conv {
					t.Errorf("%s (thread %s, resume %s): gen_ai.conversation.id %q, want the thread's first, %q",
						s.Name, a["toolrelay.thread"], a["toolrelay.resume"], a["gen_ai.conversation.id"], conv)
				}
			}
		})
	}
}

// TestBudgetTrace (issue 37, item 1): with a budget, the chat spans that
// send results carry what it has left before the request, and the run's
// span what it has left at its end, its tool calls and cost, and, stopped
// on it, the outcome budget_exceeded; only the limits the budget sets
// (tool calls and cost).
func TestBudgetTrace(t *testing.T) {
	lookup := coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{}`)}}}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{lookup, lookup, lookup, {Text: "done"}}}}}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			tools := func(*env) []*core.Tool {
				tl, err := core.NewTool("lookup", "", func(context.Context, struct{}) (string, error) { return "found", nil }, nil)
				if err != nil {
					t.Fatal(err)
				}
				return []*core.Tool{tl}
			}
			const maxCost = 1000.0 // never reached: a million tokens cost 1
			e := newEnv(t, be.name, script, tools, nil, core.Options{Budget: core.Budget{MaxToolCalls: 2, MaxCost: maxCost, Prices: map[string]core.Price{"*": {Input: 1, Output: 1}}}})
			if _, err := e.runner.Run(t.Context(), "go", nil); !errors.Is(err, core.ErrBudgetExceeded) {
				t.Fatalf("Run = %v, want ErrBudgetExceeded", err)
			}
			spans := e.spans.GetSpans()
			var submits []string
			for _, s := range byName(spans, "chat") {
				if a := attrs(s.Attributes); a["toolrelay.step.op"] == "submit" {
					submits = append(submits, a["toolrelay.budget.remaining.tool_calls"]+"/"+a["toolrelay.budget.remaining.total_tokens"])
				}
			}
			if diff := cmp.Diff([]string{"1/", "0/"}, submits); diff != "" {
				t.Errorf("remaining tool calls / total tokens on the submit spans (-want +got):\n%s", diff)
			}
			runs := byName(spans, "invoke_agent")
			if len(runs) != 1 {
				t.Fatalf("%d run spans, want 1", len(runs))
			}
			a := attrs(runs[0].Attributes)
			got := map[string]string{}
			for _, k := range []string{"toolrelay.run.outcome", "toolrelay.budget.remaining.tool_calls", "toolrelay.budget.remaining.input_tokens", "toolrelay.run.tool_calls", "error.type"} {
				got[k] = a[k]
			}
			want := map[string]string{"toolrelay.run.outcome": "budget_exceeded", "toolrelay.budget.remaining.tool_calls": "0",
				"toolrelay.budget.remaining.input_tokens": "", "toolrelay.run.tool_calls": "2", "error.type": "ResourceExhausted"}
			if diff := cmp.Diff(want, got); diff != "" || runs[0].Status.Code != codes.Error {
				t.Errorf("the run span's attributes (-want +got):\n%s; status %v", diff, runs[0].Status)
			}
			// The cost limit is set: what is left of it is the limit less
			// the run's cost.
			rem, err1 := strconv.ParseFloat(a["toolrelay.budget.remaining.cost"], 64)
			cost, err2 := strconv.ParseFloat(a["toolrelay.run.cost"], 64)
			if err1 != nil || err2 != nil || math.Abs(rem+cost-maxCost) > 1e-9 {
				t.Errorf("the run span's remaining cost %q and cost %q, want them to add up to %v", a["toolrelay.budget.remaining.cost"], a["toolrelay.run.cost"], maxCost)
			}
		})
	}
}
