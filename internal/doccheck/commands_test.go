package doccheck

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// notRun are the commands README shows that TestReadmeCommands does not
// run, by their start, and why.
var notRun = []struct{ prefix, why string }{
	{"go test ", "the tests themselves"},
	{"bash .ci/test", "the tests themselves, this one among them"},
	{"TOOLRELAY_BACKEND=openai ", "needs an OpenAI API key"},
	{"TOOLRELAY_BACKEND=foundry ", "needs an Azure AI Foundry project"},
	{"cd examples/temporal && go run . -dev", "starts a Temporal server in the process (minutes)"},
	{"cd examples/temporal && go run . -web", "serves until stopped on a Temporal server in the process; examples/temporal's TestBrowser runs it"},
	{"TEMPORAL_ADDRESS=", "needs a Temporal server"},
	{"cd examples/web && npm ci", "downloads npm packages"},
	{"go run ./internal/bench/compare", "runs every benchmark (minutes)"},
}

// servers are the commands that serve until stopped, with what they print
// once they are ready.
var servers = map[string]*regexp.Regexp{
	"./cmd/toolrelay-fake": regexp.MustCompile(`(?m)^BASE_URL=http`),
	"./examples/web":       regexp.MustCompile(`http://127\.0\.0\.1:\d+`),
}

// readmeCommands returns the commands README shows: the lines of its
// plain ``` blocks (comments left out), and the `go run …` and `cd …`
// spans of its text.
func readmeCommands(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	comment := regexp.MustCompile(`\s+#.*$`)
	inline := regexp.MustCompile("`((?:go run|cd) [^`]+)`")
	block := "" // the fence's language while in a block: "plain" or "go", …
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch lang, fence := strings.CutPrefix(line, "```"); {
		case fence && block == "":
			block = cmp.Or(lang, "plain")
		case fence:
			block = ""
		case block == "plain" && line != "":
			out = append(out, comment.ReplaceAllString(line, ""))
		case block == "":
			for _, m := range inline.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// A command is a README command the test can run: the environment it
// sets, the package it runs with go run and its arguments, and its
// standard input.
type command struct {
	text       string
	env        []string
	pkg        string
	args       []string
	stdin      string
	background bool
}

var envAssign = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S*$`)

// parse reads "[echo X |] [VAR=value ...] go run PKG [args] [&]".
func parse(text string) (command, bool) {
	c := command{text: text}
	s := strings.TrimSpace(text)
	if rest, ok := strings.CutSuffix(s, "&"); ok {
		s, c.background = strings.TrimSpace(rest), true
	}
	if before, after, ok := strings.Cut(s, "|"); ok {
		echo, ok := strings.CutPrefix(strings.TrimSpace(before), "echo ")
		if !ok {
			return c, false
		}
		c.stdin, s = echo+"\n", strings.TrimSpace(after)
	}
	f := strings.Fields(s)
	for len(f) > 0 && envAssign.MatchString(f[0]) {
		c.env, f = append(c.env, f[0]), f[1:]
	}
	if len(f) < 3 || f[0] != "go" || f[1] != "run" || !strings.HasPrefix(f[2], "./") {
		return c, false
	}
	c.pkg, c.args = f[2], f[3:]
	return c, true
}

// TestReadmeCommands runs every command README shows that needs no
// credentials, no service and no download, as a reader would type it from
// the repository's root: each example on the embedded fakes, the
// standalone fake until it is ready. Each must succeed. A command the test
// can neither run nor finds in notRun fails it, so that README cannot
// show one nobody checks. The programs are built once, together.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the examples")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var run []command
	for _, text := range readmeCommands(t, root) {
		if i := slices.IndexFunc(notRun, func(n struct{ prefix, why string }) bool { return strings.HasPrefix(text, n.prefix) }); i >= 0 {
			t.Logf("not run: %s (%s)", text, notRun[i].why)
			continue
		}
		c, ok := parse(text)
		if !ok {
			t.Errorf("README shows %q, which the test can neither run nor lists as not run", text)
			continue
		}
		run = append(run, c)
	}
	if len(run) < 5 {
		t.Fatalf("found %d commands to run; the extraction is broken", len(run))
	}
	bin := t.TempDir()
	var pkgs []string
	for _, c := range run {
		if !slices.Contains(pkgs, c.pkg) {
			pkgs = append(pkgs, c.pkg)
		}
	}
	build := exec.Command("go", append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, pkgs...)...) // no symbols: a faster link
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", pkgs, err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "TOOLRELAY_") && !strings.HasPrefix(k, "OPENAI_") && !strings.HasPrefix(k, "AZURE_") {
			env = append(env, kv)
		}
	}
	for _, c := range run {
		t.Run(c.text, func(t *testing.T) {
			if c.pkg == "./examples/web" {
				if _, err := os.Stat(filepath.Join(root, "examples", "web", "page", "dist", "app.js")); err != nil {
					t.Skip("the page is not built (npm ci && npm run build in examples/web)")
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, filepath.Base(c.pkg)), c.args...)
			cmd.Dir, cmd.Env, cmd.Stdin = root, append(slices.Clone(env), c.env...), strings.NewReader(c.stdin)
			var out bytes.Buffer
			ready := servers[c.pkg]
			if slices.Contains(c.args, "-check") {
				ready = nil // toolrelay-fake -check checks and ends
			}
			if ready == nil {
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil || out.Len() == 0 {
					t.Errorf("%s: %v, printing:\n%s", c.text, err, out.String())
				}
				return
			}
			pr, pw := io.Pipe()
			cmd.Stdout, cmd.Stderr = pw, pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait(); pw.Close() }()
			found := make(chan bool, 1)
			go func() {
				sc := bufio.NewScanner(pr)
				ok := false
				for sc.Scan() {
					fmt.Fprintln(&out, sc.Text())
					if !ok && ready.MatchString(sc.Text()) {
						ok = true
						found <- true
					}
				}
				if !ok {
					found <- false
				}
			}()
			if !<-found {
				t.Errorf("%s ended (%v) before it was ready, printing:\n%s", c.text, <-done, out.String())
				return
			}
			cmd.Process.Kill()
			<-done
		})
	}
}
