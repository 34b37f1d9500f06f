package main

import (
	"fmt"
	"io"
	"time"
)

var backends = []string{"openai", "foundry"}

// toolrelays are the toolrelay clients of P1 and P3: with the memory
// journal, and with the SQLite and PostgreSQL journals, the tool declared
// with side effects or idempotent.
var toolrelays = []string{
	"toolrelay",
	"toolrelay-sqlite", "toolrelay-sqlite-idempotent",
	"toolrelay-postgres", "toolrelay-postgres-idempotent",
}

// syncs returns " syncs/step=N" for a benchmark that reported its
// journal's syncs, else "".
func syncs(rs results, name string) string {
	if v, ok := rs.median(name, "syncs/op"); ok {
		return fmt.Sprintf(" syncs/step=%.2f", v)
	}
	return ""
}

// reportStep prints P1: per step, toolrelay (with each journal) against
// the raw loop, in time, client CPU time and allocations; then the raw
// loop and toolrelay (in memory, on SQLite with an idempotent tool)
// against the floor.
func reportStep(w io.Writer, rs results) {
	for _, be := range backends {
		raw := "Step/" + be + "/raw"
		for _, c := range toolrelays {
			name := "Step/" + be + "/" + c
			t, ok := rs.ratio(name, raw, "ns/op")
			if !ok {
				fmt.Fprintf(w, "P1 %-8s %s/raw  not measured\n", be, c)
				continue
			}
			cpu, _ := rs.ratio(name, raw, "cpu-ns/op")
			a, _ := rs.ratio(name, raw, "allocs/op")
			ns, _ := rs.median(name, "ns/op")
			rawNS, _ := rs.median(raw, "ns/op")
			fmt.Fprintf(w, "P1 %-8s %s/raw time=%.2fx cpu=%.2fx allocs=%.2fx%s  (%s vs %s per step)\n", be, c, t, cpu, a, syncs(rs, name), dur(ns), dur(rawNS))
		}
		// The floor: net/http alone (bench.FloorSession, FloorFoundry).
		floor := "Step/" + be + "/floor"
		for _, c := range []string{"raw", "toolrelay", "toolrelay-sqlite-idempotent"} {
			name := "Step/" + be + "/" + c
			t, ok := rs.ratio(name, floor, "ns/op")
			if !ok {
				continue
			}
			cpu, _ := rs.ratio(name, floor, "cpu-ns/op")
			ns, _ := rs.median(floor, "ns/op")
			fmt.Fprintf(w, "P1 %-8s %s/floor time=%.2fx cpu=%.2fx  (floor %s per step)\n", be, c, t, cpu, dur(ns))
		}
	}
}

// reportParallel prints P2: a step of 8 calls of 50 ms.
func reportParallel(w io.Writer, rs results) {
	for _, be := range backends {
		tr, ok := rs.median("Parallel/"+be+"/toolrelay", "ns/op")
		if !ok {
			fmt.Fprintf(w, "P2 %-8s not measured\n", be)
			continue
		}
		line := fmt.Sprintf("P2 %-8s toolrelay=%s", be, dur(tr))
		for _, c := range []string{"raw", "helper"} {
			if v, ok := rs.median("Parallel/"+be+"/"+c, "ns/op"); ok {
				line += fmt.Sprintf("  %s=%s (%s/toolrelay=%.1fx)", c, dur(v), c, v/tr)
			}
		}
		fmt.Fprintln(w, line)
	}
}

// reportScale prints P3: throughput and heap per in-flight run.
func reportScale(w io.Writer, rs results) {
	for _, be := range backends {
		raw := "Scale/" + be + "/raw"
		for _, c := range toolrelays {
			tr := "Scale/" + be + "/" + c
			th, ok := rs.ratio(tr, raw, "steps/s")
			if !ok {
				fmt.Fprintf(w, "P3 %-8s %s/raw  not measured\n", be, c)
				continue
			}
			s1, _ := rs.median(tr, "steps/s")
			s2, _ := rs.median(raw, "steps/s")
			h1, _ := rs.median(tr, "heap-B/run")
			h2, _ := rs.median(raw, "heap-B/run")
			fmt.Fprintf(w, "P3 %-8s %s/raw throughput=%.2fx%s (%.0f vs %.0f steps/s)  heap=%.1f KiB/run (raw %.1f KiB/run)\n",
				be, c, th, syncs(rs, tr), s1, s2, h1/1024, h2/1024)
		}
	}
}

