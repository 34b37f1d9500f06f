// Command toolrelay-fake serves a fake OpenAI Agents API or Azure AI
// Foundry project on loopback, whose model plays a script, so that programs
// in any language can test their tool loop against it with their usual
// client:
//
//	go run ./cmd/toolrelay-fake -backend foundry -script testdata/weather.json -addr 127.0.0.1:0
//
// It prints, one per line, the settings a client needs, in the form
// NAME=value:
//
//	BASE_URL=…         the base URL to give the client (for openai, the
//	                   OpenAI base URL, as OPENAI_BASE_URL; for foundry, the
//	                   project endpoint, as AZURE_AI_PROJECT_ENDPOINT)
//	OPENAI_BASE_URL=…  for foundry: the base of its OpenAI-compatible routes
//	CERT=…             for foundry, which serves HTTPS: the path of its
//	                   certificate (PEM), for the client to trust
//
// then serves until interrupted (and then removes the certificate it wrote
// to a temporary folder). Any non-empty bearer token is accepted.
// The Foundry fake also serves the plain Responses API (requests that name
// a model instead of an agent); -backend responses serves the same, its
// BASE_URL the OpenAI base URL.
// The script is a model script of package coretest in JSON; testdata/ holds
// one for each flow of the services' documentation (customer.json,
// horoscope.json, weather.json).
//
// # Replay
//
// -replay FILE serves a cassette recorded by any program with
// TOOLRELAY_REPLAY=record:FILE (package replay) instead of a script, over
// plain HTTP on loopback, so that a client in any language replays what a
// run sent and got: BASE_URL=http://HOST:PORT, every path as recorded
// (append the recorded base path, such as /v1). It fails closed: a
// request that was not recorded, or comes out of its thread's order, gets
// 400 with a JSON error {"error": {"type": "replay_mismatch", "message":
// …}} whose message names the nearest recorded request and shows the
// difference.
//
//	go run ./cmd/toolrelay-fake -replay examples/customer/testdata/customer.yaml
//
// # Checking a fake
//
// -check FILE sends the requests of a cassette (recorded against the real
// service, say) to a fake and prints where the fake's answers differ from
// the recorded ones (replaycheck.Check): each difference names the recorded
// interaction and the JSON paths, and shows the values (-recorded
// +target). With -script, the fake is the one of the cassette's backend
// (openai, or foundry when its requests name a Foundry project; -backend
// to choose) started in this process, playing the script the recording's
// model played; with -target URL, the fake already serving there. The
// exit status is 0 when every answer is the recorded one, 1 when some
// differ, 2 when the check could not be made (a file that cannot be read,
// a fake that does not answer, a bad flag).
//
//	go run ./cmd/toolrelay-fake -check examples/customer/testdata/customer.yaml -script testdata/customer.json
//
// # Faults
//
// -faults names a JSON file of faults to inject, in the vocabulary of the
// Go fakes' Fault types (openaitest.Fault, foundrytest.Fault): an array of
//
//	{"on": "POST openai/v1/responses",  which requests: "METHOD path" (* is one
//	                                    path segment), a Foundry operation
//	                                    ("responses.create"), or "*"
//	 "nth": 2, "times": 1,              the 2nd matching request, and 1 in all
//	 "status": 429, "retry_after_ms": 1000, "code": "...", "message": "...",
//	 "drop": true,                      served, then the answer dropped
//	 "close_after": 3,                  a sessions event stream closed after 3 events
//	 "cut_text": 2,                     a stream dropped after 2 text deltas
//	 "duplicate": true,                 a stream's events written twice (the
//	                                    sessions fake: every stream's)
//	 "delay_ms": 200}                   the request held first
//
// For example, the second request for results of a session answered 429:
//
//	[{"on": "POST agents/sessions/*/events", "nth": 2, "status": 429, "retry_after_ms": 10}]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/replay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var ee *exitError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	case errors.As(err, &ee):
		if ee != errDiffer {
			fmt.Fprintf(os.Stderr, "toolrelay-fake: %v\n", err)
		}
		os.Exit(ee.code)
	default:
		log.SetFlags(0)
		log.Fatalf("toolrelay-fake: %v", err)
	}
}

