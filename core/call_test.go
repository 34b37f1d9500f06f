package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// TestRunnerCall answers single calls outside a run (Runner.Call): every
// case gives the result Run would send, and the handler runs only where
// it should.
func TestRunnerCall(t *testing.T) {
	type charge struct {
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}
	var (
		runs     atomic.Int32
		verified = map[string]bool{"paid": true}
		gotArgs  atomic.Value
	)
	do := func(_ context.Context, in charge) (string, error) {
		runs.Add(1)
		gotArgs.Store(in)
		if in.Order == "boom" {
			panic("boom")
		}
		return "charged " + in.Order, nil
	}
	mk := func(name string, opts *core.ToolOptions) *core.Tool {
		tl, err := core.NewTool(name, "charges an order", do, opts)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	verify := func(_ context.Context, c core.Call) (any, bool, error) {
		var in charge
		json.Unmarshal(c.Arguments, &in)
		if verified[in.Order] {
			return "charged " + in.Order + " (verified)", true, nil
		}
		return nil, false, nil
	}
	tb, err := core.NewToolbox(
		mk("charge", nil),
		mk("lookup", &core.ToolOptions{ReadOnly: true}),
		mk("verified_charge", &core.ToolOptions{Verify: verify}),
	)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	r := core.NewRunner(&canned{}, tb, &core.Options{Logger: quiet, MaxArgumentBytes: 100, OnEvent: func(e core.Event) {
		events = append(events, e.Kind.String()+":"+e.Outcome.String())
	}})
	args := func(order string) json.RawMessage { return json.RawMessage(`{"order":"` + order + `","amount":5}`) }
	tests := []struct {
		name       string
		req        core.CallRequest
		want       driver.ToolResult // Call and IdempotencyKey are not compared
		wantRuns   int32
		wantEvents []string
	}{
		{"ok", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}},
			driver.ToolResult{Output: core.Output{Text: "charged a"}}, 1, []string{"call_started:ok", "call_finished:ok"}},
		{"unknown tool", core.CallRequest{Call: core.Call{ID: "c1", Name: "nope", Arguments: args("a")}},
			driver.ToolResult{Failed: true, Outcome: core.UnknownTool, Error: `unknown tool "nope"; available tools: charge, lookup, verified_charge`}, 0, []string{"call_started:ok", "call_finished:unknown_tool"}},
		{"schema violation", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: json.RawMessage(`{"order":1}`)}},
			driver.ToolResult{Failed: true, Outcome: core.InvalidArguments}, 0, []string{"call_started:ok", "call_finished:invalid_arguments"}},
		{"arguments too large", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: json.RawMessage(`{"order":"` + strings.Repeat("x", 100) + `"}`)}},
			driver.ToolResult{Failed: true, Outcome: core.TooLarge, Error: "arguments too large (112 bytes; the limit is 100)"}, 0, []string{"call_started:ok", "call_finished:too_large"}},
		{"panic", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("boom")}},
			driver.ToolResult{Failed: true, Outcome: core.Panicked, Error: `tool "charge" failed`}, 1, []string{"call_started:ok", "call_finished:panicked"}},
		{"again, side effect, no verify: in doubt", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}, Again: true},
			driver.ToolResult{Failed: true, Outcome: core.InDoubt, Error: `the outcome of this call of "charge" is unknown: it may or may not have taken effect, and it was not run again`}, 0, []string{"call_in_doubt:in_doubt"}},
		{"again, read-only: runs again", core.CallRequest{Call: core.Call{ID: "c1", Name: "lookup", Arguments: args("a")}, Again: true},
			driver.ToolResult{Output: core.Output{Text: "charged a"}}, 1, []string{"call_in_doubt:ok", "call_started:ok", "call_finished:ok"}},
		{"again, verified", core.CallRequest{Call: core.Call{ID: "c1", Name: "verified_charge", Arguments: args("paid")}, Again: true},
			driver.ToolResult{Output: core.Output{Text: "charged paid (verified)"}}, 0, []string{"call_in_doubt:ok"}},
		{"again, verify finds nothing: runs", core.CallRequest{Call: core.Call{ID: "c1", Name: "verified_charge", Arguments: args("b")}, Again: true},
			driver.ToolResult{Output: core.Output{Text: "charged b"}}, 1, []string{"call_in_doubt:ok", "call_started:ok", "call_finished:ok"}},
		{"denied", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}, Decision: &core.Decision{Reason: "too much"}},
			driver.ToolResult{Failed: true, Outcome: core.Denied, Error: "a person denied this call: too much"}, 0, []string{"call_finished:denied"}},
		{"denied, again: still denied", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}, Decision: &core.Decision{}, Again: true},
			driver.ToolResult{Failed: true, Outcome: core.Denied, Error: "a person denied this call"}, 0, []string{"call_finished:denied"}},
		{"approved with edits", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}, Decision: &core.Decision{Approved: true, Arguments: args("edited")}},
			driver.ToolResult{Output: core.Output{Text: "charged edited"}}, 1, []string{"call_started:ok", "call_finished:ok"}},
		{"service approval approved", core.CallRequest{Call: core.Call{ID: "c1", Name: "mcp_delete", Kind: core.ServiceApproval}, Decision: &core.Decision{Approved: true}},
			driver.ToolResult{Output: core.Output{Text: "approved"}}, 0, []string{"call_finished:ok"}},
		{"key given", core.CallRequest{Call: core.Call{ID: "c1", Name: "charge", Arguments: args("a")}, IdempotencyKey: "wf-1/2/c1"},
			driver.ToolResult{Output: core.Output{Text: "charged a"}, IdempotencyKey: "wf-1/2/c1"}, 1, []string{"call_started:ok", "call_finished:ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs.Store(0)
			events = nil
			got, err := r.Call(t.Context(), &tt.req)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got.Call.ID != tt.req.Call.ID || got.IdempotencyKey == "" {
				t.Errorf("result answers %q with key %q, want call %q and a key", got.Call.ID, got.IdempotencyKey, tt.req.Call.ID)
			}
			if tt.want.IdempotencyKey == "" {
				got.IdempotencyKey = ""
			}
			got.Call = driver.Call{}
			if tt.want.Outcome == core.InvalidArguments {
				if !strings.Contains(got.Error, "order:") {
					t.Errorf("error %q does not name the field", got.Error)
				}
				got.Error = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if n := runs.Load(); n != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", n, tt.wantRuns)
			}
			if diff := cmp.Diff(tt.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunnerCallStable: the derived idempotency key depends on the call
// alone, not on the runner or the attempt.
func TestRunnerCallStable(t *testing.T) {
	tl, err := core.NewTool("echo", "echoes", func(_ context.Context, in struct{ S string }) (string, error) { return in.S, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := core.NewToolbox(tl)
	call := core.Call{Thread: "th", Turn: "tu", ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"S":"x"}`)}
	var keys []string
	for range 2 {
		r := core.NewRunner(&canned{}, tb, &core.Options{Logger: quiet})
		tr, err := r.Call(t.Context(), &core.CallRequest{Call: call, Step: 1})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tr.IdempotencyKey)
	}
	if keys[0] != keys[1] {
		t.Errorf("keys %q and %q differ", keys[0], keys[1])
	}
}

// TestRunnerCallCanceled: a call whose context ends while its handler runs
// is an error (it may run again), not a result.
func TestRunnerCallCanceled(t *testing.T) {
	started := make(chan struct{})
	tl, err := core.NewTool("wait", "waits", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := core.NewToolbox(tl)
	r := core.NewRunner(&canned{}, tb, &core.Options{Logger: quiet})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	_, err = r.Call(ctx, &core.CallRequest{Call: core.Call{ID: "c1", Name: "wait", Arguments: json.RawMessage(`{}`)}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Call: %v, want context.Canceled", err)
	}
}

// TestApprovalNeeded asks the approval rule as Run would.
func TestApprovalNeeded(t *testing.T) {
	type refund struct {
		Amount int `json:"amount"`
	}
	tl, err := core.NewTool("refund", "refunds", func(context.Context, refund) (string, error) { return "ok", nil }, &core.ToolOptions{
		Approval: core.ApprovalIf(func(_ context.Context, in refund) (bool, string) { return in.Amount > 100, "over 100" }),
	})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := core.NewTool("lookup", "looks", func(context.Context, refund) (string, error) { return "ok", nil }, nil)
	tb, _ := core.NewToolbox(tl, plain)
	r := core.NewRunner(&canned{}, tb, &core.Options{Logger: quiet})
	tests := []struct {
		name     string
		call     core.Call
		need     bool
		whyWants string
	}{
		{"over", core.Call{Name: "refund", Arguments: json.RawMessage(`{"amount":500}`)}, true, "over 100"},
		{"under", core.Call{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`)}, false, ""},
		{"not JSON: fails as usual", core.Call{Name: "refund", Arguments: json.RawMessage(`{`)}, false, ""},
		{"no rule", core.Call{Name: "lookup", Arguments: json.RawMessage(`{"amount":500}`)}, false, ""},
		{"unknown tool", core.Call{Name: "nope"}, false, ""},
		{"service approval", core.Call{Name: "mcp_delete", Kind: core.ServiceApproval}, true, "the service asks a person to approve mcp_delete"},
	}
	for _, tt := range tests {
		need, why := r.ApprovalNeeded(t.Context(), tt.call)
		if need != tt.need || why != tt.whyWants {
			t.Errorf("%s: ApprovalNeeded = %v, %q; want %v, %q", tt.name, need, why, tt.need, tt.whyWants)
		}
	}
}

// TestRunnerHooks: a runner hands out the hooks it was given.
func TestRunnerHooks(t *testing.T) {
	h := &core.Hooks{}
	if got := core.NewRunner(&canned{}, nil, &core.Options{Hooks: h}).Hooks(); got != h {
		t.Errorf("Hooks() = %p, want %p", got, h)
	}
	if got := core.NewRunner(&canned{}, nil, nil).Hooks(); got != nil {
		t.Errorf("Hooks() of a runner without = %p, want nil", got)
	}
}

// TestCallJournaled: a journaled call outside a run is validated, bounded,
// run through the middleware and journaled as a step's call is, one the
// journal holds is not run again, and one that needs approval is denied.
func TestCallJournaled(t *testing.T) {
	var runs atomic.Int32
	w := mustTool(t)(core.NewTool("weather", "", func(ctx context.Context, in weatherArgs) (string, error) {
		runs.Add(1)
		return weather(ctx, in)
	}, weatherOpts))
	refund := mustTool(t)(core.NewTool("refund", "", func(context.Context, struct{}) (string, error) {
		runs.Add(1)
		return "refunded", nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("money goes out")}))
	var mw atomic.Int32
	r, _ := newRunner(t, &coretest.Script{}, []*core.Tool{w, refund}, &core.Options{
		Journal: journaldriver.NewMemory(),
		Middleware: []core.Middleware{func(next core.CallFunc) core.CallFunc {
			return func(ctx context.Context, c *core.Call) (core.CallResult, error) {
				mw.Add(1)
				return next(ctx, c)
			}
		}},
	})
	tests := []struct {
		name     string
		call     core.Call
		want     core.CallResult
		wantRuns int32
	}{
		{"ok", core.Call{ID: "1", Thread: "s", Name: "weather", Arguments: json.RawMessage(`{"location":"Seattle, WA"}`)},
			core.CallResult{Output: core.Output{Text: "70f"}, Outcome: core.OK}, 1},
		{"journaled, not run again", core.Call{ID: "1", Thread: "s", Name: "weather", Arguments: json.RawMessage(`{"location":"Seattle, WA"}`)},
			core.CallResult{Output: core.Output{Text: "70f"}, Outcome: core.OK}, 1},
		{"schema violation", core.Call{ID: "2", Thread: "s", Name: "weather", Arguments: json.RawMessage(`{"location":1}`)},
			core.CallResult{Failed: true, Outcome: core.InvalidArguments, Error: `invalid arguments for tool "weather": location: type: 1 has type "integer", want "string"`}, 1},
		{"unknown tool", core.Call{ID: "3", Thread: "s", Name: "nope", Arguments: json.RawMessage(`{}`)},
			core.CallResult{Failed: true, Outcome: core.UnknownTool, Error: `unknown tool "nope"; available tools: weather, refund`}, 1},
		{"approval cannot be asked", core.Call{ID: "4", Thread: "s", Name: "refund", Arguments: json.RawMessage(`{}`)},
			core.CallResult{Failed: true, Outcome: core.Denied, Error: `tool "refund" needs a person's approval, which cannot be asked for here (money goes out)`}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := r.Call(t.Context(), &core.CallRequest{Call: tt.call, Journaled: true})
			if err != nil {
				t.Fatal(err)
			}
			got := core.CallResult{Output: tr.Output, Failed: tr.Failed, Error: tr.Error, Outcome: tr.Outcome}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if n := runs.Load(); n != tt.wantRuns {
				t.Errorf("handlers ran %d times, want %d", n, tt.wantRuns)
			}
		})
	}
	if n := mw.Load(); n != 3 {
		t.Errorf("middleware ran %d times, want 3 (the calls that ran or failed their arguments)", n)
	}
}

