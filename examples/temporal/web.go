package main

import (
	"context"
	"io"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/toolrelay/toolrelay/examples/internal/shop"
	"github.com/toolrelay/toolrelay/temporal"
)

// webQueue is the task queue of the -web flow's worker.
const webQueue = "toolrelay-shop"

// serveWeb serves the chat page of examples/web over the Temporal runner
// on addr, until ctx ends: an in-process Temporal server, a worker of the
// shop's loop (over the configured backend, fake-openai unless
// configured), and package web's handler over temporal.Runner. It prints
// the URL, and each refund made, on out.
func serveWeb(ctx context.Context, addr, page string, out io.Writer) error {
	if err := shop.CheckPage(page); err != nil {
		return err
	}
	loop, banner, err := shop.Open(ctx, out, quiet)
	if err != nil {
		return err
	}
	defer loop.Close()
	srv := temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: tlog.NewStructuredLogger(quiet)}))
	defer srv.Stop()
	c := srv.GetDefaultClient()
	w := worker.New(c, webQueue, worker.Options{})
	temporal.Register(w, loop)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	runner := temporal.NewRunner(c, &temporal.Options{TaskQueue: webQueue})
	return shop.Serve(ctx, addr, page, runner, banner+", on Temporal", out)
}
