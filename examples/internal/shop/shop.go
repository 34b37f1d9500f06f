// Package shop is the shop of the examples that serve the chat page of
// examples/web: its agent's tools (orders looked up; refunds, those over
// 100 awaiting a person's approval), the fake model's script, and the
// page's routes over any runner package web serves. examples/web serves
// it over core's Runner, examples/temporal (-web) over the Temporal
// runner, and both try the page in a browser with package pagetest.
package shop

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest" // fake-foundry, fake-responses, foundry, responses
	_ "github.com/toolrelay/toolrelay/openai/openaitest"   // fake-openai, openai
	"github.com/toolrelay/toolrelay/responses"
	"github.com/toolrelay/toolrelay/web"
)

// instructions are the agent's.
const instructions = "You help customers with their orders: look them up, and refund them when asked."

// script is what the fake model does: look both orders up and tell about
// them, slowly enough to watch; then refund both and report.
var script = &coretest.Script{DeltaSize: 4, DeltaPauseMS: 30, Turns: []coretest.Turn{
	{Steps: []coretest.Step{
		{Reasoning: "The customer asks about two orders: look both up.", Calls: []coretest.Call{
			{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)},
			{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "8"}`)},
		}},
		{Text: "Order 7 is {{result 0}}. Order 8 is {{result 1}}. Both were delivered last week, " +
			"the espresso machine on Monday and the grinder on Wednesday. " +
			"If either of them is not what you expected, I can refund it in full: just ask."},
	}},
	{Steps: []coretest.Step{
		{Calls: []coretest.Call{
			{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)},
			{Name: "refund", Arguments: json.RawMessage(`{"order": "8", "amount": 120}`)},
		}},
		{Text: "Order 7: {{result 0}}. Order 8: {{result 1}}."},
	}},
}}

type refundArgs struct {
	Order  string `json:"order" jsonschema:"The order's number"`
	Amount int    `json:"amount" jsonschema:"The amount to refund"`
}

type orderArgs struct {
	Order string `json:"order" jsonschema:"The order's number"`
}

var orders = map[string]string{"7": "1 espresso machine, 150", "8": "1 coffee grinder, 120"}

// newTools returns the agent's tools; each refund made is printed on out.
func newTools(out io.Writer) (*core.Toolbox, error) {
	var mu sync.Mutex
	refund, err := core.NewTool("refund", "Refund (part of) an order.", func(_ context.Context, in refundArgs) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "refunded %d on order %s\n", in.Amount, in.Order)
		return fmt.Sprintf("refunded %d on order %s", in.Amount, in.Order), nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) {
		return in.Amount > 100, fmt.Sprintf("a refund of %d is over the limit of 100", in.Amount)
	})})
	if err != nil {
		return nil, err
	}
	lookup, err := core.NewTool("lookup_order", "Look up an order.", func(_ context.Context, in orderArgs) (string, error) {
		if o, ok := orders[in.Order]; ok {
			return o, nil
		}
		return "", core.ModelErrorf("there is no order %s", in.Order)
	}, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(refund, lookup)
}

// backendSettings are the backends' settings (adapter.Options.BackendSettings):
// the fake model's script, and streaming on the backends that can stream
// either way, unless the environment chooses.
func backendSettings() []any {
	s := []any{coretest.FakeSettings{Script: script}}
	if os.Getenv("TOOLRELAY_FOUNDRY_TRANSPORT") == "" {
		s = append(s, foundry.Settings{Delivery: string(foundry.Streaming)})
	}
	if os.Getenv("TOOLRELAY_RESPONSES_TRANSPORT") == "" {
		s = append(s, responses.Settings{Delivery: string(responses.Streaming)})
	}
	return s
}

// PageDir is the page's folder: examples/web/page, with dist/ built by
// `npm ci && npm run build` in examples/web.
func PageDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "web", "page")
}

// visitor names the caller by a cookie of its own, set on the first visit
// to the page: the examples' stand-in for a program's signed-in user.
const visitor = "toolrelay-visitor"

func identity(r *http.Request) (string, error) {
	c, err := r.Cookie(visitor)
	if err != nil {
		return "", err
	}
	return c.Value, nil
}

// newMux returns the page's routes: the page, its bundle (from page, the
// folder PageDir names), and the chat's API over runner.
func newMux(runner web.Runner, page string) *http.ServeMux {
	mux := http.NewServeMux()
	chat := web.Handler(runner, &web.Options{Identity: identity})
	mux.Handle("/api/chat", chat)
	mux.Handle("/api/chat/", chat)
	mux.Handle("GET /dist/", http.FileServer(http.Dir(page)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := r.Cookie(visitor); err != nil {
			http.SetCookie(w, &http.Cookie{Name: visitor, Value: rand.Text(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
		http.ServeFile(w, r, filepath.Join(page, "index.html"))
	})
	return mux
}

// CheckPage returns an error saying how to build the page if page holds
// no bundle.
func CheckPage(page string) error {
	if _, err := os.Stat(filepath.Join(page, "dist", "app.js")); err != nil {
		return fmt.Errorf("the page is not built (%w): run `npm ci && npm run build` in %s", err, filepath.Dir(page))
	}
	return nil
}

// bannerOf says what runs: the backend configured (name), and, for a fake,
// that the backend (be) talks to a fake service whose model is scripted.
func bannerOf(name, be string) string {
	if strings.HasPrefix(name, "fake-") {
		return fmt.Sprintf("%s: the %s backend on a fake service on this machine, its model scripted", name, be)
	}
	return name
}

// Open opens the shop's loop: its tools (each refund made printed on
// out) over the backend configured in the environment (TOOLRELAY_BACKEND,
// fake-openai if none), logging to logger. It returns the runner, to
// close, and the banner saying what runs (see bannerOf).
func Open(ctx context.Context, out io.Writer, logger *slog.Logger) (*core.Runner, string, error) {
	tools, err := newTools(out)
	if err != nil {
		return nil, "", err
	}
	opts := &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: backendSettings(),
		Settings:        adapter.Settings{Instructions: instructions},
		Runner:          core.Options{Logger: logger},
	}
	cfg, err := adapter.Load(&opts.Settings)
	if err != nil {
		return nil, "", err
	}
	runner, err := adapter.Open(ctx, tools, opts)
	if err != nil {
		return nil, "", err
	}
	return runner, bannerOf(cmp.Or(cfg.Backend, opts.DefaultBackend), runner.Backend().Name()), nil
}

// Serve serves the page (from page, the folder PageDir names) and the
// chat over runner on addr until ctx ends, once it printed on out where:
// "Chat with the agent (banner) at URL".
func Serve(ctx context.Context, addr, page string, runner web.Runner, banner string, out io.Writer) error {
	if err := CheckPage(page); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newMux(runner, page)}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	fmt.Fprintf(out, "Chat with the agent (%s) at http://%s/\n", banner, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
