package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// streamRunner returns a runner over an in-memory backend that streams its
// answers in pieces of deltaSize runes.
func streamRunner(t *testing.T, script *coretest.Script, deltaSize int, tools ...*core.Tool) (*core.Runner, *coretest.Backend) {
	t.Helper()
	tb, err := core.NewToolbox(tools...)
	if err != nil {
		t.Fatal(err)
	}
	b := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb, DeltaSize: deltaSize})
	r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
	t.Cleanup(func() { r.Close() })
	return r, b
}

// collect ranges over st and returns its events as short strings: the
// kind, and what tells events of that kind apart.
func collect(t *testing.T, st *core.Stream) []string {
	t.Helper()
	var got []string
	for ev, err := range st.Events() {
		if (err != nil) != (ev.Kind == core.EventRunFinished && ev.Err != nil) || (err != nil && err != ev.Err) {
			t.Errorf("event %v: error %v, want the event's own (%v) on run_finished only", ev.Kind, err, ev.Err)
		}
		got = append(got, describe(ev))
	}
	return got
}

func describe(ev core.Event) string {
	s := ev.Kind.String()
	switch ev.Kind {
	case core.EventTextDelta, core.EventTextDone, core.EventReasoningDelta:
		s += " " + ev.Text
	case core.EventToolCall, core.EventCallStarted:
		s += " " + ev.Call.Name
	case core.EventCallFinished, core.EventCallReused:
		s += " " + ev.Call.Name + " " + ev.Outcome.String()
	case core.EventStepStarted, core.EventResultsSubmitted:
		s += fmt.Sprintf(" %d", ev.Calls)
	case core.EventRunFinished:
		if ev.Err != nil {
			s += " " + errcode.Of(ev.Err).String()
		}
	}
	return s
}

