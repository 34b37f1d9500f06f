package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// setup describes a test: the script the fake plays and the options of the
// fake, the backend and the runner. Zero values are usable.
type setup struct {
	script  *coretest.Script
	server  *openaitest.Options
	backend openai.Options
	runner  core.Options
	// barrier, if > 1, makes get_weather wait until that many calls of it
	// run at once.
	barrier int
}

// harness is a fake server, a backend on it, a runner, and a count of the
// handler runs by call id.
type harness struct {
	t       *testing.T
	srv     *openaitest.Server
	backend *openai.Backend
	runner  *core.Runner
	tools   *core.Toolbox
	opts    setup

	mu   sync.Mutex
	runs map[string]int // call id → handler runs

	gate     chan struct{}
	arrived  int
	gateOnce sync.Once
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, s setup) *harness {
	t.Helper()
	h := &harness{t: t, runs: map[string]int{}, opts: s, gate: make(chan struct{})}
	h.srv = openaitest.NewServer(s.script, s.server)
	t.Cleanup(h.srv.Close)
	h.tools = h.toolbox()
	h.backend = h.open(s.backend)
	ro := s.runner
	if ro.Logger == nil {
		ro.Logger = discard()
	}
	h.runner = core.NewRunner(h.backend, h.tools, &ro)
	return h
}

// open opens another backend on the same server (as a new process would).
func (h *harness) open(o openai.Options) *openai.Backend {
	h.t.Helper()
	if o.BaseURL == "" {
		o.BaseURL = h.srv.URL
	}
	if o.APIKey == "" {
		o.APIKey = "test-key"
	}
	if o.Logger == nil {
		o.Logger = discard()
	}
	o.RequestOptions = append([]option.RequestOption{option.WithMaxRetries(2)}, o.RequestOptions...)
	b, err := openai.Open(h.t.Context(), h.tools, &o)
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	h.t.Cleanup(func() { b.Close() })
	return b
}

func (h *harness) ran(ctx context.Context) {
	call, _ := core.CallFromContext(ctx)
	h.mu.Lock()
	h.runs[call.ID]++
	h.mu.Unlock()
}

// runCounts returns how often the handler of each call ran.
func (h *harness) runCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.runs {
		out[k] = v
	}
	return out
}

// checkOnce fails the test if a handler ran more than once for a call, or
// if the fake received a call's result more than once.
func (h *harness) checkOnce() {
	h.t.Helper()
	for id, n := range h.runCounts() {
		if n != 1 {
			h.t.Errorf("handler of call %s ran %d times, want 1", id, n)
		}
	}
	seen := map[string]int{}
	for _, r := range h.srv.Received() {
		for _, d := range r.Results {
			seen[d.CallID]++
		}
	}
	for id, n := range seen {
		if n != 1 {
			h.t.Errorf("the service received %d results for call %s, want 1", n, id)
		}
	}
}

// results returns the results the fake received, in order.
func (h *harness) results() []coretest.Delivered {
	var out []coretest.Delivered
	for _, r := range h.srv.Received() {
		out = append(out, r.Results...)
	}
	return out
}

type customerArgs struct {
	CustomerID string `json:"customer_id"`
}

type customer struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

type customerResult struct {
	Found    bool      `json:"found"`
	Customer *customer `json:"customer"`
}

func (h *harness) toolbox() *core.Toolbox {
	h.t.Helper()
	must := func(t *core.Tool, err error) *core.Tool {
		if err != nil {
			h.t.Fatal(err)
		}
		return t
	}
	tools := []*core.Tool{
		must(core.NewTool("get_customer", "Look up a customer by ID.", func(ctx context.Context, in customerArgs) (customerResult, error) {
			h.ran(ctx)
			if in.CustomerID == "123" {
				return customerResult{Found: true, Customer: &customer{Name: "Example Customer", Plan: "pro"}}, nil
			}
			return customerResult{}, nil
		}, &core.ToolOptions{Strict: true})),
		must(core.NewTool("get_plan_price", "Monthly price of a plan.", func(ctx context.Context, in struct {
			Plan string `json:"plan"`
		}) (string, error) {
			h.ran(ctx)
			return fmt.Sprintf("%s costs 20 USD a month", in.Plan), nil
		}, nil)),
		must(core.NewTool("get_weather", "Weather in a city.", func(ctx context.Context, in struct {
			City string `json:"city"`
		}) (string, error) {
			h.ran(ctx)
			if err := h.wait(ctx); err != nil {
				return "", err
			}
			return "sunny in " + in.City, nil
		}, nil)),
		must(core.NewTool("charge_card", "Charge a card.", func(ctx context.Context, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			h.ran(ctx)
			return "", core.ModelErrorf("card declined: insufficient funds for %d", in.Amount)
		}, nil)),
		must(core.NewTool("lookup_order", "Find an order's shipping status.", func(ctx context.Context, in struct {
			OrderID string `json:"order_id"`
		}) (string, error) {
			h.ran(ctx)
			return "order " + in.OrderID + " has shipped", nil
		}, &core.ToolOptions{DeferLoading: true})),
		must(core.NewTool("get_picture", "A picture with a caption.", func(ctx context.Context, _ struct{}) (core.Content, error) {
			h.ran(ctx)
			return core.Content{core.TextPart("a cat"), core.ImagePart("https://example.com/cat.png")}, nil
		}, nil)),
		must(core.NewTool("forget", "Returns nothing.", func(ctx context.Context, _ struct{}) (any, error) {
			h.ran(ctx)
			return nil, nil
		}, nil)),
		must(core.NewTool("block", "Blocks until the run is canceled.", func(ctx context.Context, _ struct{}) (string, error) {
			h.ran(ctx)
			close(blocked(ctx))
			<-ctx.Done()
			return "", ctx.Err()
		}, nil)),
	}
	tb, err := core.NewToolbox(tools...)
	if err != nil {
		h.t.Fatal(err)
	}
	return tb
}

// wait is get_weather's barrier: with setup.barrier n > 1 it returns once n
// calls are waiting, or fails after a generous timeout (which means the
// calls did not run concurrently).
func (h *harness) wait(ctx context.Context) error {
	n := h.opts.barrier
	if n <= 1 {
		return nil
	}
	h.mu.Lock()
	h.arrived++
	if h.arrived == n {
		h.gateOnce.Do(func() { close(h.gate) })
	}
	h.mu.Unlock()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-h.gate:
		return nil
	case <-t.C:
		return errors.New("the calls did not run concurrently")
	case <-ctx.Done():
		return ctx.Err()
	}
}

type blockedKey struct{}

// withBlocked returns a context whose "block" tool closes ch when it
// starts.
func withBlocked(ctx context.Context, ch chan struct{}) context.Context {
	return context.WithValue(ctx, blockedKey{}, ch)
}

func blocked(ctx context.Context) chan struct{} {
	ch, _ := ctx.Value(blockedKey{}).(chan struct{})
	if ch == nil {
		ch = make(chan struct{})
	}
	return ch
}

// call is a scripted call of name with args (a JSON object).
func call(name, args string) coretest.Call {
	return coretest.Call{Name: name, Arguments: json.RawMessage(args)}
}

func calls(c ...coretest.Call) coretest.Step { return coretest.Step{Calls: c} }

func text(s string) coretest.Step { return coretest.Step{Text: s} }

func oneTurn(steps ...coretest.Step) *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: steps}}}
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
