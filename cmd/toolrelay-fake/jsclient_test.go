package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOfficialJSClient runs clients/js: the official openai npm package
// driving this command (the test binary, which runs main when
// TOOLRELAY_FAKE_MAIN is set) through the flows of the services'
// documentation. It needs Node.js and the packages `npm ci` installs in
// clients/js (.ci/run does it); without them it is skipped.
func TestOfficialJSClient(t *testing.T) {
	dir, err := filepath.Abs("../../clients/js")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed: the official JavaScript client is not tried")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		t.Skip("clients/js has no node_modules: run `npm ci` there (as .ci/run does) to try the official JavaScript client")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE="+os.Args[0], "TOOLRELAY_FAKE_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in clients/js: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
