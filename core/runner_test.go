package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newRunner returns a runner over an in-memory backend playing script.
func newRunner(t *testing.T, script *coretest.Script, tools []*core.Tool, opts *core.Options) (*core.Runner, *coretest.Backend) {
	t.Helper()
	if err := script.Check(); err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(tools...)
	if err != nil {
		t.Fatal(err)
	}
	b := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb})
	if opts == nil {
		opts = &core.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	r := core.NewRunner(b, tb, opts)
	t.Cleanup(func() { r.Close() })
	return r, b
}

// results returns the results the backend received, in order.
func results(rec []coretest.Received) []coretest.Delivered {
	var out []coretest.Delivered
	for _, r := range rec {
		out = append(out, r.Results...)
	}
	return out
}

type cityArgs struct {
	Location string `json:"location" jsonschema:"The city and state, e.g. San Francisco, CA"`
}

// TestBadInput checks that every kind of bad input becomes a failed result
// the model can act on, and that the run goes on to the final answer.
func TestBadInput(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	strictWeather, err := core.NewTool("strict_weather", "", weather, &core.ToolOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	tools := []*core.Tool{
		mustTool(t)(core.NewTool("getCurrentWeatherAtLocation", "", weather, weatherOpts)),
		strictWeather,
		mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil)),
		mustTool(t)(core.NewTool("leaky", "", func(context.Context, struct{}) (string, error) {
			return "", errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user admin")
		}, nil)),
		mustTool(t)(core.NewTool("panicky", "", func(context.Context, struct{}) (string, error) { panic("boom: secret state") }, nil)),
		mustTool(t)(core.NewTool("slow", "", func(ctx context.Context, _ struct{}) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, &core.ToolOptions{Timeout: time.Millisecond})),
		mustTool(t)(core.NewTool("stuck", "", func(ctx context.Context, _ struct{}) (string, error) {
			time.Sleep(50 * time.Millisecond) // ignores its context
			return "late", nil
		}, &core.ToolOptions{Timeout: time.Millisecond})),
	}
	tests := []struct {
		name    string
		call    coretest.Call
		want    coretest.Delivered
		outcome core.Outcome
	}{
		{"unknown tool", coretest.Call{Name: "getWeather", Arguments: json.RawMessage(`{}`), Unoffered: true},
			coretest.Delivered{Failed: true, Error: `unknown tool "getWeather"; available tools: getCurrentWeatherAtLocation, strict_weather, getUserFavoriteCity, leaky, panicky, slow, stuck`}, core.UnknownTool},
		{"invalid JSON", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`"{"`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "getCurrentWeatherAtLocation": not valid JSON: unexpected EOF`}, core.InvalidArguments},
		{"arguments not an object", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`"[1,2]"`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "getCurrentWeatherAtLocation": arguments must be a JSON object, not an array`}, core.InvalidArguments},
		{"arguments as a JSON string of an object", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Seattle, WA","unit":"c"}`), AsString: true},
			coretest.Delivered{Output: "21c"}, core.OK},
		{"default applied", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Seattle, WA"}`)},
			coretest.Delivered{Output: "70f"}, core.OK},
		{"missing required", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"unit":"c"}`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "getCurrentWeatherAtLocation": required: missing properties: ["location"]`}, core.InvalidArguments},
		{"wrong type", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`"{\"location\": 98101}"`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "getCurrentWeatherAtLocation": location: type: 98101 has type "integer", want "string"`}, core.InvalidArguments},
		{"not in enum", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Seattle, WA","unit":"k"}`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "getCurrentWeatherAtLocation": unit: enum: k does not equal any of: [c f]`}, core.InvalidArguments},
		{"extra property in strict", coretest.Call{Name: "strict_weather", Arguments: json.RawMessage(`{"location":"Seattle, WA","unit":null,"when":"now"}`)},
			coretest.Delivered{Failed: true, Error: `invalid arguments for tool "strict_weather": unexpected additional properties ["when"]`}, core.InvalidArguments},
		{"strict nullable optional", coretest.Call{Name: "strict_weather", Arguments: json.RawMessage(`{"location":"Seattle, WA","unit":null}`)},
			coretest.Delivered{Output: "70f"}, core.OK},
		{"empty arguments for a function without parameters", coretest.Call{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`""`)},
			coretest.Delivered{Output: "Seattle, WA"}, core.OK},
		{"model error text is shown", coretest.Call{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Paris"}`)},
			coretest.Delivered{Failed: true, Error: `no weather for "Paris"`}, core.ToolError},
		{"internal error text is hidden", coretest.Call{Name: "leaky", Arguments: json.RawMessage(`{}`)},
			coretest.Delivered{Failed: true, Error: `tool "leaky" failed`}, core.ToolError},
		{"panic recovered", coretest.Call{Name: "panicky", Arguments: json.RawMessage(`{}`)},
			coretest.Delivered{Failed: true, Error: `tool "panicky" failed`}, core.Panicked},
		{"timeout", coretest.Call{Name: "slow", Arguments: json.RawMessage(`{}`)},
			coretest.Delivered{Failed: true, Error: `tool "slow" timed out after 1ms`}, core.TimedOut},
		{"timeout of a handler ignoring its context", coretest.Call{Name: "stuck", Arguments: json.RawMessage(`{}`)},
			coretest.Delivered{Failed: true, Error: `tool "stuck" timed out after 1ms`}, core.TimedOut},
	}
	for _, tt := range tests {
		for _, rc := range runContexts {
			t.Run(tt.name+"/"+rc.name, func(t *testing.T) {
				script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
					{Calls: []coretest.Call{tt.call}},
					{Text: `the model read: {{result 0}}`},
				}}}}
				var outcomes []core.Outcome
				r, b := newRunner(t, script, tools, &core.Options{Logger: logger, OnEvent: func(e core.Event) {
					if e.Kind == core.EventCallFinished {
						outcomes = append(outcomes, e.Outcome)
					}
				}})
				res, err := r.Run(rc.ctx(t), "go", nil)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				want := tt.want
				want.CallID, want.Name = "call_1", tt.call.Name
				if diff := cmp.Diff([]coretest.Delivered{want}, results(b.Received())); diff != "" {
					t.Errorf("delivered results (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]core.Outcome{tt.outcome}, outcomes); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				if got, wantText := res.Text, "the model read: "+want.Text(); got != wantText {
					t.Errorf("final text = %q, want %q", got, wantText)
				}
			})
		}
	}
	t.Run("panic stack goes to the logger only", func(t *testing.T) {
		if !strings.Contains(logs.String(), "panic: boom: secret state") || !strings.Contains(logs.String(), "runtime/debug.Stack") {
			t.Errorf("logs lack the panic and its stack:\n%s", logs.String())
		}
	})
}

