package core_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

type textArgs struct {
	Text string `json:"text"`
}

// echoTool returns a tool that returns its text argument and counts its
// runs.
func echoTool(t *testing.T, runs *atomic.Int32) *core.Tool {
	t.Helper()
	return mustTool(t)(core.NewTool("echo", "", func(_ context.Context, in textArgs) (string, error) {
		runs.Add(1)
		return in.Text, nil
	}, nil))
}

// outcomes records the outcome of each call's CallFinished and CallReused
// events, in order.
type outcomes struct {
	mu  sync.Mutex
	got []string
}

func (o *outcomes) onEvent(e core.Event) {
	if e.Kind == core.EventCallFinished || e.Kind == core.EventCallReused {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.got = append(o.got, e.Kind.String()+" "+e.Outcome.String())
	}
}

// TestArgumentLimit checks that arguments past Options.MaxArgumentBytes get
// a failed result saying so, without the handler running, and that the
// call is journaled like any failed call: claimed, finished and submitted
// once, under the digest of the bytes as received.
func TestArgumentLimit(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		args    string
		want    driver.ToolResult // Output, Failed, Error, Outcome
		ran     int32
		outcome string
	}{
		{"within the limit", `{"text":"short"}`, driver.ToolResult{Output: core.Output{Text: "short"}, Outcome: core.OK}, 1, "call_finished ok"},
		{"at the limit", `{"text":"` + long[:50] + `"}`, driver.ToolResult{Output: core.Output{Text: long[:50]}, Outcome: core.OK}, 1, "call_finished ok"},
		{"object past the limit", `{"text":"` + long + `"}`, driver.ToolResult{Failed: true, Error: "arguments too large (111 bytes; the limit is 61)", Outcome: core.TooLarge}, 0, "call_finished too_large"},
		{"string past the limit", `"{\"text\":\"` + long + `\"}"`, driver.ToolResult{Failed: true, Error: "arguments too large (117 bytes; the limit is 61)", Outcome: core.TooLarge}, 0, "call_finished too_large"},
		{"invalid JSON past the limit", `{"text":` + long, driver.ToolResult{Failed: true, Error: "arguments too large (108 bytes; the limit is 61)", Outcome: core.TooLarge}, 0, "call_finished too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			var ev outcomes
			tb, err := core.NewToolbox(echoTool(t, &runs))
			if err != nil {
				t.Fatal(err)
			}
			call := core.Call{Thread: "thread_1", Turn: "turn_1", ID: "call_1", Name: "echo", Arguments: json.RawMessage(tt.args)}
			b := &canned{steps: []*driver.Step{{Thread: "thread_1", Turn: "turn_1", Calls: []core.Call{call}}, {Thread: "thread_1", Text: "done"}}}
			j := journaldriver.NewMemory()
			r := core.NewRunner(b, tb, &core.Options{Logger: quiet, Journal: j, MaxArgumentBytes: 61, OnEvent: ev.onEvent})
			if _, err := r.Run(t.Context(), "go", nil); err != nil {
				t.Fatal(err)
			}
			submits, _ := b.received()
			if len(submits) != 1 || len(submits[0]) != 1 {
				t.Fatalf("submissions = %+v, want one result", submits)
			}
			got := submits[0][0]
			if diff := cmp.Diff(tt.want, got, cmp.FilterPath(func(p cmp.Path) bool {
				f := p.Last().String()
				return f == ".Call" || f == ".IdempotencyKey" || f == ".Resend"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if runs.Load() != tt.ran {
				t.Errorf("the handler ran %d times, want %d", runs.Load(), tt.ran)
			}
			if diff := cmp.Diff([]string{tt.outcome}, ev.got); diff != "" {
				t.Errorf("call events (-want +got):\n%s", diff)
			}
			entry, ok, err := j.Get(t.Context(), journaldriver.Key{Backend: "canned", Thread: "thread_1", Turn: "turn_1", Call: "call_1"})
			if err != nil || !ok {
				t.Fatalf("journal entry: %v, %v", ok, err)
			}
			if entry.State != journaldriver.Submitted || entry.Result == nil || entry.Result.Outcome != tt.want.Outcome {
				t.Errorf("journal entry = %+v, want a submitted %v result", entry, tt.want.Outcome)
			}
			if tt.want.Outcome == core.TooLarge {
				sum := sha256.Sum256([]byte(tt.args))
				if want := hex.EncodeToString(sum[:]); entry.Digest != want {
					t.Errorf("journal digest = %s, want the digest of the bytes as received, %s", entry.Digest, want)
				}
			}
		})
	}
}

// TestArgumentLimitResume checks that after the submission of a too-large
// call's result fails, a resume sends the kept failed result again, and
// the handler never runs.
func TestArgumentLimitResume(t *testing.T) {
	var runs atomic.Int32
	var ev outcomes
	script := coretest.Simple("echo", `{"text":"`+strings.Repeat("x", 100)+`"}`, "done")
	tb, err := core.NewToolbox(echoTool(t, &runs))
	if err != nil {
		t.Fatal(err)
	}
	unavailable := errors.New("the service is unavailable")
	var failedOnce bool
	b := coretest.NewBackend(script, &coretest.BackendOptions{Fault: func(op string, n int) error {
		if op == "submit" && !failedOnce {
			failedOnce = true
			return unavailable
		}
		return nil
	}})
	r := core.NewRunner(b, tb, &core.Options{Logger: quiet, Journal: journaldriver.NewMemory(), MaxArgumentBytes: 50, OnEvent: ev.onEvent})
	res, err := r.Run(t.Context(), "go", nil)
	if !errors.Is(err, unavailable) {
		t.Fatalf("Run error = %v, want the failed submission's", err)
	}
	if _, err := r.Resume(t.Context(), res.Thread, nil); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	sent := results(b.Received())
	if len(sent) != 1 || !sent[0].Failed || !strings.HasPrefix(sent[0].Error, "arguments too large (") {
		t.Errorf("results sent = %+v, want the kept too-large failure", sent)
	}
	if runs.Load() != 0 {
		t.Errorf("the handler ran %d times, want 0", runs.Load())
	}
	if diff := cmp.Diff([]string{"call_finished too_large", "call_reused too_large"}, ev.got); diff != "" {
		t.Errorf("call events (-want +got):\n%s", diff)
	}
}

// TestOutputLimit checks what becomes of outputs past
// Options.MaxOutputBytes: a failed result saying so, or, where the program
// asks for it, a text cut to the limit that stays valid UTF-8 and says it
// was truncated.
func TestOutputLimit(t *testing.T) {
	const limit = 100
	x := func(n int) string { return strings.Repeat("x", n) }
	ctrl := struct{ S string }{strings.Repeat("\x01", 30)} // 30 bytes that encode as 180
	ctrlJSON, _ := json.Marshal(ctrl)
	note := "\n[output truncated: it was 200 bytes; the limit is 100]"
	tests := []struct {
		name     string
		v        any
		truncate string // "", "runner" or "tool"
		want     coretest.Delivered
		outcome  string
	}{
		{"string at the limit", x(limit), "", coretest.Delivered{Output: x(limit)}, "ok"},
		{"string past the limit", x(limit + 1), "", coretest.Delivered{Failed: true, Error: "output too large (101 bytes; the limit is 100)"}, "too_large"},
		{"string truncated by the runner", strings.Repeat("é", 100), "runner", coretest.Delivered{Output: strings.Repeat("é", 22) + note}, "ok"},
		{"string truncated by the tool", strings.Repeat("é", 100), "tool", coretest.Delivered{Output: strings.Repeat("é", 22) + note}, "ok"},
		{"Output truncated", core.Output{Text: x(200)}, "runner", coretest.Delivered{Output: x(45) + note}, "ok"},
		{"value past the limit, measured", []string{x(200)}, "", coretest.Delivered{Failed: true, Error: "output too large (at least 204 bytes; the limit is 100)"}, "too_large"},
		{"value past the limit, measured, truncating", []string{x(200)}, "runner", coretest.Delivered{Failed: true, Error: "output too large (at least 204 bytes; the limit is 100)"}, "too_large"},
		{"value past the limit, encoded", ctrl, "", coretest.Delivered{Failed: true, Error: "output too large (" + strconv.Itoa(len(ctrlJSON)) + " bytes; the limit is 100)"}, "too_large"},
		{"value within the limit", map[string]int{"a": 1}, "", coretest.Delivered{Output: `{"a":1}`}, "ok"},
		// <, > and & as the handler wrote them (not \u003c...): the model
		// reads them, and the value measured is the value sent.
		{"value with <, > and &", map[string]string{"q": "a<b && c>d"}, "", coretest.Delivered{Output: `{"q":"a<b && c>d"}`}, "ok"},
		{"value with <, > and & at the limit", map[string]string{"q": strings.Repeat("<", limit-8)}, "", coretest.Delivered{Output: `{"q":"` + strings.Repeat("<", limit-8) + `"}`}, "ok"},
		{"raw JSON past the limit", json.RawMessage(`[` + strings.Repeat(`1, `, 60) + `1]`), "", coretest.Delivered{Failed: true, Error: "output too large (at least 123 bytes; the limit is 100)"}, "too_large"},
		{"raw JSON compacted within the limit", json.RawMessage(`[` + strings.Repeat(`1, `, 30) + `1]`), "", coretest.Delivered{Output: `[` + strings.Repeat(`1,`, 30) + `1]`}, "ok"},
		{"content past the limit, truncating", core.Content{core.TextPart(x(200))}, "runner", coretest.Delivered{Failed: true, Error: "output too large (204 bytes; the limit is 100)"}, "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev outcomes
			tool := mustTool(t)(core.NewTool("big", "", func(context.Context, struct{}) (any, error) { return tt.v, nil },
				&core.ToolOptions{TruncateOutput: tt.truncate == "tool"}))
			r, b := newRunner(t, coretest.Simple("big", `{}`, "done"), []*core.Tool{tool},
				&core.Options{MaxOutputBytes: limit, TruncateOutput: tt.truncate == "runner", OnEvent: ev.onEvent})
			if _, err := r.Run(t.Context(), "go", nil); err != nil {
				t.Fatal(err)
			}
			got := results(b.Received())
			if len(got) != 1 {
				t.Fatalf("results = %+v, want one", got)
			}
			tt.want.CallID, tt.want.Name = got[0].CallID, "big"
			if diff := cmp.Diff(tt.want, got[0]); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if out := got[0].Output; len(out) > limit || !utf8.ValidString(out) {
				t.Errorf("output of %d bytes (valid UTF-8: %v), want at most %d bytes of valid UTF-8", len(out), utf8.ValidString(out), limit)
			}
			if diff := cmp.Diff([]string{"call_finished " + tt.outcome}, ev.got); diff != "" {
				t.Errorf("call events (-want +got):\n%s", diff)
			}
		})
	}
}

