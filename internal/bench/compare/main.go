// Command compare runs toolrelay's benchmarks (package bench) briefly and
// prints one line per measure, with toolrelay's figures as ratios to the
// baselines measured in the same run:
//
//	go run ./internal/bench/compare
//	go run ./internal/bench/compare -count 5 -out bench.txt   # more runs; keep the raw output for benchstat
//
// compare builds the benchmarks' test binary once, then runs it in
// rounds: each round runs every measure once, with a benchtime suited to
// it, so that the runs of a measure are spread over the session and a
// slow spell of the machine falls on all of them alike. Within a run, the
// baselines and toolrelay are measured one right after the other. Figures
// are medians over the -count rounds. The PostgreSQL measures
// need TOOLRELAY_TEST_POSTGRES (a database URL) and are skipped without
// it. compare exits non-zero only when a benchmark fails to run: whether
// a ratio is good enough is for people to judge, not for this program.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// A measure is one `go test -bench` invocation and how to report it.
type measure struct {
	id        string // P1 … P7
	bench     string // the -bench pattern
	benchtime string
	report    func(w io.Writer, rs results)
}

var measures = []measure{
	{"P1", "^BenchmarkStep$", "1000x", reportStep},
	{"P2", "^BenchmarkParallel$", "10x", reportParallel},
	{"P3", "^BenchmarkScale$", "2x", reportScale},
	{"P4", "^BenchmarkJournal$", "500x", reportJournal},
	{"P5", "^BenchmarkConformance$", "1x", reportConformance},
	{"P6", "^BenchmarkStream$", "5000x", reportStream},
	{"P7", "^BenchmarkTracing", "2000x", reportTracing},
	{"P8", "^BenchmarkMCP$", "2000x", reportMCP},
	{"P10", "^BenchmarkAgentTool$", "2000x", reportAgentTool},
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("compare: ")
	count := flag.Int("count", 3, "rounds: runs of each benchmark (figures are medians)")
	only := flag.String("only", "", "run only these measures, comma-separated (e.g. P1,P3)")
	out := flag.String("out", "", "also append the benchmarks' raw output to this file (for benchstat)")
	flag.Parse()
	var raw io.Writer = io.Discard
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		raw = f
	}
	var todo []measure
	for _, m := range measures {
		if *only == "" || slices.Contains(strings.Split(*only, ","), m.id) {
			todo = append(todo, m)
		}
	}
	root := moduleRoot()
	bin, cleanup, err := build(root)
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	outputs := make([][]byte, len(todo))
	for round := range *count {
		for i, m := range todo {
			text, err := run(bin, filepath.Join(root, "internal", "bench"), m)
			raw.Write(text)
			if err != nil {
				cleanup()
				log.Fatalf("%s (round %d): %v\n%s", m.id, round+1, err, text)
			}
			outputs[i] = append(outputs[i], text...)
		}
	}
	for i, m := range todo {
		m.report(os.Stdout, parse(outputs[i]))
	}
}

// build compiles the benchmarks' test binary of the module at root into a
// temporary directory.
func build(root string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "toolrelay-compare-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gotool); err != nil {
		gotool = "go"
	}
	bin = filepath.Join(dir, "bench.test")
	cmd := exec.Command(gotool, "test", "-c", "-o", bin, "./internal/bench")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go test -c ./internal/bench: %v\n%s", err, out)
	}
	return bin, cleanup, nil
}

// run runs one measure's benchmarks once, in dir, and returns their
// output.
func run(bin, dir string, m measure) ([]byte, error) {
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", m.bench, "-test.benchmem",
		"-test.benchtime", m.benchtime, "-test.count", "1", "-test.timeout", "30m")
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.Bytes(), err
}

// moduleRoot returns the directory of go.mod above the working directory.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			log.Fatalf("no go.mod above %s: run compare inside the toolrelay module", dir)
		}
	}
}