// TestStreamEvents checks the events of a streamed run of the weather bot,
// in order, and that the answer's pieces make its text.
func TestStreamEvents(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location":"{{output \"getUserFavoriteCity\"}}"}`)}}},
		{Text: "Sunny in {{output \"getUserFavoriteCity\"}}."},
	}}}}
	r, _ := streamRunner(t, script, 4,
		mustTool(t)(core.NewTool("getUserFavoriteCity", "", func(context.Context, struct{}) (string, error) { return "Seattle, WA", nil }, nil)),
		mustTool(t)(core.NewTool("getCurrentWeatherAtLocation", "", weather, weatherOpts)))
	st := r.Stream(t.Context(), "weather?", nil)
	got := collect(t, st)
	want := []string{
		"tool_call getUserFavoriteCity", "step_started 1", "call_started getUserFavoriteCity", "call_finished getUserFavoriteCity ok", "results_submitted 1",
		"tool_call getCurrentWeatherAtLocation", "step_started 1", "call_started getCurrentWeatherAtLocation", "call_finished getCurrentWeatherAtLocation ok", "results_submitted 1",
		"text_delta Sunn", "text_delta y in", "text_delta  Sea", "text_delta ttle", "text_delta , WA", "text_delta .", "text_done Sunny in Seattle, WA.",
		"run_finished",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	res, err := st.Result()
	if err != nil || res.Text != "Sunny in Seattle, WA." || res.Steps != 2 {
		t.Errorf("Result() = %+v, %v; want the answer after 2 steps", res, err)
	}
	if _, err := collectErr(st); err == nil {
		t.Errorf("a second range: %v, want an error", err)
	}
}

// collectErr ranges over st and returns the number of events and the last
// error.
func collectErr(st *core.Stream) (n int, err error) {
	for _, e := range st.Events() {
		n++
		if e != nil {
			err = e
		}
	}
	return n, err
}

// TestStreamParallelCalls checks that the events of calls run in their own
// goroutines reach the reader, each call started before it finished.
func TestStreamParallelCalls(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "w", Arguments: []byte(`{"location":"A"}`)}, {Name: "w", Arguments: []byte(`{"location":"B"}`)}, {Name: "w", Arguments: []byte(`{"location":"C"}`)}}},
		{Text: "done"},
	}}}}
	for _, conc := range []int{1, 2, 16} {
		t.Run(fmt.Sprint(conc), func(t *testing.T) {
			tb, _ := core.NewToolbox(mustTool(t)(core.NewTool("w", "", weather, weatherOpts)))
			b := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tb})
			r := core.NewRunner(b, tb, &core.Options{Logger: quiet, Concurrency: conc})
			defer r.Close()
			state := map[string]string{}
			for ev, err := range r.Stream(t.Context(), "go", nil).Events() {
				if err != nil {
					t.Fatal(err)
				}
				if ev.Call == nil || ev.Kind == core.EventToolCall {
					continue
				}
				id := ev.Call.ID
				switch {
				case ev.Kind == core.EventCallStarted && state[id] == "":
					state[id] = "started"
				case ev.Kind == core.EventCallFinished && state[id] == "started":
					state[id] = "finished"
				default:
					t.Errorf("%v for call %s in state %q", ev.Kind, id, state[id])
				}
			}
			if len(state) != 3 {
				t.Errorf("calls seen: %v, want 3 finished", state)
			}
		})
	}
}

// gappy is a backend whose streams drop: it sends the first piece of an
// answer, then (as after a reconnect) the whole text, twice.
type gappy struct{ *coretest.Backend }

func (g gappy) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	step, err := g.Backend.Start(driver.WithObserver(ctx, nil), req)
	if err != nil {
		return step, err
	}
	o := driver.ObserverFrom(ctx)
	for _, d := range []driver.Delta{
		{Kind: driver.ReasoningDelta, Item: "r", Text: "thinking"},
		{Kind: driver.TextDelta, Item: "m1", Text: "Hel"},
		{Kind: driver.TextDone, Item: "m1", Text: "Hello, world."},
		{Kind: driver.TextDelta, Item: "m1", Text: "lo"}, // late: m1 is done
		{Kind: driver.TextDone, Item: "m1", Text: "Hello, world."},
		{Kind: driver.TextDone, Item: "m2", Text: "Bye."}, // no pieces at all
	} {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	return step, nil
}

// TestStreamCompletesText checks that each message arrives once and whole
// when its pieces stop short (a stream that dropped) or repeat.
func TestStreamCompletesText(t *testing.T) {
	b := gappy{coretest.NewBackend(coretest.Answer("Hello, world.\nBye."), nil)}
	r := core.NewRunner(b, nil, &core.Options{Logger: quiet})
	defer r.Close()
	got := collect(t, r.Stream(t.Context(), "hi", nil))
	want := []string{"reasoning_delta thinking", "text_delta Hel", "text_delta lo, world.", "text_done Hello, world.", "text_delta Bye.", "text_done Bye.", "run_finished"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// silent hides the observer from its backend, as a backend that does not
// stream would.
type silent struct{ driver.Backend }

func (s silent) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return s.Backend.Start(driver.WithObserver(ctx, nil), req)
}

// TestStreamWithoutDeltas checks that a backend that streams nothing still
// gives the answer as one piece.
func TestStreamWithoutDeltas(t *testing.T) {
	r := core.NewRunner(silent{coretest.NewBackend(coretest.Answer("All good."), nil)}, nil, &core.Options{Logger: quiet})
	defer r.Close()
	got := collect(t, r.Stream(t.Context(), "hi", nil))
	want := []string{"text_delta All good.", "text_done All good.", "run_finished"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestStreamBreak checks that a reader that stops ends the run as a
// cancellation would: the running handlers are interrupted, the turn is
// left waiting (not canceled), nothing is submitted, no goroutine is
// left, and a resume finishes the turn.
func TestStreamBreak(t *testing.T) {
	cases := []struct {
		name   string
		script *coretest.Script
		at     core.EventKind
	}{
		{"AtTextDelta", coretest.Answer("one two three four"), core.EventTextDelta},
		{"AtToolCall", coretest.Simple("block", `{}`, "done"), core.EventToolCall},
		{"AtCallStarted", &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "block"}, {Name: "block"}}}, {Text: "done"}}}}}, core.EventCallStarted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			var resuming atomic.Bool
			block := mustTool(t)(core.NewTool("block", "", func(ctx context.Context, _ struct{}) (string, error) {
				if !resuming.Load() {
					<-ctx.Done() // the streamed run's block until the reader stops
					return "", ctx.Err()
				}
				return "ok", nil
			}, nil))
			r, b := streamRunner(t, tc.script, 3, block)
			st := r.Stream(t.Context(), "go", nil)
			seen := 0
			for ev := range st.Events() {
				seen++
				if ev.Kind == tc.at {
					break
				}
			}
			res, err := st.Result()
			if !errors.Is(err, core.ErrStreamStopped) || !errors.Is(err, context.Canceled) || errcode.Of(err) != errcode.Canceled {
				t.Errorf("Result error = %v, want ErrStreamStopped (Canceled)", err)
			}
			if res == nil || res.Thread == "" {
				t.Errorf("Result = %+v, want the thread", res)
			}
			for _, rec := range b.Received() {
				if rec.Kind == "results" {
					t.Errorf("results were submitted after the reader stopped: %+v", rec)
				}
			}
			if k := kindsOf(b.Received()); slices.Contains(k, "cancel") {
				t.Errorf("received %v, want the turn left waiting, for a resume", k)
			}
			want := "done"
			if tc.at == core.EventTextDelta {
				want = "one two three four"
			}
			resuming.Store(true)
			if res, err := r.Resume(t.Context(), res.Thread, nil); err != nil || res.Text != want {
				t.Errorf("Resume = %+v, %v; want the answer %q", res, err, want)
			}
			r.Close() // ends the goroutine that renews claims
			waitGoroutines(t, before)
		})
	}
}

func kindsOf(rec []coretest.Received) []string {
	var k []string
	for _, r := range rec {
		k = append(k, r.Kind)
	}
	return k
}

// waitGoroutines waits for the goroutine count to come back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}

// TestStreamResult checks that Result runs a stream that was not read.
func TestStreamResult(t *testing.T) {
	r, _ := streamRunner(t, coretest.Answer("Hi there."), 2)
	res, err := r.Stream(t.Context(), "hi", nil).Result()
	if err != nil || res.Text != "Hi there." {
		t.Errorf("Result() = %+v, %v", res, err)
	}
	var text strings.Builder
	st := r.Stream(t.Context(), "hi", &core.RunOptions{Thread: res.Thread})
	for piece := range st.Text() {
		text.WriteString(piece)
	}
	if _, err := st.Result(); err == nil || !strings.Contains(err.Error(), "turn") {
		// The script has one turn: the second input fails the model.
		t.Logf("second turn: %v", err)
	}
}

// TestStreamNestedRun checks that a run inside a tool of a streamed run
// streams nothing into it.
func TestStreamNestedRun(t *testing.T) {
	inner, _ := streamRunner(t, coretest.Answer("inner answer"), 1)
	outer, _ := streamRunner(t, coretest.Simple("ask", `{}`, "outer answer"), 0,
		mustTool(t)(core.NewTool("ask", "", func(ctx context.Context, _ struct{}) (string, error) {
			res, err := inner.Run(ctx, "q", nil)
			if err != nil {
				return "", err
			}
			return res.Text, nil
		}, nil)))
	for ev, err := range outer.Stream(t.Context(), "go", nil).Events() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == core.EventTextDelta && ev.Text != "outer answer" {
			t.Errorf("text delta %q reached the outer stream", ev.Text)
		}
	}
}

// TestEventResults checks that the event deciding a call's result carries
// that result, as the model gets it: on the run that runs the calls, and
// on the resume that reuses them from the journal and answers a denial.
func TestEventResults(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "ok"}, {Name: "bad"}, {Name: "ask"}}},
		{Text: "done"},
	}}}}
	r, _ := streamRunner(t, script, 0,
		mustTool(t)(core.NewTool("ok", "", func(context.Context, struct{}) (string, error) { return "fine", nil }, nil)),
		mustTool(t)(core.NewTool("bad", "", func(context.Context, struct{}) (string, error) { return "", core.ModelErrorf("nope") }, nil)),
		mustTool(t)(core.NewTool("ask", "", func(context.Context, struct{}) (string, error) { return "asked", nil }, &core.ToolOptions{Approval: core.ApprovalAlways("why not")})))
	results := func(st *core.Stream) []string {
		var got []string
		for ev := range st.Events() {
			switch ev.Kind {
			case core.EventCallFinished, core.EventCallReused, core.EventCallInDoubt:
				if ev.Result == nil {
					got = append(got, ev.Kind.String()+" "+ev.Call.Name+" without a result")
					continue
				}
				res := ev.Result.Output.Text
				if ev.Result.Failed {
					res = "failed: " + ev.Result.Error
				}
				if ev.Result.Outcome != ev.Outcome || ev.Result.Call.ID != ev.Call.ID {
					t.Errorf("%v of %s: result of %s with outcome %v, event's %v", ev.Kind, ev.Call.Name, ev.Result.Call.ID, ev.Result.Outcome, ev.Outcome)
				}
				got = append(got, ev.Kind.String()+" "+ev.Call.Name+" "+res)
			}
		}
		return got
	}
	st := r.Stream(t.Context(), "go", nil)
	got := results(st)
	want := []string{"call_finished ok fine", "call_finished bad failed: nope"}
	if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
	res, err := st.Result()
	if !errors.Is(err, core.ErrAwaitingApproval) {
		t.Fatalf("run: %v, want a pause", err)
	}
	if err := r.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Reason: "no", Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	got = results(r.ResumeStream(t.Context(), res.Thread, nil))
	want = []string{"call_reused ok fine", "call_reused bad failed: nope", "call_finished ask failed: a person denied this call: no"}
	if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
		t.Errorf("resume (-want +got):\n%s", diff)
	}
}

// cmpSorted compares string slices in any order (calls of a step finish
// in any order).
var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })
