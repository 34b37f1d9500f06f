// Command temporal runs the refund flow (a refund over 100 waits for a
// person's approval) as a Temporal workflow: a worker runs the loop, a
// client runs the turn, which pauses on the refund; a second process
// decides it; the turn goes on, and its answer is collected.
//
// With -dev (the default when TEMPORAL_ADDRESS is not set) it starts an
// in-process Temporal test server and plays every role itself, the
// decision coming from a copy of itself started as a second process:
//
//	go run . -dev
//
// With -web it serves the chat page of examples/web (built there with
// `npm ci && npm run build`) over the Temporal runner, on an in-process
// server: package web serves temporal.Runner as it serves core's.
//
//	go run . -web
//
// Against a server named by TEMPORAL_ADDRESS, one process per role:
//
//	go run . -role worker &
//	go run . -role run                          # prints the thread and the pending call
//	go run . -role decide -thread T -call C     # -deny to refuse
//	go run . -role resume -thread T
//
// The worker's backend is the embedded fake Agents API (fake-openai) unless
// configured otherwise (TOOLRELAY_BACKEND, as for every example).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/toolrelay/toolrelay/adapter"
	_ "github.com/toolrelay/toolrelay/all" // every backend and journal
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/examples/internal/shop"
	"github.com/toolrelay/toolrelay/temporal"
)

const queue = "toolrelay-refund"

// script is what the fake agent does: refund order 7 (150) and look it up
// in one step, then report both.
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{
		{Name: "refund", Arguments: json.RawMessage(`{"order": "7", "amount": 150}`)},
		{Name: "lookup_order", Arguments: json.RawMessage(`{"order": "7"}`)},
	}},
	{Text: `Refund: {{output "refund"}}. Order: {{output "lookup_order"}}.`},
}}}}

type refundArgs struct {
	Order  string `json:"order" jsonschema:"The order's number"`
	Amount int    `json:"amount" jsonschema:"The amount to refund"`
}

type orderArgs struct {
	Order string `json:"order" jsonschema:"The order's number"`
}

func newTools() (*core.Toolbox, error) {
	refund, err := core.NewTool("refund", "Refund (part of) an order.", func(_ context.Context, in refundArgs) (string, error) {
		return fmt.Sprintf("refunded %d on order %s", in.Amount, in.Order), nil
	}, &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) {
		return in.Amount > 100, fmt.Sprintf("a refund of %d is over the limit of 100", in.Amount)
	})})
	if err != nil {
		return nil, err
	}
	lookup, err := core.NewTool("lookup_order", "Look up an order.", func(_ context.Context, in orderArgs) (string, error) {
		return "order " + in.Order + ": 1 espresso machine, 150", nil
	}, &core.ToolOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(refund, lookup)
}

var quiet = slog.New(slog.DiscardHandler)

// flags are the program's flags.
type flags struct {
	dev          bool
	web          bool
	addr, page   string
	role         string
	address, ns  string
	thread, call string
	deny         bool
}

func main() {
	var f flags
	flag.BoolVar(&f.dev, "dev", os.Getenv("TEMPORAL_ADDRESS") == "", "start an in-process Temporal test server and play every role")
	flag.StringVar(&f.role, "role", "", "worker, run, decide or resume (against TEMPORAL_ADDRESS)")
	flag.StringVar(&f.address, "address", os.Getenv("TEMPORAL_ADDRESS"), "the Temporal server's host:port")
	flag.StringVar(&f.ns, "namespace", "default", "the Temporal namespace")
	flag.StringVar(&f.thread, "thread", "", "the thread (decide, resume)")
	flag.StringVar(&f.call, "call", "", "the call to decide")
	flag.BoolVar(&f.deny, "deny", false, "deny the call (decide)")
	flag.BoolVar(&f.web, "web", false, "serve the chat page of examples/web over the Temporal runner, on an in-process server")
	flag.StringVar(&f.addr, "addr", "127.0.0.1:8080", "the address to serve the page on (-web)")
	flag.StringVar(&f.page, "page", shop.PageDir(), "the page's folder, with dist/ built (-web)")
	flag.Parse()
	if f.web {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		if err := serveWeb(ctx, f.addr, f.page, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	if f.role != "" {
		f.dev = false
	}
	if err := run(context.Background(), f, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run plays f's role, or with f.dev every role, writing to out.
func run(ctx context.Context, f flags, out io.Writer) error {
	if f.dev {
		return dev(ctx, out)
	}
	c, err := client.Dial(client.Options{HostPort: f.address, Namespace: f.ns, Logger: tlog.NewStructuredLogger(quiet)})
	if err != nil {
		return err
	}
	defer c.Close()
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue})
	switch f.role {
	case "worker":
		stop, err := startWorker(ctx, c)
		if err != nil {
			return err
		}
		defer stop()
		<-worker.InterruptCh()
		return nil
	case "run":
		res, err := r.Run(ctx, "Refund order 7 in full, and tell me what it was.", nil)
		return report(out, res, err)
	case "decide":
		err := r.Decide(ctx, f.thread, f.call, core.Decision{Approved: !f.deny, Actor: fmt.Sprintf("process %d", os.Getpid())})
		if err == nil {
			fmt.Fprintf(out, "decided %s of %s: approved=%v\n", f.call, f.thread, !f.deny)
		}
		return err
	case "resume":
		res, err := r.Resume(ctx, f.thread, nil)
		return report(out, res, err)
	}
	return fmt.Errorf("unknown role %q", f.role)
}

// report prints a turn's answer, or its pending calls.
func report(out io.Writer, res *core.Result, err error) error {
	if errors.Is(err, core.ErrAwaitingApproval) {
		for _, a := range res.Pending {
			fmt.Fprintf(out, "thread %s: call %s (%s %s) awaits a decision: %s\n", res.Thread, a.Key.Call, a.Tool, a.Arguments, a.Why)
		}
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, res.Text)
	return nil
}

// startWorker runs a worker of the loop over the configured backend (the
// fake Agents API by default).
func startWorker(ctx context.Context, c client.Client) (stop func(), err error) {
	tools, err := newTools()
	if err != nil {
		return nil, err
	}
	runner, err := adapter.Open(ctx, tools, &adapter.Options{
		DefaultBackend:  "fake-openai",
		BackendSettings: []any{coretest.FakeSettings{Script: script}},
		Runner:          core.Options{Logger: quiet},
	})
	if err != nil {
		return nil, err
	}
	w := worker.New(c, queue, worker.Options{})
	temporal.Register(w, runner)
	if err := w.Start(); err != nil {
		runner.Close()
		return nil, err
	}
	return func() { w.Stop(); runner.Close() }, nil
}

// dev plays every role against an in-process server: the decision comes
// from a second process, a copy of this program.
func dev(ctx context.Context, out io.Writer) error {
	srv := temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: tlog.NewStructuredLogger(quiet)}))
	defer srv.Stop()
	c := srv.GetDefaultClient()
	stop, err := startWorker(ctx, c)
	if err != nil {
		return err
	}
	defer stop()
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue})
	res, err := r.Run(ctx, "Refund order 7 in full, and tell me what it was.", nil)
	if err := report(out, res, err); err != nil {
		return err
	}
	if err == nil {
		return nil
	}
	for _, a := range res.Pending {
		fmt.Fprintf(out, "asking a second process to approve %s\n", a.Key.Call)
		cmd := exec.CommandContext(ctx, self(), "-role", "decide", "-address", srv.GetFrontendHostPort(), "-namespace", srv.GetDefaultNamespace(), "-thread", res.Thread, "-call", a.Key.Call)
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("the deciding process: %w", err)
		}
	}
	res, err = r.Resume(ctx, res.Thread, nil)
	return report(out, res, err)
}

// self is this program's executable; a test sets it to a built copy.
var self = func() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}
