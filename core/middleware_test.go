package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

type ctxKey string

// recorder is a middleware that records, in order, the calls it sees and
// what came back, tagging the context the handler gets.
func recorder(name string, mu *sync.Mutex, log *[]string) core.Middleware {
	return func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
			mu.Lock()
			*log = append(*log, name+" > "+call.Name)
			mu.Unlock()
			res, err := next(context.WithValue(ctx, ctxKey(name), true), call)
			mu.Lock()
			*log = append(*log, name+" < "+res.Outcome.String())
			mu.Unlock()
			return res, err
		}
	}
}

// TestMiddleware: the runner's middleware wraps the tool's, the first
// outermost; the context a middleware passes on is the handler's; a
// middleware may refuse a call (the handler does not run, the model reads
// the refusal) or answer it itself; a panicking middleware fails the call.
func TestMiddleware(t *testing.T) {
	var (
		mu  sync.Mutex
		log []string
	)
	var sawOuter, sawInner bool
	echo := mustTool(t)(core.NewTool("echo", "", func(ctx context.Context, in struct{ Text string }) (string, error) {
		sawOuter, sawInner = ctx.Value(ctxKey("outer")) != nil, ctx.Value(ctxKey("tool")) != nil
		return in.Text, nil
	}, &core.ToolOptions{Middleware: []core.Middleware{recorder("tool", &mu, &log)}}))
	var deletes int
	del := mustTool(t)(core.NewTool("delete", "", func(context.Context, struct{}) (string, error) {
		deletes++
		return "deleted", nil
	}, nil))
	cached := mustTool(t)(core.NewTool("cached", "", func(context.Context, struct{}) (string, error) {
		t.Error("the handler of a cached call ran")
		return "", nil
	}, nil))
	boom := mustTool(t)(core.NewTool("boom", "", func(context.Context, struct{}) (string, error) { return "fine", nil }, nil))
	permission := func(next core.CallFunc) core.CallFunc {
		return func(ctx context.Context, call *core.Call) (core.CallResult, error) {
			switch call.Name {
			case "delete":
				return core.Failure(core.Denied, "not allowed for this user"), errors.New("permission check refused delete")
			case "cached":
				return core.CallResult{Output: core.Output{Text: "from the cache"}}, nil
			case "boom":
				panic("middleware bug")
			}
			return next(ctx, call)
		}
	}
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{
			{Name: "echo", Arguments: json.RawMessage(`{"Text":"hi"}`)},
			{Name: "delete", Arguments: json.RawMessage(`{}`)},
			{Name: "cached", Arguments: json.RawMessage(`{}`)},
			{Name: "boom", Arguments: json.RawMessage(`{}`)},
		}},
		{Text: "done"},
	}}}}
	r, b := newRunner(t, s, []*core.Tool{echo, del, cached, boom}, &core.Options{Concurrency: 1,
		Middleware: []core.Middleware{recorder("outer", &mu, &log), permission}})
	if _, err := r.Run(t.Context(), "go", nil); err != nil {
		t.Fatal(err)
	}
	want := []coretest.Delivered{
		{Name: "echo", Output: "hi"},
		{Name: "delete", Failed: true, Error: "not allowed for this user"},
		{Name: "cached", Output: "from the cache"},
		{Name: "boom", Failed: true, Error: `tool "boom" failed`},
	}
	got := results(b.Received())
	for i := range got {
		got[i].CallID = ""
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	wantLog := []string{
		"outer > echo", "tool > echo", "tool < ok", "outer < ok",
		"outer > delete", "outer < denied",
		"outer > cached", "outer < ok",
		"outer > boom",
	}
	if diff := cmp.Diff(wantLog, log); diff != "" {
		t.Errorf("middleware order (-want +got):\n%s", diff)
	}
	if !sawOuter || !sawInner {
		t.Errorf("handler context: outer %v, tool %v; want both middlewares' values", sawOuter, sawInner)
	}
	if deletes != 0 {
		t.Errorf("the refused delete ran %d times", deletes)
	}
}

