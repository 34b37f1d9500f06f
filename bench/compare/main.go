// Command compare runs toolrelay's benchmarks (package bench) briefly and
// prints one line per measure, with toolrelay's figures as ratios to the
// baselines measured in the same run:
//
//	go run ./bench/compare
//	go run ./bench/compare -count 5 -out bench.txt   # more runs; keep the raw output for benchstat
//
// Each measure runs as its own `go test -bench` with a benchtime suited
// to it; figures are medians over -count runs. The PostgreSQL measures
// need TOOLRELAY_TEST_POSTGRES (a database URL) and are skipped without
// it. compare exits non-zero only when a benchmark fails to run: whether
// a ratio is good enough is for people to judge, not for this program.
package main

import (
	"bytes"
	"flag"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// A measure is one `go test -bench` invocation and how to report it.
type measure struct {
	id        string // P1 … P5
	bench     string // the -bench pattern
	benchtime string
	report    func(w io.Writer, rs results)
}

var measures = []measure{
	{"P1", "^BenchmarkStep$", "2000x", reportStep},
	{"P2", "^BenchmarkParallel$", "10x", reportParallel},
	{"P3", "^BenchmarkScale$", "2x", reportScale},
	{"P4", "^BenchmarkJournal$", "500x", reportJournal},
	{"P5", "^BenchmarkConformance$", "1x", reportConformance},
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("compare: ")
	count := flag.Int("count", 3, "runs of each benchmark (figures are medians)")
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
	failed := false
	for _, m := range measures {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), m.id) {
			continue
		}
		text, err := run(m, *count)
		raw.Write(text)
		if err != nil {
			log.Printf("%s: %v\n%s", m.id, err, text)
			failed = true
			continue
		}
		m.report(os.Stdout, parse(text))
	}
	if failed {
		os.Exit(1)
	}
}

// run runs one measure's benchmarks and returns their output.
func run(m measure, count int) ([]byte, error) {
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gotool); err != nil {
		gotool = "go"
	}
	cmd := exec.Command(gotool, "test", "-run", "^$", "-bench", m.bench, "-benchmem",
		"-benchtime", m.benchtime, "-count", strconv.Itoa(count), "-timeout", "30m", "./bench")
	cmd.Dir = moduleRoot()
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
