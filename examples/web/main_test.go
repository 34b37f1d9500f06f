package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The test binary doubles as the example: with TOOLRELAY_WEB_MAIN set, it
// runs main.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLRELAY_WEB_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBrowser runs browser.test.mjs: the page in Debian's chromium, driven
// by playwright-core, against this example on every embedded fake. It needs
// Node.js, the packages `npm ci` installs here, and chromium (.ci/run
// installs them); without them it is skipped.
func TestBrowser(t *testing.T) {
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
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core")); err != nil {
		t.Skip("examples/web has no node_modules: run `npm ci` there (as .ci/run does) to try the page in a browser")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "npm", "run", "build")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("npm run build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "browser.test.mjs")
	cmd.Env = append(os.Environ(), "TOOLRELAY_WEB_EXAMPLE="+os.Args[0], "TOOLRELAY_WEB_MAIN=1", "CHROMIUM="+browser)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test browser.test.mjs: %v\n%s", err, out)
	}
	t.Logf("the browser test took %v\n%s", time.Since(t0).Round(time.Millisecond), out)
}