// reportJournal prints P4: the journal's cost per call.
func reportJournal(w io.Writer, rs results) {
	line := "P4 journal per call"
	for _, j := range []string{"memory", "sqlite", "postgres"} {
		c, ok1 := rs.median("Journal/"+j+"/Call", "ns/op")
		s, ok2 := rs.median("Journal/"+j+"/Step8", "ns/op")
		if !ok1 || !ok2 {
			line += fmt.Sprintf("  %s=not measured", j)
			continue
		}
		line += fmt.Sprintf("  %s=%s (in a step of 8: %s)", j, dur(c), dur(s))
	}
	fmt.Fprintln(w, line)
}

// reportConformance prints P5: the conformance suite's wall time.
func reportConformance(w io.Writer, rs results) {
	line := "P5 conformance suite"
	for _, be := range backends {
		v, ok := rs.median("Conformance/"+be, "ns/op")
		if !ok {
			line += fmt.Sprintf("  %s=not measured", be)
			continue
		}
		line += fmt.Sprintf("  %s=%s", be, dur(v))
	}
	fmt.Fprintln(w, line)
}

// reportStream prints P6: per delta of a streamed answer, toolrelay's
// stream against openai-go's read alone.
func reportStream(w io.Writer, rs results) {
	for _, be := range backends {
		tr, raw := "Stream/"+be+"/toolrelay", "Stream/"+be+"/raw"
		t, ok := rs.ratio(tr, raw, "ns/op")
		if !ok {
			fmt.Fprintf(w, "P6 %-8s not measured\n", be)
			continue
		}
		a, _ := rs.ratio(tr, raw, "allocs/op")
		ns, _ := rs.median(tr, "ns/op")
		rawNS, _ := rs.median(raw, "ns/op")
		fmt.Fprintf(w, "P6 %-8s stream toolrelay/raw time=%.2fx allocs=%.2fx  (%s vs %s per delta)\n", be, t, a, dur(ns), dur(rawNS))
	}
}

// reportTracing prints P7: a step with tracing off and on, over HTTP to
// the fakes, and the cost of tracing one call on the in-memory backend.
func reportTracing(w io.Writer, rs results) {
	for _, be := range backends {
		raw, off, on := "Tracing/"+be+"/raw", "Tracing/"+be+"/toolrelay", "Tracing/"+be+"/toolrelay-traced"
		tOff, ok1 := rs.ratio(off, raw, "ns/op")
		tOn, ok2 := rs.ratio(on, raw, "ns/op")
		if !ok1 || !ok2 {
			fmt.Fprintf(w, "P7 %-8s not measured\n", be)
			continue
		}
		nsOff, _ := rs.median(off, "ns/op")
		nsOn, _ := rs.median(on, "ns/op")
		aOff, _ := rs.median(off, "allocs/op")
		aOn, _ := rs.median(on, "allocs/op")
		fmt.Fprintf(w, "P7 %-8s step off/raw=%.2fx on/raw=%.2fx  tracing adds %s and %.0f allocs per step (%s vs %s)\n",
			be, tOff, tOn, dur(nsOn-nsOff), aOn-aOff, dur(nsOn), dur(nsOff))
	}
	for _, calls := range []int{1, 8} {
		off, on, sdk := fmt.Sprintf("TracingCalls/calls=%d/off", calls), fmt.Sprintf("TracingCalls/calls=%d/on", calls), fmt.Sprintf("TracingCalls/calls=%d/sdk", calls)
		nsOff, ok1 := rs.median(off, "ns/op")
		nsOn, ok2 := rs.median(on, "ns/op")
		if !ok1 || !ok2 {
			fmt.Fprintf(w, "P7 memory  steps of %d call(s) not measured\n", calls)
			continue
		}
		aOff, _ := rs.median(off, "allocs/op")
		aOn, _ := rs.median(on, "allocs/op")
		n := float64(calls)
		perCall, allocs := (nsOn-nsOff)/n, (aOn-aOff)/n
		line := fmt.Sprintf("P7 memory  steps of %d call(s): tracing adds %s and %.1f allocs per call", calls, dur(perCall), allocs)
		if nsSDK, ok := rs.median(sdk, "ns/op"); ok && nsSDK > 0 {
			aSDK, _ := rs.median(sdk, "allocs/op")
			line += fmt.Sprintf("; the SDK's span alone %s and %.1f allocs: tracing/sdk=%.2fx", dur(nsSDK/n), aSDK/n, perCall/(nsSDK/n))
			cpuSDK, ok1 := rs.median(sdk, "cpu-ns/op")
			cpuOff, ok2 := rs.median(off, "cpu-ns/op")
			cpuOn, ok3 := rs.median(on, "cpu-ns/op")
			if ok1 && ok2 && ok3 && cpuSDK > 0 {
				line += fmt.Sprintf(" (cpu %s vs %s: %.2fx)", dur((cpuOn-cpuOff)/n), dur(cpuSDK/n), (cpuOn-cpuOff)/cpuSDK)
			}
		}
		fmt.Fprintf(w, "%s (goal: %s and %d allocs, %.2fx a %s SDK span; an untraced call costs %s)\n",
			line, dur(tracingGoal), tracingAllocsGoal, tracingGoal/sdkSpan, dur(sdkSpan), dur(nsOff/n))
	}
}