// runContexts are the two kinds of context a run may get: one that can be
// canceled (the runner runs every call in a goroutine of its own, so that
// canceling ends the run at once) and one that cannot (a lone call runs in
// the run's goroutine).
var runContexts = []struct {
	name string
	ctx  func(t *testing.T) context.Context
}{
	{"cancelable", func(t *testing.T) context.Context { return t.Context() }},
	{"background", func(*testing.T) context.Context { return context.Background() }},
}

// TestParallelStep checks that the calls of one step run concurrently under
// the bound, and that their results go back together, in call order.
func TestParallelStep(t *testing.T) {
	tests := []struct {
		concurrency int
		want        time.Duration
	}{
		{0, 50 * time.Millisecond}, // the default bound
		{4, 100 * time.Millisecond},
		{1, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("concurrency=%d", tt.concurrency), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var running, peak atomic.Int32
				sleeper := mustTool(t)(core.NewTool("sleep", "", func(ctx context.Context, in struct {
					N int `json:"n"`
				}) (string, error) {
					peak.Store(max(peak.Load(), running.Add(1)))
					defer running.Add(-1)
					time.Sleep(50 * time.Millisecond)
					return "slept " + strconv.Itoa(in.N), nil
				}, nil))
				var calls []coretest.Call
				var want []coretest.Delivered
				for i := range 8 {
					calls = append(calls, coretest.Call{Name: "sleep", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
					want = append(want, coretest.Delivered{CallID: "call_" + strconv.Itoa(i+1), Name: "sleep", Output: "slept " + strconv.Itoa(i)})
				}
				script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Calls: calls}, {Text: "done"}}}}}
				r, b := newRunner(t, script, []*core.Tool{sleeper}, &core.Options{Concurrency: tt.concurrency})
				start := time.Now()
				if _, err := r.Run(t.Context(), "go", nil); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tt.want {
					t.Errorf("step took %v, want %v", got, tt.want)
				}
				rec := b.Received()
				if len(rec) != 2 {
					t.Fatalf("backend received %d requests, want the input and one submission", len(rec))
				}
				if diff := cmp.Diff(want, rec[1].Results); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
				wantPeak := int32(min(8, max(tt.concurrency, 1)))
				if tt.concurrency == 0 {
					wantPeak = 8
				}
				if peak.Load() != wantPeak {
					t.Errorf("peak concurrency %d, want %d", peak.Load(), wantPeak)
				}
			})
		})
	}
}