// allocated returns the bytes the process allocated while f ran. It bounds
// how much f's heap grew at its peak, whatever the collector did.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeValuesMemory runs 50 MB outputs and 10 MB arguments through the
// runner (memory journal, in-memory backend, default limits) and checks
// that what the runner allocates, which bounds how much the client's heap
// grows at its peak, stays under 4 × DefaultMaxOutputBytes besides the
// handler's own value (made before the run, so not counted).
func TestLargeValuesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 60 MB")
	}
	const big = 50 << 20
	const bound = 4 * core.DefaultMaxOutputBytes
	text := strings.Repeat("x", big)
	type row struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	rows := make([]row, big/1000) // encodes to 50 MB; every row shares one string
	for i := range rows {
		rows[i] = row{ID: i, Name: text[:1000]}
	}
	tests := []struct {
		name     string
		v        any
		truncate bool
		want     string // the start of what the model reads
	}{
		{"50 MB string", text, false, "output too large (52428800 bytes; the limit is 4194304)"},
		{"50 MB string, truncated", text, true, "xxxxxxxx"},
		{"value encoding to 50 MB", rows, false, "output too large (at least "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mustTool(t)(core.NewTool("big", "", func(context.Context, struct{}) (any, error) { return tt.v, nil }, nil))
			r, b := newRunner(t, coretest.Simple("big", `{}`, "done"), []*core.Tool{tool}, &core.Options{TruncateOutput: tt.truncate})
			var err error
			n := allocated(func() { _, err = r.Run(t.Context(), "go", nil) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the run allocated %.1f MiB", float64(n)/(1<<20))
			if n > bound {
				t.Errorf("the run allocated %d bytes, want at most %d (4 × the limit)", n, bound)
			}
			got := results(b.Received())
			if len(got) != 1 || !strings.HasPrefix(got[0].Text(), tt.want) || len(got[0].Text()) > core.DefaultMaxOutputBytes {
				t.Errorf("the model read %d bytes starting %.80q, want at most the limit, starting %q", len(got[0].Text()), got[0].Text(), tt.want)
			}
		})
	}
	t.Run("10 MB arguments", func(t *testing.T) {
		var runs atomic.Int32
		tb, err := core.NewToolbox(echoTool(t, &runs))
		if err != nil {
			t.Fatal(err)
		}
		args := json.RawMessage(`{"text":"` + text[:10<<20] + `"}`)
		call := core.Call{Thread: "thread_1", Turn: "turn_1", ID: "call_1", Name: "echo", Arguments: args}
		b := &canned{steps: []*driver.Step{{Thread: "thread_1", Turn: "turn_1", Calls: []core.Call{call}}, {Thread: "thread_1", Text: "done"}}}
		r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
		n := allocated(func() { _, err = r.Run(t.Context(), "go", nil) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the run allocated %.1f MiB", float64(n)/(1<<20))
		if n > 1<<20 {
			t.Errorf("the run allocated %d bytes, want at most 1 MiB", n)
		}
		submits, _ := b.received()
		if runs.Load() != 0 || len(submits) != 1 || submits[0][0].Error != "arguments too large (10485771 bytes; the limit is 1048576)" {
			t.Errorf("ran %d times and sent %+v, want no run and the too-large failure", runs.Load(), submits)
		}
	})
}

// TestLimitsOnEveryPath checks that what the model reads passes
// Options.MaxOutputBytes, and what a handler gets MaxArgumentBytes,
// whatever path produced it: a *ModelError's message, a middleware's own
// result (output, content or failure), a person's reason for a denial and
// edited arguments (recorded in the journal by another process, whose
// Decide was not this runner's). Each value is 50 MB (10 MB for the
// decisions), made before the run; the run allocates at most 4 × the
// output limit.
func TestLimitsOnEveryPath(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100 MB")
	}
	const bound = 4 * core.DefaultMaxOutputBytes
	big := strings.Repeat("y", 50<<20)
	tooLarge := "output too large (52428800 bytes; the limit is 4194304)"
	tests := []struct {
		name     string
		handler  func() (any, error)
		mw       func() core.CallResult // a middleware's own result, if set
		truncate bool
		want     string // the start of what the model reads
		outcome  core.Outcome
	}{
		{name: "model error", handler: func() (any, error) { return nil, &core.ModelError{Message: big} }, want: "yyyy", outcome: core.ToolError},
		{name: "middleware output", mw: func() core.CallResult { return core.CallResult{Output: core.Output{Text: big}} }, want: tooLarge, outcome: core.TooLarge},
		{name: "middleware output, truncated", mw: func() core.CallResult { return core.CallResult{Output: core.Output{Text: big}} }, truncate: true, want: "yyyy", outcome: core.OK},
		{name: "middleware content", mw: func() core.CallResult {
			return core.CallResult{Output: core.Output{Parts: []core.Part{core.TextPart(big)}}}
		}, want: "output too large (52428804 bytes", outcome: core.TooLarge},
		{name: "middleware failure", mw: func() core.CallResult { return core.Failure(core.Denied, big) }, want: "yyyy", outcome: core.Denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handler := tt.handler
			if handler == nil {
				handler = func() (any, error) { return "small", nil }
			}
			tool := mustTool(t)(core.NewTool("big", "", func(context.Context, struct{}) (any, error) { return handler() }, nil))
			opts := &core.Options{TruncateOutput: tt.truncate}
			if tt.mw != nil {
				opts.Middleware = []core.Middleware{func(core.CallFunc) core.CallFunc {
					return func(context.Context, *core.Call) (core.CallResult, error) { return tt.mw(), nil }
				}}
			}
			r, b := newRunner(t, coretest.Simple("big", `{}`, "done"), []*core.Tool{tool}, opts)
			var (
				res *core.Result
				err error
			)
			n := allocated(func() { res, err = r.Run(t.Context(), "go", nil) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the run allocated %.1f MiB", float64(n)/(1<<20))
			if n > bound {
				t.Errorf("the run allocated %d bytes, want at most %d (4 × the limit)", n, bound)
			}
			got := results(b.Received())
			if len(got) != 1 || !strings.HasPrefix(got[0].Text(), tt.want) || len(got[0].Text()) > core.DefaultMaxOutputBytes {
				t.Fatalf("the model read %d bytes starting %.80q, want at most the limit, starting %q", len(got[0].Text()), got[0].Text(), tt.want)
			}
			if o := res.Calls[0].Outcome; o != tt.outcome {
				t.Errorf("outcome %v, want %v", o, tt.outcome)
			}
		})
	}

	// Decisions recorded by another process, past this runner's limits.
	const limit = 1000
	decisions := []struct {
		name string
		d    core.Decision
		want string // the start of what the model reads
	}{
		{"denial reason", core.Decision{Reason: big[:10<<20]}, "a person denied this call: yyyy"},
		{"edited arguments", core.Decision{Approved: true, Arguments: []byte(`{"order":"7","amount":` + strings.Repeat("1", 10<<20) + `}`)}, "arguments too large (10485783 bytes; the limit is 1000)"},
	}
	for _, tt := range decisions {
		t.Run(tt.name, func(t *testing.T) {
			e := newApprovalEnv(t, refundScript("150"), &core.Options{MaxOutputBytes: limit, MaxArgumentBytes: limit})
			res, err := e.runner.Run(t.Context(), "refund", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %v, want a pause", err)
			}
			if err := e.runner.Decide(t.Context(), res.Thread, res.Pending[0].Key.Call, tt.d); errcode.Of(err) != errcode.InvalidArgument {
				t.Errorf("Decide = %v, want InvalidArgument", err)
			}
			if _, err := e.journal.DecideApproval(t.Context(), res.Pending[0].Key, tt.d); err != nil {
				t.Fatal(err)
			}
			if _, err := e.runner.Resume(t.Context(), res.Thread, nil); err != nil {
				t.Fatal(err)
			}
			got := results(e.backend.Received())
			if len(got) != 2 || !strings.HasPrefix(got[0].Text(), tt.want) || len(got[0].Text()) > limit {
				t.Fatalf("the model read %d bytes starting %.80q, want at most %d, starting %q", len(got[0].Text()), got[0].Text(), limit, tt.want)
			}
			if e.refunds.Load() != 0 {
				t.Errorf("the handler ran %d times, want none", e.refunds.Load())
			}
		})
	}
}

// TestNumberOutOfRange: a number no float64 holds (1e400) is refused as
// invalid arguments naming the field and saying why, not as a value of
// the wrong type.
func TestNumberOutOfRange(t *testing.T) {
	var runs atomic.Int32
	tb, err := core.NewToolbox(mustTool(t)(core.NewTool("count", "", func(_ context.Context, in struct {
		N float64 `json:"n"`
	}) (string, error) {
		runs.Add(1)
		return "ok", nil
	}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	call := core.Call{Thread: "thread_1", Turn: "turn_1", ID: "call_1", Name: "count", Arguments: json.RawMessage(`{"n":1e400}`)}
	b := &canned{steps: []*driver.Step{{Thread: "thread_1", Turn: "turn_1", Calls: []core.Call{call}}, {Thread: "thread_1", Text: "done"}}}
	r := core.NewRunner(b, tb, &core.Options{Logger: quiet})
	if _, err := r.Run(t.Context(), "go", nil); err != nil {
		t.Fatal(err)
	}
	submits, _ := b.received()
	want := `invalid arguments for tool "count": n: number 1e400 is out of range (a JSON number here must fit a 64-bit float)`
	if len(submits) != 1 || submits[0][0].Error != want || runs.Load() != 0 {
		t.Errorf("sent %+v (ran %d times), want %q and no run", submits, runs.Load(), want)
	}
}
