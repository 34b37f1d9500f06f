package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// The test binary doubles as the command: with TOOLRELAY_JOURNAL_MAIN set,
// it runs main instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLRELAY_JOURNAL_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHelp: -h (before or after the command) prints the usage on stdout,
// on lines a terminal shows whole, and exits 0; a wrong command line gets
// the same usage on stderr and exit status 2.
func TestHelp(t *testing.T) {
	tests := []struct {
		args       []string
		wantStatus int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-help"}, 0},
		{[]string{"-journal", "sqlite://" + t.TempDir() + "/j.db", "runs", "-h"}, 0},
		{[]string{"runs"}, 2},
	}
	for _, tt := range tests {
		cmd := exec.Command(os.Args[0], tt.args...)
		cmd.Env = append(os.Environ(), "TOOLRELAY_JOURNAL_MAIN=1", "TOOLRELAY_JOURNAL=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tt.wantStatus {
			t.Errorf("%v: exit status %d, want %d (stderr %q)", tt.args, status, tt.wantStatus, stderr.String())
		}
		usage := stdout.String()
		if tt.wantStatus != 0 {
			usage = stderr.String()
		} else if stderr.Len() > 0 {
			t.Errorf("%v: stderr %q, want nothing", tt.args, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(usage), "\n")
		if !strings.Contains(usage, "usage: toolrelay-journal") || len(lines) < 10 {
			t.Errorf("%v: %d lines, want the usage on several:\n%s", tt.args, len(lines), usage)
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("%v: a usage line of %d characters: %q", tt.args, n, l)
			}
		}
	}
}
