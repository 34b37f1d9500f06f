// Package nodetest runs the tests of an official JavaScript client
// (node --test in a folder of clients/, its packages installed by npm ci)
// against a server in the Go test that calls it, or skips the test,
// saying why, when Node.js or the packages are missing.
package nodetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Run runs `node --test` in dir (relative to the test's package) with
// env added to the test's environment, for at most two minutes, and
// fails t with its output if it fails. It skips t when Node.js is not
// installed, or when dir's node_modules lacks pkg (an npm package name):
// what names client says which client is then not tried.
func Run(t *testing.T, dir, pkg, client string, env ...string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("Node.js is not installed: %s is not tried", client)
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", filepath.FromSlash(pkg))); err != nil {
		t.Skipf("%s has no node_modules/%s: run `npm ci` there (as .ci/run does) to try %s", dir, pkg, client)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in %s: %v\n%s", dir, err, out)
	}
	t.Logf("%s", out)
}