// TestMiddlewareEvents: what a middleware returns is what the events and
// the journal say: its cause is the event's error, its outcome the call's.
func TestMiddlewareEvents(t *testing.T) {
	var events []core.Event
	tool := mustTool(t)(core.NewTool("delete", "", func(context.Context, struct{}) (string, error) { return "deleted", nil }, nil))
	refuse := func(core.CallFunc) core.CallFunc {
		return func(context.Context, *core.Call) (core.CallResult, error) {
			// Failed without an outcome or message: the runner fills them.
			return core.CallResult{Failed: true}, errors.New("quota exceeded")
		}
	}
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "delete", Arguments: json.RawMessage(`{}`)}}},
		{Text: "{{result 0}}"},
	}}}}
	r, _ := newRunner(t, s, []*core.Tool{tool}, &core.Options{Middleware: []core.Middleware{refuse}, OnEvent: func(e core.Event) { events = append(events, e) }})
	res, err := r.Run(t.Context(), "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls[0].Outcome != core.ToolError || !res.Calls[0].Failed || !strings.Contains(res.Text, `tool "delete" failed`) {
		t.Errorf("result %+v, answer %q; want a ToolError with the generic message", res.Calls[0], res.Text)
	}
	var finished *core.Event
	for i := range events {
		if events[i].Kind == core.EventCallFinished {
			finished = &events[i]
		}
	}
	if finished == nil || finished.Outcome != core.ToolError || finished.Err == nil || finished.Err.Error() != "quota exceeded" {
		t.Errorf("CallFinished = %+v, want outcome ToolError and the middleware's cause", finished)
	}
}

// TestChain: Chain applies its middleware in order, the first outermost,
// alone and as one of a runner's middleware (a Chain that reversed its
// order passed every other test); an empty Chain passes the call through.
func TestChain(t *testing.T) {
	var (
		mu  sync.Mutex
		log []string
	)
	final := func(ctx context.Context, call *core.Call) (core.CallResult, error) {
		mu.Lock()
		log = append(log, "handler "+call.Name)
		mu.Unlock()
		return core.CallResult{Output: core.Output{Text: "done"}}, nil
	}
	chained := core.Chain(recorder("a", &mu, &log), recorder("b", &mu, &log), recorder("c", &mu, &log))
	if res, err := chained(final)(t.Context(), &core.Call{Name: "x"}); err != nil || res.Output.Text != "done" {
		t.Fatalf("the chain returned %+v, %v; want the handler's result", res, err)
	}
	want := []string{"a > x", "b > x", "c > x", "handler x", "c < ok", "b < ok", "a < ok"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("Chain(a, b, c) order (-want +got):\n%s", diff)
	}

	log = nil
	if _, err := core.Chain()(final)(t.Context(), &core.Call{Name: "y"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"handler y"}, log); diff != "" {
		t.Errorf("Chain() (-want +got):\n%s", diff)
	}

	// In a runner: Chain(a, b) then c, around the tool's own t.
	log = nil
	echo := mustTool(t)(core.NewTool("echo", "", func(_ context.Context, in struct{ Text string }) (string, error) {
		mu.Lock()
		log = append(log, "handler echo")
		mu.Unlock()
		return in.Text, nil
	}, &core.ToolOptions{Middleware: []core.Middleware{recorder("t", &mu, &log)}}))
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "echo", Arguments: json.RawMessage(`{"Text":"hi"}`)}}},
		{Text: "done"},
	}}}}
	r, _ := newRunner(t, s, []*core.Tool{echo}, &core.Options{
		Middleware: []core.Middleware{core.Chain(recorder("a", &mu, &log), recorder("b", &mu, &log)), recorder("c", &mu, &log)}})
	if _, err := r.Run(t.Context(), "go", nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"a > echo", "b > echo", "c > echo", "t > echo", "handler echo", "t < ok", "c < ok", "b < ok", "a < ok"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("a runner's middleware Chain(a, b), c around the tool's t (-want +got):\n%s", diff)
	}
}