// run serves a fake until ctx ends. -h prints the usage to stdout and
// returns flag.ErrHelp.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("toolrelay-fake", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: toolrelay-fake -backend openai|foundry|responses -script FILE [-addr 127.0.0.1:0] [-faults FILE] [-cert FILE]\n"+
			"       toolrelay-fake -replay FILE [-addr 127.0.0.1:0]\n"+
			"       toolrelay-fake -check FILE (-script FILE [-backend openai|foundry|responses] | -target URL)\n\n"+
			"Serves a fake service on loopback whose model plays the script, and prints\n"+
			"BASE_URL=… (and OPENAI_BASE_URL=…, CERT=… for foundry and responses).\n"+
			"With -replay, serves a recorded cassette (package replay) over plain HTTP\n"+
			"instead, every path as recorded, and prints BASE_URL=http://HOST:PORT.\n"+
			"With -check, sends a cassette's requests to a fake (one started here playing\n"+
			"-script, or the one at -target) and prints where its answers differ from the\n"+
			"recorded ones; exit status 0 when none do, 1 when some do, 2 on an error.\n\n")
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard)
	backend := fs.String("backend", "", "the service to fake: openai, foundry or responses")
	faultsPath := fs.String("faults", "", "a JSON file of faults to inject (see the package doc)")
	scriptPath := fs.String("script", "", "the model script to play (coretest JSON)")
	addr := fs.String("addr", "127.0.0.1:0", "the loopback address to listen on")
	replayPath := fs.String("replay", "", "a cassette to serve (recorded with TOOLRELAY_REPLAY=record:FILE) instead of a script")
	checkPath := fs.String("check", "", "a cassette whose requests to send to a fake, printing where its answers differ from the recorded ones")
	target := fs.String("target", "", "with -check: the base URL of a fake already serving (scheme, host and port), instead of one started here")
	certPath := fs.String("cert", "", "where to write the certificate (foundry, responses); default: a temporary file, removed on exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return err
		}
		err = fmt.Errorf("%v (-h for help)", err)
		if checking(args) {
			return checkUsage(err)
		}
		return err
	}
	if *checkPath != "" {
		return check(ctx, *checkPath, *target, *backend, *scriptPath, stdout)
	}
	if *replayPath != "" {
		return serveCassette(ctx, *replayPath, *addr, stdout)
	}
	if *scriptPath == "" {
		return errors.New("-script is required")
	}
	script, err := coretest.LoadScript(*scriptPath)
	if err != nil {
		return err
	}
	faults, err := loadFaults(*faultsPath)
	if err != nil {
		return err
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	switch *backend {
	case "foundry", "responses":
		srv := foundrytest.NewServer(script, &foundrytest.Options{Listener: ln, Plain: true, Fault: foundryFaults(faults)})
		defer srv.Close()
		path, cleanup, err := writeCert(*certPath, srv.CertificatePEM())
		if err != nil {
			return err
		}
		defer cleanup()
		base := srv.ProjectEndpoint()
		if *backend == "responses" {
			base = srv.OpenAIBaseURL()
		}
		fmt.Fprintf(stdout, "BASE_URL=%s\nOPENAI_BASE_URL=%s\nCERT=%s\n", base, srv.OpenAIBaseURL(), path)
	case "openai":
		srv := serveOpenAI(script, ln, faults)
		defer srv.Close()
		fmt.Fprintf(stdout, "BASE_URL=%s\n", srv.URL)
	default:
		ln.Close()
		return fmt.Errorf("-backend must be openai, foundry or responses, not %q", *backend)
	}
	<-ctx.Done()
	return nil
}

// checking reports whether args ask for -check.
func checking(args []string) bool {
	for _, a := range args {
		if a == "-check" || a == "--check" || strings.HasPrefix(a, "-check=") || strings.HasPrefix(a, "--check=") {
			return true
		}
	}
	return false
}

// serveCassette serves the cassette at path on addr until ctx ends.
func serveCassette(ctx context.Context, path, addr string, stdout io.Writer) error {
	c, err := replay.OpenFile(replay.Replay, path, nil)
	if err != nil {
		return err
	}
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(stdout, "BASE_URL=http://%s\n", ln.Addr())
	<-ctx.Done()
	return nil
}

// listen listens on addr, which must be a loopback address.
func listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("-addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-addr %q: the fake serves loopback addresses only", addr)
	}
	return net.Listen("tcp", addr)
}

// writeCert writes the certificate to path, or, without one, to a new
// temporary folder that cleanup removes.
func writeCert(path string, pem []byte) (written string, cleanup func(), err error) {
	cleanup = func() {}
	if path == "" {
		dir, err := os.MkdirTemp("", "toolrelay-fake-")
		if err != nil {
			return "", cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		path = filepath.Join(dir, "cert.pem")
	}
	if err := os.WriteFile(path, pem, 0o644); err != nil {
		cleanup()
		return "", func() {}, err
	}
	return path, cleanup, nil
}
