// Command web is a chat in the browser: a page made with the AI SDK's
// official chat client (npm ai 7.x) talks to an agent that looks orders
// up and refunds them, through package web. The page streams the answer,
// shows each call as it starts and finishes, and asks for a person's
// Approve or Deny on refunds over 100; a reload in the middle of an
// answer picks it up where it was.
//
// The page (page/app.js) is bundled with esbuild from npm, at build time:
// the bundle (page/dist) is not committed. Once:
//
//	cd examples/web && npm ci && npm run build
//
// then, from the repository's root:
//
//	go run ./examples/web
//
// prints the URL to open. With no configuration it runs on the embedded
// fake Agents API (fake-openai), whose scripted model answers the first
// question (try "What happened to my orders 7 and 8?") by looking both
// orders up, and the second ("Refund both orders in full.") by refunding
// both, each waiting for a click. Any backend by configuration:
//
//	TOOLRELAY_BACKEND=fake-foundry go run ./examples/web
//	TOOLRELAY_BACKEND=fake-responses go run ./examples/web
//	TOOLRELAY_BACKEND=openai OPENAI_API_KEY=… go run ./examples/web
//
// Each refund that runs is printed on standard output. Every visitor gets
// an identity of their own, in a cookie; a real program names its signed-in
// user instead (web.Options.Identity).
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
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

// settings asks the backends that can stream either way to stream, unless
// the environment chooses.
func settings() []any {
	s := []any{coretest.FakeSettings{Script: script}}
	if os.Getenv("TOOLRELAY_FOUNDRY_TRANSPORT") == "" {
		s = append(s, foundry.Settings{Delivery: string(foundry.Streaming)})
	}
	if os.Getenv("TOOLRELAY_RESPONSES_TRANSPORT") == "" {
		s = append(s, responses.Settings{Delivery: string(responses.Streaming)})
	}
	return s
}

// pageDir is the page's folder, beside this file.
func pageDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "page")
}

// visitor names the caller by a cookie of its own, set on the first visit
// to the page: the example's stand-in for a program's signed-in user.
const visitor = "toolrelay-visitor"

func identity(r *http.Request) (string, error) {
	c, err := r.Cookie(visitor)
	if err != nil {
		return "", err
	}
	return c.Value, nil
}

// newMux returns the example's routes: the page, its bundle, and the
// chat's API over runner.
func newMux(runner *core.Runner, page string) *http.ServeMux {
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

// run serves the page on addr until ctx ends, printing the URL and each
// refund on out.
func run(ctx context.Context, addr, page string, out io.Writer) error {
	if _, err := os.Stat(filepath.Join(page, "dist", "app.js")); err != nil {
		return fmt.Errorf("the page is not built (%w): run `npm ci && npm run build` in %s", err, filepath.Dir(page))
	}
	tools, err := newTools(out)
	if err != nil {
		return err
	}
	opts := &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: settings(),
		Settings:        adapter.Settings{Instructions: "You help customers with their orders: look them up, and refund them when asked."},
		Runner:          core.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))},
	}
	cfg, err := adapter.Load(&opts.Settings)
	if err != nil {
		return err
	}
	runner, err := adapter.Open(ctx, tools, opts)
	if err != nil {
		return err
	}
	defer runner.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newMux(runner, page)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(out, "Chat with the agent (%s) at http://%s/\n", banner(cmp.Or(cfg.Backend, opts.DefaultBackend), runner.Backend().Name()), ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// banner says what runs: the backend configured (name), and, for a fake,
// that the backend (be) talks to a fake service whose model is scripted.
func banner(name, be string) string {
	if strings.HasPrefix(name, "fake-") {
		return fmt.Sprintf("%s: the %s backend on a fake service on this machine, its model scripted", name, be)
	}
	return name
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the address to serve the page on")
	page := flag.String("page", pageDir(), "the page's folder (with dist/ built)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *page, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