// TestCancelMidStep checks that canceling the context while handlers run
// stops the run promptly with a wrapped context.Canceled and submits
// nothing; the turn is left waiting (Runner.Cancel abandons it); the call
// whose handler gave up is left to run again, the one whose handler
// ignores its context (it may still take effect) stays started.
func TestCancelMidStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{}, 2)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		blocker := mustTool(t)(core.NewTool("block", "", func(ctx context.Context, _ struct{}) (string, error) {
			started <- struct{}{}
			<-release // ignores cancellation entirely
			return "", nil
		}, nil))
		polite := mustTool(t)(core.NewTool("polite", "", func(ctx context.Context, _ struct{}) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}, nil))
		script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "block"}, {Name: "polite"}}},
			{Text: "never"},
		}}}}
		j := journaldriver.NewMemory()
		r, b := newRunner(t, script, []*core.Tool{blocker, polite}, &core.Options{Journal: j})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-started
			<-started
			cancel()
		}()
		res, err := r.Run(ctx, "go", nil)
		if !errors.Is(err, context.Canceled) || errcode.Of(err) != errcode.Canceled || !errors.Is(err, errcode.Canceled) {
			t.Fatalf("Run error = %v (code %v), want a wrapped context.Canceled", err, errcode.Of(err))
		}
		if res == nil || res.Thread != "thread_1" {
			t.Errorf("Result = %+v, want the thread to resume", res)
		}
		synctest.Wait() // the handler that gave up has released its call
		if diff := cmp.Diff([]string{"input"}, kindsOf(b.Received())); diff != "" {
			t.Errorf("backend received (-want +got):\n%s", diff)
		}
		for call, want := range map[string]journaldriver.State{"call_1": journaldriver.Started, "call_2": 0} {
			e, _, _ := j.Get(t.Context(), journaldriver.Key{Backend: "coretest", Thread: "thread_1", Turn: "turn_1", Call: call})
			if e.State != want {
				t.Errorf("journal entry of %s: %v, want %v", call, e.State, want)
			}
		}
		if err := r.Cancel(t.Context(), res.Thread); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"input", "cancel"}, kindsOf(b.Received())); diff != "" {
			t.Errorf("after Runner.Cancel, backend received (-want +got):\n%s", diff)
		}
	})
}

// TestCancelSingleCall checks that a lone handler that ignores its context
// does not hold the run once the context is canceled.
func TestCancelSingleCall(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stubborn := mustTool(t)(core.NewTool("stubborn", "", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-release
		return "", nil
	}, nil))
	r, _ := newRunner(t, coretest.Simple("stubborn", `{}`, "never"), []*core.Tool{stubborn}, &core.Options{Concurrency: 1})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	if _, err := r.Run(ctx, "go", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
}

// TestMaxSteps checks that a model that never stops ends the run with a
// typed error, and that the waiting turn is canceled rather than parked.
func TestMaxSteps(t *testing.T) {
	var steps []coretest.Step
	for range 5 {
		steps = append(steps, coretest.Step{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}})
	}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: append(steps, coretest.Step{Text: "done"})}}}
	city := mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil))
	r, b := newRunner(t, script, []*core.Tool{city}, &core.Options{MaxSteps: 3})
	_, err := r.Run(t.Context(), "go", nil)
	if !errors.Is(err, core.ErrMaxSteps) || !errors.Is(err, errcode.ResourceExhausted) {
		t.Fatalf("Run error = %v, want ErrMaxSteps with code ResourceExhausted", err)
	}
	rec := b.Received()
	if got := rec[len(rec)-1].Kind; got != "cancel" {
		t.Errorf("last thing the backend received is %q, want cancel", got)
	}
	if got := len(results(rec)); got != 3 {
		t.Errorf("%d results submitted, want 3", got)
	}
	// A run's own limit overrides the runner's.
	r2, _ := newRunner(t, script, []*core.Tool{city}, &core.Options{MaxSteps: 3})
	res, err := r2.Run(t.Context(), "go", &core.RunOptions{MaxSteps: 5})
	if err != nil || res.Text != "done" || res.Steps != 5 {
		t.Errorf("Run with MaxSteps 5 = %+v, %v; want done after 5 steps", res, err)
	}
}

