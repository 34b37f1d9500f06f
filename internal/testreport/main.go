// Command testreport reads the output of go test -json and prints what go
// test prints without it (each package's result, the output of failed
// tests), then the tests that were skipped and why, so that a package
// whose tests were skipped (no PostgreSQL, no Node.js) does not read as a
// pass:
//
//	go test -race -json ./... 2>&1 | go run ./internal/testreport
//
// Lines that are not JSON (build errors) are printed as they come. It
// exits 0; the pipeline's status is go test's (set -o pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// event is a line of go test -json (see go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skip is why a test was skipped.
type skip struct{ pkg, test, why string }

func main() {
	if err := report(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	outputs := map[[2]string][]string{} // a running test's output lines
	var skips []skip
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text())
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Test == "" && e.Action == "output":
			// What go test prints of a package, less the verbose mode's
			// PASS line.
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "":
		case e.Action == "output":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "fail":
			fmt.Fprint(w, strings.Join(outputs[key], ""))
			delete(outputs, key)
		case e.Action == "skip":
			skips = append(skips, skip{e.Package, e.Test, reason(outputs[key])})
			delete(outputs, key)
		case e.Action == "pass":
			delete(outputs, key)
		}
		w.Flush()
	}
	if err := sc.Err(); err != nil {
		return err
	}
	printSkips(w, skips)
	return nil
}

// location is the file:line that t.Skip puts before its message.
var location = regexp.MustCompile(`^[\w./-]+\.go:\d+: `)

// reason returns the message of a skipped test: its output but the
// === and --- lines, and the file:line of each line.
func reason(lines []string) string {
	var why []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		why = append(why, location.ReplaceAllString(t, ""))
	}
	return strings.Join(why, " ")
}

// printSkips prints the skipped tests, one line for each package and
// reason, with the tests it covers.
func printSkips(w io.Writer, skips []skip) {
	if len(skips) == 0 {
		fmt.Fprintln(w, "skipped: none")
		return
	}
	type group struct {
		pkg, why string
		tests    []string
	}
	var groups []*group
	for _, s := range skips {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.pkg == s.pkg && g.why == s.why })
		if i < 0 {
			groups = append(groups, &group{pkg: s.pkg, why: s.why})
			i = len(groups) - 1
		}
		groups[i].tests = append(groups[i].tests, s.test)
	}
	fmt.Fprintf(w, "skipped: %d tests\n", len(skips))
	for _, g := range groups {
		tests := strings.Join(g.tests, ", ")
		if len(g.tests) > 3 {
			tests = fmt.Sprintf("%s and %d more", strings.Join(g.tests[:3], ", "), len(g.tests)-3)
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", g.pkg, g.why, tests)
	}
}
