package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/journaltest"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // postgres: journals
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite: journals
)

// postgresEnv names the environment variable holding the URL of a
// PostgreSQL database for the journal measures (as in the journal tests).
const postgresEnv = "TOOLRELAY_TEST_POSTGRES"

// A client is one of the clients compared: "raw", "helper", "floor" (P1:
// net/http alone, see FloorSession) or "toolrelay", the last with a journal: "sqlite", "postgres" or "" (the
// default, in memory).
type client struct {
	name       string
	journal    string
	idempotent bool // toolrelay's tool is declared idempotent
	traced     bool // toolrelay with OpenTelemetry hooks (see BenchmarkTracing)
}

// clients returns the clients a measure compares on backend: the raw
// loop, the official helper (sessions only, when helper is set),
// toolrelay with its defaults, and with journals when journals is set:
// SQLite and PostgreSQL, each with the tool declared with side effects
// (the default) and declared idempotent.
func clients(backend string, helper, journals bool) []client {
	cs := []client{{name: "raw"}}
	if helper && backend == "openai" {
		cs = append(cs, client{name: "helper"})
	}
	cs = append(cs, client{name: "toolrelay"})
	if journals {
		for _, j := range []string{"sqlite", "postgres"} {
			cs = append(cs, client{name: "toolrelay-" + j, journal: j}, client{name: "toolrelay-" + j + "-idempotent", journal: j, idempotent: true})
		}
	}
	return cs
}

// lookup returns the tool "lookup" (see Lookup) as c declares it.
func (c client) lookup(hold Hold) (*core.Toolbox, map[string]Func) {
	return Lookup(hold, &core.ToolOptions{Idempotent: c.idempotent})
}

// flow returns c's flow on f, with runner options opts for toolrelay.
func (c client) flow(tb testing.TB, f *fake, agent string, tools *core.Toolbox, fns map[string]Func, opts core.Options) *flow {
	tb.Helper()
	switch c.name {
	case "raw":
		return f.raw(agent, fns)
	case "helper":
		return f.helper(agent, fns)
	case "floor":
		return f.floor(agent, fns)
	}
	var stats func() driver.Stats
	if c.journal != "" {
		j := openJournal(tb, c.journal)
		tb.Cleanup(func() { j.Close() }) // after the runner's, registered later
		opts.Journal = j
		if s, ok := j.(driver.Stater); ok {
			stats = s.Stats
		}
	}
	if c.traced {
		opts.Hooks = tracingHooks(tb)
	}
	fl := f.toolrelay(tb, agent, tools, &opts)
	fl.stats = stats
	return fl
}

// syncs returns a function that reports the syncs to disk fl's journal
// made since syncs was called, as the metric syncs/op for ops ops; it
// reports nothing for a flow without a journal.
func (fl *flow) syncs(b *testing.B) func(ops int) {
	if fl.stats == nil {
		return func(int) {}
	}
	s0 := fl.stats()
	return func(ops int) {
		b.ReportMetric(float64(fl.stats().Syncs-s0.Syncs)/float64(ops), "syncs/op")
	}
}

// openJournal opens a fresh SQLite or PostgreSQL journal, or skips the
// benchmark when PostgreSQL is not configured.
func openJournal(tb testing.TB, kind string) journal.Store {
	tb.Helper()
	var u string
	switch kind {
	case "sqlite":
		u = "sqlite://" + filepath.Join(tb.TempDir(), "journal.db")
	case "postgres":
		u = os.Getenv(postgresEnv)
		if u == "" {
			tb.Skip(postgresEnv + " is not set: skipping the PostgreSQL measures")
		}
		u = pgtest.FreshTable(tb, u, "bench")
	}
	j, err := journal.Open(context.Background(), u)
	if err != nil {
		tb.Fatal(err)
	}
	return j
}

// session opens c's flow on a fresh fake in a child process playing a first turn
// of one step (which creates the thread, untimed) and then the turns of
// script, and returns the flow and the thread.
func session(tb testing.TB, backend string, c client, script *coretest.Script, hold Hold, opts core.Options) (*flow, string) {
	tb.Helper()
	s := &coretest.Script{Turns: append(Script(1, 1, 1).Turns, script.Turns...)}
	f := startChildFake(tb, backend, s)
	tools, fns := c.lookup(hold)
	fl := c.flow(tb, f, f.agent(tb, tools), tools, fns, opts)
	tb.Cleanup(fl.close)
	thread, text, err := fl.turn(context.Background(), "", "start")
	if err != nil {
		tb.Fatalf("first turn: %v", err)
	}
	if err := check(text, Answer(1, 1)); err != nil {
		tb.Fatalf("first turn: %v", err)
	}
	return fl, thread
}

// BenchmarkStep (P1) measures the cost of one step of one call whose
// function returns at once: one op is one step of a turn of b.N steps on
// an existing thread (post the result, read the next step, run the call).
// Besides the time, it reports cpu-ns/op, the client's CPU time per step,
// which the machine's other load disturbs less, and, with a journal,
// syncs/op, the journal's syncs to disk per step.
func BenchmarkStep(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			for _, c := range append(clients(backend, false, true), client{name: "floor"}) {
				b.Run(c.name, func(b *testing.B) { benchSteps(b, backend, c) })
			}
		})
	}
}

// benchSteps measures c's steps of one instant call on backend, one op a
// step of a turn of b.N steps on an existing thread, reporting the
// client's CPU time per step (cpu-ns/op) beside the time (BenchmarkStep,
// BenchmarkTracing).
func benchSteps(b *testing.B, backend string, c client) {
	fl, thread := session(b, backend, c, Script(1, b.N, 1), nil, core.Options{MaxSteps: b.N + 1})
	b.ReportAllocs()
	syncs := fl.syncs(b)
	b.ResetTimer()
	c0 := cpuTime()
	_, text, err := fl.turn(context.Background(), thread, "go")
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
	syncs(b.N)
	if err != nil {
		b.Fatal(err)
	}
	if err := check(text, Answer(b.N, 1)); err != nil {
		b.Fatal(err)
	}
}

