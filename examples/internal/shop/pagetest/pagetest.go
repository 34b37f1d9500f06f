// Package pagetest tries the chat page of examples/web in a browser
// against a program that serves it (see package shop): examples/web's own,
// and examples/temporal's over the Temporal runner.
package pagetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/examples/internal/shop"
)

// Try runs examples/web/browser.test.mjs: the page in Debian's
// chromium, driven by playwright-core, against the program example (a
// command line, its words split on spaces) on every embedded fake, with
// env added to the environment. The program serves the page on the
// address of its -addr flag, prints its URL ("… at http://…") and each
// refund it makes (see shop.Open). Try needs Node.js, the packages `npm
// ci` installs in examples/web, and chromium (.ci/run installs them);
// without them the test is skipped, saying why.
func Try(t *testing.T, example string, env ...string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("Node.js is not installed: the page is not tried in a browser")
	}
	browser := os.Getenv("CHROMIUM")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	if _, err := os.Stat(browser); err != nil {
		t.Skipf("no chromium at %s (apt-get install chromium, as .ci/run does): the page is not tried in a browser", browser)
	}
	dir := filepath.Dir(shop.PageDir())
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Skipf("%s has no node_modules: run `npm ci` there (as .ci/run does) to try the page in a browser", dir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "npm", "run", "build")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("npm run build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "browser.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TOOLRELAY_WEB_EXAMPLE="+example, "CHROMIUM="+browser), env...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test browser.test.mjs: %v\n%s", err, out)
	}
	t.Logf("the browser test took %v\n%s", time.Since(t0).Round(time.Millisecond), out)
}
