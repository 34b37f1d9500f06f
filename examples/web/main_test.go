package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/examples/internal/shop/pagetest"
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
// by playwright-core, against this example on every embedded fake (see
// pagetest.Try; skipped, saying why, without Node.js, npm ci's packages or
// chromium).
func TestBrowser(t *testing.T) {
	pagetest.Try(t, os.Args[0], "TOOLRELAY_WEB_MAIN=1")
}

// lineWriter hands each write to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

// TestBanner: the banner names what runs: the backend configured and, on
// a fake, that it talks to a fake service (it named the real backend's
// name, "openai", while the fake ran).
func TestBanner(t *testing.T) {
	page := t.TempDir()
	if err := os.MkdirAll(filepath.Join(page, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(page, "dist", "app.js"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ backend, want string }{
		{"", "Chat with the agent (fake-openai: the openai backend on a fake service on this machine, its model scripted) at http://127.0.0.1:"},
		{"fake-foundry", "Chat with the agent (fake-foundry: the foundry backend on a fake service on this machine, its model scripted) at http://127.0.0.1:"},
		{"fake-responses", "Chat with the agent (fake-responses: the responses backend on a fake service on this machine, its model scripted) at http://127.0.0.1:"},
	} {
		name := tc.backend
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Setenv("TOOLRELAY_BACKEND", tc.backend)
			ctx, cancel := context.WithCancel(t.Context())
			out := make(lineWriter, 16)
			done := make(chan error, 1)
			go func() { done <- run(ctx, "127.0.0.1:0", page, out) }()
			select {
			case line := <-out:
				if !strings.HasPrefix(line, tc.want) {
					t.Errorf("banner %q, want it to begin %q", line, tc.want)
				}
			case err := <-done:
				t.Fatalf("run ended before its banner: %v", err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
}
