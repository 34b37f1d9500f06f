package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReportTracing: P7's lines for the in-memory steps give what tracing
// adds to a call, in time and allocations, beside what the SDK's span
// alone costs a call in the same run, their ratio (in time and in CPU
// time), and the goals; without the SDK's baseline, the line says what
// tracing adds alone.
func TestReportTracing(t *testing.T) {
	out := `
BenchmarkTracingCalls/calls=1/sdk-2   	  2000	      6000 ns/op	      7000 cpu-ns/op	    1800 B/op	      12 allocs/op
BenchmarkTracingCalls/calls=8/sdk-2   	  2000	     48000 ns/op	     56000 cpu-ns/op	   14400 B/op	      96 allocs/op
BenchmarkTracingCalls/calls=1/off-2   	  2000	     20000 ns/op	     22000 cpu-ns/op	    9972 B/op	      76 allocs/op
BenchmarkTracingCalls/calls=1/on-2    	  2000	     29000 ns/op	     29000 cpu-ns/op	   19690 B/op	     100 allocs/op
BenchmarkTracingCalls/calls=8/off-2   	  2000	    160000 ns/op	    176000 cpu-ns/op	   55274 B/op	     489 allocs/op
BenchmarkTracingCalls/calls=8/on-2    	  2000	    216000 ns/op	    232000 cpu-ns/op	  103498 B/op	     593 allocs/op
`
	var b strings.Builder
	reportTracing(&b, parse([]byte(out)))
	want := []string{
		"P7 openai   not measured",
		"P7 foundry  not measured",
		"P7 memory  steps of 1 call(s): tracing adds 9µs and 24.0 allocs per call; the SDK's span alone 6µs and 12.0 allocs: tracing/sdk=1.50x (cpu 7µs vs 7µs: 1.00x) (goal: 8µs and 20 allocs, 1.33x a 6µs SDK span; an untraced call costs 20µs)",
		"P7 memory  steps of 8 call(s): tracing adds 7µs and 13.0 allocs per call; the SDK's span alone 6µs and 12.0 allocs: tracing/sdk=1.17x (cpu 7µs vs 7µs: 1.00x) (goal: 8µs and 20 allocs, 1.33x a 6µs SDK span; an untraced call costs 20µs)",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(b.String()), "\n")); diff != "" {
		t.Errorf("P7's lines (-want +got):\n%s", diff)
	}
	// Without the SDK's baseline (a benchmark binary from before it).
	b.Reset()
	var older []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "/sdk") {
			older = append(older, l)
		}
	}
	reportTracing(&b, parse([]byte(strings.Join(older, "\n"))))
	if got, want := strings.Split(strings.TrimSpace(b.String()), "\n")[3], "P7 memory  steps of 8 call(s): tracing adds 7µs and 13.0 allocs per call (goal: 8µs and 20 allocs, 1.33x a 6µs SDK span; an untraced call costs 20µs)"; got != want {
		t.Errorf("without the SDK's baseline:\n got %s\nwant %s", got, want)
	}
}
