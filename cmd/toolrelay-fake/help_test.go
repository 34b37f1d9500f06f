package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelp: -h prints the usage and the flags on stdout and exits 0,
// without "flag: help requested"; an unknown flag exits 1 and says how to
// get help.
func TestHelp(t *testing.T) {
	for _, tt := range []struct {
		arg        string
		wantStatus int
		want       string
	}{
		{"-h", 0, "usage: toolrelay-fake"},
		{"-help", 0, "-script string"},
		{"-nope", 1, "flag provided but not defined: -nope (-h for help)"},
	} {
		cmd := exec.Command(os.Args[0], tt.arg)
		cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		out := stdout.String() + stderr.String()
		if status != tt.wantStatus || !strings.Contains(out, tt.want) || strings.Contains(out, "help requested") {
			t.Errorf("%s: exit status %d, output %q; want status %d and %q", tt.arg, status, out, tt.wantStatus, tt.want)
		}
		if tt.wantStatus == 0 && stderr.Len() > 0 {
			t.Errorf("%s: stderr %q, want the usage on stdout only", tt.arg, stderr.String())
		}
	}
}

// TestCertRemoved: the certificate written to a temporary folder (no
// -cert) is removed, folder and all, when the fake is interrupted.
func TestCertRemoved(t *testing.T) {
	for _, backend := range []string{"foundry", "responses"} {
		cmd := exec.Command(os.Args[0], "-backend", backend, "-script", "../../testdata/horoscope.json")
		cmd.Env = append(os.Environ(), "TOOLRELAY_FAKE_MAIN=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		cert := ""
		for lines := bufio.NewScanner(out); cert == "" && lines.Scan(); {
			if v, ok := strings.CutPrefix(lines.Text(), "CERT="); ok {
				cert = v
			}
		}
		if _, err := os.Stat(cert); err != nil {
			t.Fatalf("%s: the certificate %q: %v", backend, cert, err)
		}
		cmd.Process.Signal(os.Interrupt)
		err = cmd.Wait()
		deadline.Stop()
		if err != nil {
			t.Errorf("%s: the fake ended with %v after an interrupt, want a clean exit", backend, err)
		}
		if _, err := os.Stat(filepath.Dir(cert)); !os.IsNotExist(err) {
			t.Errorf("%s: the certificate's folder %s is left behind (%v)", backend, filepath.Dir(cert), err)
		}
	}
}
