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
	"context"
	"flag"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"github.com/toolrelay/toolrelay/examples/internal/shop"
)

// run serves the page on addr until ctx ends, printing the URL and each
// refund on out.
func run(ctx context.Context, addr, page string, out io.Writer) error {
	if err := shop.CheckPage(page); err != nil {
		return err
	}
	runner, banner, err := shop.Open(ctx, out, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer runner.Close()
	return shop.Serve(ctx, addr, page, runner, banner, out)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the address to serve the page on")
	page := flag.String("page", shop.PageDir(), "the page's folder (with dist/ built)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *page, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