// TestRepeatedCallID checks that a step whose calls repeat a call id is
// refused before anything runs or is sent, and that the turn the service
// parked on it is canceled.
func TestRepeatedCallID(t *testing.T) {
	var ran atomic.Int32
	city := mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) {
		ran.Add(1)
		return "Seattle, WA", nil
	}, nil))
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "getUserFavoriteCity", ID: "call_x"}, {Name: "getUserFavoriteCity", ID: "call_x"}}},
		{Text: "done"},
	}}}}
	r, b := newRunner(t, script, []*core.Tool{city}, nil)
	res, err := r.Run(t.Context(), "go", nil)
	if errcode.Of(err) != errcode.Internal || !strings.Contains(err.Error(), `repeats call id "call_x"`) {
		t.Fatalf("Run error = %v, want Internal naming the repeated id", err)
	}
	if ran.Load() != 0 || len(results(b.Received())) != 0 {
		t.Errorf("ran %d handlers and sent %d results, want none", ran.Load(), len(results(b.Received())))
	}
	want := []coretest.Received{{Kind: "input", Thread: res.Thread, Input: "go"}, {Kind: "cancel", Thread: res.Thread}}
	if diff := cmp.Diff(want, b.Received()); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

// TestUnanswerableStepCancelsTurn checks that a step the runner cannot
// answer ends the run with Internal, runs nothing, and cancels the turn the
// service parked on it, on the thread the run knows.
func TestUnanswerableStepCancelsTurn(t *testing.T) {
	call := func(id string) core.Call {
		return core.Call{Thread: "thread_1", Turn: "turn_1", ID: id, Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`)}
	}
	step := func(calls ...core.Call) *driver.Step {
		return &driver.Step{Thread: "thread_1", Turn: "turn_1", Calls: calls}
	}
	tests := []struct {
		name    string
		steps   []*driver.Step
		thread  string // RunOptions.Thread
		msg     string
		ran     int32
		submits int
	}{
		{"repeated call id", []*driver.Step{step(call("call_1"), call("call_1"))}, "", `repeats call id "call_1"`, 0, 0},
		{"call without id", []*driver.Step{step(call("call_1"), call(""))}, "", `call to "getUserFavoriteCity" has no call id`, 0, 0},
		{"no step after results", []*driver.Step{step(call("call_1")), nil}, "", "the backend returned no step", 1, 1},
		{"no first step on a known thread", []*driver.Step{nil}, "thread_1", "the backend returned no step", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			tb, err := core.NewToolbox(mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) {
				ran.Add(1)
				return "Seattle, WA", nil
			}, nil)))
			if err != nil {
				t.Fatal(err)
			}
			b := &canned{steps: tt.steps}
			r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
			res, err := r.Run(t.Context(), "go", &core.RunOptions{Thread: tt.thread})
			if errcode.Of(err) != errcode.Internal || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Run error = %v, want Internal saying %q", err, tt.msg)
			}
			if res == nil || res.Thread != "thread_1" {
				t.Errorf("Result = %+v, want the thread, to resume it", res)
			}
			submits, cancels := b.received()
			if ran.Load() != tt.ran || len(submits) != tt.submits {
				t.Errorf("ran %d handlers and made %d submissions, want %d and %d", ran.Load(), len(submits), tt.ran, tt.submits)
			}
			if diff := cmp.Diff([]string{"thread_1"}, cancels); diff != "" {
				t.Errorf("canceled turns (-want +got):\n%s", diff)
			}
		})
	}
}

// apiError stands for an SDK's error type.
type apiError struct{ status int }

func (e *apiError) Error() string { return "API error " + strconv.Itoa(e.status) }

// TestBackendError checks that a backend's error reaches the caller wrapped
// in a *core.Error with the backend's code, the original reachable by
// errors.As.
func TestBackendError(t *testing.T) {
	tests := []struct {
		op       string
		err      error
		wantCode errcode.Code
	}{
		{"start", &apiError{503}, errcode.Unknown},
		{"submit", &apiError{500}, errcode.Unknown},
		{"submit", &driver.TurnError{Backend: "fake", Status: "failed", Code: "server_error", Message: "the model crashed"}, errcode.Internal},
		{"start", fmt.Errorf("while starting: %w", coretest.ErrUnknownThread), errcode.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.op+"/"+tt.err.Error(), func(t *testing.T) {
			tb, _ := core.NewToolbox(mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) { return "x", nil }, nil)))
			b := coretest.NewBackend(coretest.Simple("getUserFavoriteCity", `{}`, "done"), &coretest.BackendOptions{
				Fault: func(op string, n int) error {
					if op == tt.op {
						return tt.err
					}
					return nil
				},
			})
			r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
			_, err := r.Run(t.Context(), "go", nil)
			var ce *errcode.Error
			if !errors.As(err, &ce) || ce.Code != tt.wantCode || errcode.Of(err) != tt.wantCode {
				t.Fatalf("Run error = %#v, want *core.Error with code %v", err, tt.wantCode)
			}
			if !strings.HasPrefix(ce.Op, "coretest: "+tt.op) {
				t.Errorf("Op = %q, want it to name the operation", ce.Op)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("errors.Is(err, original) = false for %v", err)
			}
			var ae *apiError
			if _, ok := tt.err.(*apiError); ok && !errors.As(err, &ae) {
				t.Errorf("errors.As cannot reach the *apiError in %v", err)
			}
		})
	}
}

// TestEvents checks the events of a run, in order, and that the service's
// step can be continued on the same thread.
func TestEvents(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
			{Text: "Your favorite city is {{output \"getUserFavoriteCity\"}}."},
		}},
		{Expect: "and its nickname?", Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: json.RawMessage(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
			{Text: "It is {{output \"getCityNickname\"}}."},
		}},
	}}
	tools := []*core.Tool{
		mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil)),
		mustTool(t)(core.NewTool("getCityNickname", "", func(_ context.Context, in cityArgs) (string, error) {
			if in.Location != "Seattle, WA" {
				return "", errors.New("unknown city")
			}
			return "The Emerald City", nil
		}, nil)),
	}
	type ev struct {
		Kind    string
		Step    int
		Call    string
		Outcome string
	}
	var got []ev
	r, b := newRunner(t, script, tools, &core.Options{OnEvent: func(e core.Event) {
		x := ev{Kind: e.Kind.String(), Step: e.Step}
		if e.Call != nil {
			x.Call = e.Call.Name
		}
		if e.Kind == core.EventCallFinished {
			x.Outcome = e.Outcome.String()
		}
		got = append(got, x)
	}})
	res, err := r.Run(t.Context(), "What is my favorite city?", nil)
	if err != nil || res.Text != "Your favorite city is Seattle, WA." {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	res2, err := r.Run(t.Context(), "and its nickname?", &core.RunOptions{Thread: res.Thread})
	if err != nil || res2.Text != "It is The Emerald City." || res2.Thread != res.Thread {
		t.Fatalf("second Run = %+v, %v", res2, err)
	}
	want := []ev{
		{"step_started", 1, "", ""}, {"call_started", 1, "getUserFavoriteCity", ""}, {"call_finished", 1, "getUserFavoriteCity", "ok"},
		{"results_submitted", 1, "", ""}, {"run_finished", 1, "", ""},
		{"step_started", 1, "", ""}, {"call_started", 1, "getCityNickname", ""}, {"call_finished", 1, "getCityNickname", "ok"},
		{"results_submitted", 1, "", ""}, {"run_finished", 1, "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The second run sent only its new input and its own results.
	wantRec := []coretest.Received{
		{Kind: "input", Thread: "thread_1", Input: "What is my favorite city?"},
		{Kind: "results", Thread: "thread_1", Results: []coretest.Delivered{{CallID: "call_1", Name: "getUserFavoriteCity", Output: "Seattle, WA"}}},
		{Kind: "input", Thread: "thread_1", Input: "and its nickname?"},
		{Kind: "results", Thread: "thread_1", Results: []coretest.Delivered{{CallID: "call_2", Name: "getCityNickname", Output: "The Emerald City"}}},
	}
	if diff := cmp.Diff(wantRec, b.Received()); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
}

// TestOutputs checks how handler results are encoded.
func TestOutputs(t *testing.T) {
	type customer struct {
		Name string `json:"name"`
		Plan string `json:"plan"`
	}
	tests := []struct {
		name string
		fn   func(context.Context, struct{}) (any, error)
		want string
	}{
		{"string as is", func(context.Context, struct{}) (any, error) { return `a "quoted" <string>`, nil }, `a "quoted" <string>`},
		{"struct as JSON", func(context.Context, struct{}) (any, error) {
			return map[string]any{"found": true, "customer": customer{"Example Customer", "pro"}}, nil
		}, `{"customer":{"name":"Example Customer","plan":"pro"},"found":true}`},
		{"nil", func(context.Context, struct{}) (any, error) { return nil, nil }, "null"},
		{"nil pointer", func(context.Context, struct{}) (any, error) { return (*customer)(nil), nil }, "null"},
		{"text content", func(context.Context, struct{}) (any, error) {
			return core.Content{core.TextPart("line 1"), core.TextPart("line 2")}, nil
		}, "line 1\nline 2"},
		{"mixed content", func(context.Context, struct{}) (any, error) {
			return core.Content{core.TextPart("see"), core.ImagePart("https://example.com/a.png")}, nil
		}, `[{"type":"input_text","text":"see"},{"type":"input_image","image_url":"https://example.com/a.png"}]`},
		{"raw JSON compacted", func(context.Context, struct{}) (any, error) { return json.RawMessage(`{ "a" : 1 }`), nil }, `{"a":1}`},
		{"non-ASCII", func(context.Context, struct{}) (any, error) {
			return map[string]string{"city": "São Paulo", "note": "北京"}, nil
		}, `{"city":"São Paulo","note":"北京"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mustTool(t)(core.NewTool("out", "", tt.fn, nil))
			r, b := newRunner(t, coretest.Simple("out", `{}`, "ok"), []*core.Tool{tool}, nil)
			if _, err := r.Run(t.Context(), "go", nil); err != nil {
				t.Fatal(err)
			}
			if got := results(b.Received())[0].Output; got != tt.want {
				t.Errorf("output = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCallFromContext checks that a handler can read the call it runs for.
func TestCallFromContext(t *testing.T) {
	var got core.Call
	tool := mustTool(t)(core.NewTool("who", "", func(ctx context.Context, _ struct{}) (string, error) {
		got, _ = core.CallFromContext(ctx)
		return "", nil
	}, nil))
	r, _ := newRunner(t, coretest.Simple("who", `{}`, "ok"), []*core.Tool{tool}, nil)
	if _, err := r.Run(t.Context(), "go", nil); err != nil {
		t.Fatal(err)
	}
	want := core.Call{Thread: "thread_1", Turn: "turn_1", ID: "call_1", Name: "who", Arguments: json.RawMessage(`{}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("call (-want +got):\n%s", diff)
	}
	if _, ok := core.CallFromContext(t.Context()); ok {
		t.Error("CallFromContext found a call in a plain context")
	}
}

// startFails is a backend whose Start fails after creating a thread.
type startFails struct{ *coretest.Backend }

func (startFails) Start(context.Context, *driver.StartRequest) (*driver.Step, error) {
	return &driver.Step{Thread: "thread_9"}, &apiError{500}
}

// TestStartFailureKeepsThread checks that a Start that fails after making
// a thread still gives the caller the thread, to resume it.
func TestStartFailureKeepsThread(t *testing.T) {
	r := core.NewRunner(startFails{coretest.NewBackend(coretest.Answer("x"), nil)}, nil, &core.Options{Logger: quiet})
	res, err := r.Run(t.Context(), "go", nil)
	var ae *apiError
	if !errors.As(err, &ae) || res == nil || res.Thread != "thread_9" {
		t.Errorf("Run = %+v, %v; want the thread and the error", res, err)
	}
}

// TestArgumentDefaults checks that a field's Default is applied to the
// arguments before the handler decodes them: a call that leaves the field
// out gets the default, one that sets it gets its own value.
func TestArgumentDefaults(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{`{"location":"Seattle, WA"}`, "f"},
		{`{"location":"Seattle, WA","unit":"c"}`, "c"},
	} {
		t.Run(tt.args, func(t *testing.T) {
			tool := mustTool(t)(core.NewTool("unit", "", func(_ context.Context, in weatherArgs) (string, error) {
				return in.Unit, nil
			}, weatherOpts))
			r, b := newRunner(t, coretest.Simple("unit", tt.args, "ok"), []*core.Tool{tool}, nil)
			if _, err := r.Run(t.Context(), "go", nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, results(b.Received())[0].Output); diff != "" {
				t.Errorf("unit the handler got (-want +got):\n%s", diff)
			}
		})
	}
}