// parallelCalls and callDelay shape the step of BenchmarkParallel.
const (
	parallelCalls = 8
	callDelay     = 50 * time.Millisecond
)

// BenchmarkParallel (P2) measures a turn whose one step has 8 calls, each
// of a function that sleeps 50 ms: one op is one turn on an existing
// thread (input, the step, its results, the answer).
func BenchmarkParallel(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			for _, c := range clients(backend, true, false) {
				b.Run(c.name, func(b *testing.B) {
					fl, thread := session(b, backend, c, Script(b.N, 1, parallelCalls), Sleep(callDelay), core.Options{})
					want := Answer(1, parallelCalls)
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						_, text, err := fl.turn(context.Background(), thread, "go")
						if err != nil {
							b.Fatal(err)
						}
						if err := check(text, want); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// Shape of BenchmarkScale's load.
const (
	scaleRuns  = 1000
	scaleSteps = 5
)

// BenchmarkScale (P3) runs 1,000 runs of 5 one-call steps at once, each
// on a new thread, against one fake served by another process: one op is
// the 1,000 runs. It reports steps/s (calls answered per second) and
// heap-B/run: the client's live heap while every run is in flight (each
// waiting in its third step, after a collection), less the heap before,
// divided by the runs; with a journal, syncs/op is its syncs to disk per
// step.
func BenchmarkScale(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			for _, c := range clients(backend, false, true) {
				b.Run(c.name, func(b *testing.B) {
					f := startChildFake(b, backend, Script(1, scaleSteps, 1))
					gate := new(gate)
					tools, fns := c.lookup(gate.third)
					fl := c.flow(b, f, f.agent(b, tools), tools, fns, core.Options{})
					defer fl.close()
					want := Answer(scaleSteps, 1)
					var heap uint64
					b.ReportAllocs()
					syncs := fl.syncs(b)
					b.ResetTimer()
					start := time.Now()
					for range b.N {
						gate.arm(scaleRuns)
						errs := make(chan error, scaleRuns)
						var wg sync.WaitGroup
						for range scaleRuns {
							wg.Go(func() {
								_, text, err := fl.turn(context.Background(), "", "go")
								if err == nil {
									err = check(text, want)
								}
								errs <- err
							})
						}
						heap += gate.measure()
						wg.Wait()
						close(errs)
						for err := range errs {
							if err != nil {
								b.Fatal(err)
							}
						}
					}
					elapsed := time.Since(start)
					b.ReportMetric(float64(b.N*scaleRuns*scaleSteps)/elapsed.Seconds(), "steps/s")
					b.ReportMetric(float64(heap)/float64(b.N*scaleRuns), "heap-B/run")
					syncs(b.N * scaleRuns * scaleSteps)
				})
			}
		})
	}
}

// A gate holds the calls of one step until every run reached it, so that
// the heap can be measured with all runs in flight.
type gate struct {
	mu      sync.Mutex
	waiting int
	want    int
	all     chan struct{} // closed when want calls wait
	open    chan struct{} // closed to let them go
	base    uint64
}

// arm prepares the gate for n runs and records the heap before them.
func (g *gate) arm(n int) {
	g.mu.Lock()
	g.waiting, g.want = 0, n
	g.all, g.open = make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
	g.base = liveHeap()
}

// wait holds a call until the gate opens.
func (g *gate) wait(ctx context.Context) {
	g.mu.Lock()
	g.waiting++
	if g.waiting == g.want {
		close(g.all)
	}
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
}

// measure waits until every run waits at the gate, measures the heap
// above the one arm recorded, and opens the gate.
func (g *gate) measure() uint64 {
	<-g.all
	h := liveHeap()
	close(g.open)
	if h < g.base {
		return 0
	}
	return h - g.base
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// third holds the third step of each run of BenchmarkScale at g.
func (g *gate) third(ctx context.Context, id string) error {
	if id == "r-2-0" {
		g.wait(ctx)
	}
	return nil
}

// BenchmarkJournal (P4) measures the journal's cost per call — claim,
// finish and mark submitted, as the runner writes them — in memory, in
// SQLite and in PostgreSQL (journaltest.Benchmark: Call is one call's
// writes in turn, Step8 a step of 8 calls written concurrently).
func BenchmarkJournal(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			var j driver.Journal = driver.NewMemory()
			if kind != "memory" {
				s := openJournal(b, kind)
				defer s.Close()
				j = s
			}
			journaltest.Benchmark(b, j)
		})
	}
}

// BenchmarkConformance (P5) measures the wall time of the conformance
// suite on each backend's fakes: one op runs the backend package's
// TestConformance, from a test binary built before the timer starts.
func BenchmarkConformance(b *testing.B) {
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			bin := filepath.Join(b.TempDir(), backend+".test")
			build := exec.Command(gotool, "test", "-c", "-o", bin, "github.com/toolrelay/toolrelay/"+backend)
			if out, err := build.CombinedOutput(); err != nil {
				b.Fatalf("go test -c: %v\n%s", err, out)
			}
			b.ResetTimer()
			for range b.N {
				cmd := exec.Command(bin, "-test.run=^TestConformance$", "-test.count=1")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", backend, err, out)
				}
			}
		})
	}
}

// cpuTime returns the CPU time (user and system, of all its threads) this
// process has used: the client's alone, as the fakes run in child
// processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