// TestRunnerCallParents: the events of a call of an agent's run that goes
// on elsewhere (Runner.Call with Parents) go to its runner's OnEvent as
// they are, and to each parent runner's, their Path the agent calls from
// that runner down; a parent without OnEvent is passed over.
func TestRunnerCallParents(t *testing.T) {
	type seen struct {
		Kind core.EventKind
		Path string
	}
	record := func(into *[]seen) *core.Options {
		return &core.Options{OnEvent: func(e core.Event) {
			var names []string
			for _, c := range e.Path {
				names = append(names, c.Name+"#"+c.ID)
			}
			*into = append(*into, seen{e.Kind, strings.Join(names, ">")})
		}}
	}
	echo, err := core.NewTool("echo", "echoes", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := core.NewToolbox(echo)
	if err != nil {
		t.Fatal(err)
	}
	newRunner := func(o *core.Options) *core.Runner {
		r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, nil), tb, o)
		t.Cleanup(func() { r.Close() })
		return r
	}
	var root, child, own []seen
	r0, r1, silent, r2 := newRunner(record(&root)), newRunner(record(&child)), newRunner(nil), newRunner(record(&own))
	parents := []core.Parent{
		{Runner: r0, Call: core.Call{ID: "a", Name: "ask"}},
		{Runner: silent, Call: core.Call{ID: "q", Name: "quiet"}},
		{Runner: r1, Call: core.Call{ID: "b", Name: "ask_more"}},
	}
	tr, err := r2.Call(t.Context(), &core.CallRequest{Call: core.Call{ID: "c", Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}, Step: 1, Parents: parents})
	if err != nil || tr.Failed || tr.Output.Text != "hi" {
		t.Fatalf("Call = %+v, %v", tr, err)
	}
	for _, c := range []struct {
		name      string
		got, want []seen
	}{
		{"the call's runner", own, []seen{{core.EventCallStarted, ""}, {core.EventCallFinished, ""}}},
		{"its parent", child, []seen{{core.EventCallStarted, "ask_more#b"}, {core.EventCallFinished, "ask_more#b"}}},
		{"the outermost", root, []seen{{core.EventCallStarted, "ask#a>quiet#q>ask_more#b"}, {core.EventCallFinished, "ask#a>quiet#q>ask_more#b"}}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("events at %s (-want +got):\n%s", c.name, diff)
		}
	}
}
