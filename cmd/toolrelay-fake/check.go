package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/replay/replaycheck"
)

// exitError is an error with the exit status it ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errDiffer is -check's result when the fake's answers differ from the
// recorded ones (they are printed): exit status 1.
var errDiffer = &exitError{code: 1, err: errors.New("the fake's answers differ from the recorded ones")}

// checkUsage is an error of -check's usage or input: exit status 2.
func checkUsage(err error) error { return &exitError{code: 2, err: err} }

// projectRE finds the Foundry project a cassette's requests name.
var projectRE = regexp.MustCompile(`/api/projects/([^/\s?"']+)`)

// check runs -check: it sends the cassette's requests to target, or to a
// fake of backend playing the script at scriptPath started in this
// process, and prints where the answers differ.
func check(ctx context.Context, file, target, backend, scriptPath string, stdout io.Writer) error {
	var client *http.Client
	if target == "" {
		if scriptPath == "" {
			return checkUsage(errors.New("-check needs -target URL (a fake already serving) or -script FILE (the script the cassette was recorded with, for a fake started here)"))
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return checkUsage(fmt.Errorf("-check: %w", err))
		}
		script, err := coretest.LoadScript(scriptPath)
		if err != nil {
			return checkUsage(err)
		}
		project := ""
		if m := projectRE.FindSubmatch(b); m != nil {
			project = string(m[1])
		}
		if backend == "" {
			backend = "openai"
			if project != "" {
				backend = "foundry"
			}
		}
		switch backend {
		case "openai":
			srv := openaitest.NewServer(script, nil)
			defer srv.Close()
			target = strings.TrimSuffix(srv.URL, "/v1")
		case "foundry", "responses":
			srv := foundrytest.NewServer(script, &foundrytest.Options{Project: project, Plain: true})
			defer srv.Close()
			target, client = srv.URL, srv.Client()
		default:
			return checkUsage(fmt.Errorf("-backend must be openai, foundry or responses, not %q", backend))
		}
	}
	diffs, err := replaycheck.Check(ctx, file, target, &replaycheck.CheckOptions{Client: client})
	if err != nil {
		return checkUsage(err)
	}
	for _, d := range diffs {
		fmt.Fprintf(stdout, "%s\n", d)
	}
	if len(diffs) > 0 {
		fmt.Fprintf(stdout, "%s: the answers to %d of its requests differ from the recorded ones\n", file, len(diffs))
		return errDiffer
	}
	fmt.Fprintf(stdout, "%s: every answer is the recorded one\n", file)
	return nil
}