// P7's goal for a traced call: what tracing adds to it, at most, in time
// (against the SDK's own span, sdkSpan, when the goal was set: compare
// the ratio to the SDK's span of the same run, which the machine's load
// moves as it moves tracing) and in allocations.
const (
	tracingGoal       = 8000.0 // ns
	sdkSpan           = 6000.0 // ns
	tracingAllocsGoal = 20
)

// dur formats nanoseconds as a rounded duration.
func dur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "-" + dur(-ns)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}

// reportMCP prints P8: what a call of an MCP server's tool costs over the
// same function registered directly, in memory and over stdio, and what
// toolrelay adds to the same call made with the SDK's client alone.
func reportMCP(w io.Writer, rs results) {
	direct, ok := rs.median("MCP/direct", "ns/op")
	if !ok {
		fmt.Fprintln(w, "P8 MCP call not measured")
		return
	}
	aDirect, _ := rs.median("MCP/direct", "allocs/op")
	for _, kind := range []string{"memory", "stdio"} {
		name := "MCP/" + kind
		ns, ok := rs.median(name, "ns/op")
		if !ok {
			fmt.Fprintf(w, "P8 MCP %-6s not measured\n", kind)
			continue
		}
		allocs, _ := rs.median(name, "allocs/op")
		fmt.Fprintf(w, "P8 MCP %-6s call %s = direct %s + %s per call (%.0f allocs more in this process); %.1fx\n",
			kind, dur(ns), dur(direct), dur(ns-direct), allocs-aDirect, ns/direct)
		sdk, ok := rs.median(name+"-sdk", "ns/op")
		if !ok {
			continue
		}
		cpu, _ := rs.median(name, "cpu-ns/op")
		cpuSDK, _ := rs.median(name+"-sdk", "cpu-ns/op")
		size, _ := rs.median(name, "B/op")
		sizeSDK, _ := rs.median(name+"-sdk", "B/op")
		allocsSDK, _ := rs.median(name+"-sdk", "allocs/op")
		fmt.Fprintf(w, "P8 MCP %-6s the SDK's client alone %s (cpu %s, %.1f KiB): toolrelay adds %s (cpu %s), %.1f KiB and %.0f allocs per call\n",
			kind, dur(sdk), dur(cpuSDK), sizeSDK/1024, dur(ns-sdk), dur(cpu-cpuSDK), (size-sizeSDK)/1024, allocs-allocsSDK)
	}
}

// reportAgentTool prints P10: what running an agent as the one call of a
// parent's step adds to the parent's turn with a plain call and the
// child's turn run directly (agent-tool − parent-plain − direct).
func reportAgentTool(w io.Writer, rs results) {
	var ns, cpu, allocs [3]float64
	for i, kind := range []string{"direct", "parent-plain", "agent-tool"} {
		var ok bool
		if ns[i], ok = rs.median("AgentTool/"+kind, "ns/op"); !ok {
			fmt.Fprintln(w, "P10 agent tool not measured")
			return
		}
		cpu[i], _ = rs.median("AgentTool/"+kind, "cpu-ns/op")
		allocs[i], _ = rs.median("AgentTool/"+kind, "allocs/op")
	}
	fmt.Fprintf(w, "P10 agent tool  turn %s = child directly %s + parent with a plain call %s + nesting %s (cpu %s, %.0f allocs)\n",
		dur(ns[2]), dur(ns[0]), dur(ns[1]), dur(ns[2]-ns[1]-ns[0]), dur(cpu[2]-cpu[1]-cpu[0]), allocs[2]-allocs[1]-allocs[0])
}
