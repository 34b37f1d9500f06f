package bench

import (
	"context"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// BenchmarkAgentTool (P10) measures what running an agent as a tool of
// another run adds (core.NewAgentTool): one op is one turn of the child
// (a step of one instant call, then its answer) on a new thread, run
// directly ("direct": Runner.Run of the child), or as the one call of a
// step of a parent ("agent-tool": the parent's turn, its step's call
// running the child, then the parent's answer). "parent-plain" is the
// parent's turn with an instant call in place of the agent tool, the
// parent's own share: agent-tool − direct − parent-plain is what the
// nesting adds (the note of the child's thread, its answer noted, the
// events relayed). Both agents run on in-memory scripted backends, with
// their runners' own journals in memory, so that the measure is the
// library's alone. Besides the time, it reports cpu-ns/op.
func BenchmarkAgentTool(b *testing.B) {
	childScript := coretest.Simple("lookup", `{}`, `child: {{output "lookup"}}`)
	lookup, err := core.NewTool("lookup", "Looks up.", func(context.Context, struct{}) (string, error) { return "found", nil }, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"direct", "parent-plain", "agent-tool"} {
		b.Run(kind, func(b *testing.B) {
			childTools, err := core.NewToolbox(lookup)
			if err != nil {
				b.Fatal(err)
			}
			child := core.NewRunner(coretest.NewBackend(childScript, nil), childTools, &core.Options{Logger: quiet})
			defer child.Close()
			run, want := child, "child: found"
			switch kind {
			case "parent-plain":
				plain, err := core.NewTool("ask", "Asks.", func(context.Context, struct {
					Input string `json:"input"`
				}) (string, error) {
					return "child: found", nil
				}, nil)
				if err != nil {
					b.Fatal(err)
				}
				run, want = parent(b, plain), "parent: child: found"
			case "agent-tool":
				ask, err := core.NewAgentTool("ask", "Asks the child.", child, nil)
				if err != nil {
					b.Fatal(err)
				}
				run, want = parent(b, ask), "parent: child: found"
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := range b.N {
				res, err := run.Run(ctx, "go", nil)
				if err != nil || res.Text != want {
					b.Fatalf("turn %d = %+v, %v; want %q", i, res, err, want)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// parent returns a runner whose model calls ask with an input, then
// answers with its output.
func parent(b *testing.B, ask *core.Tool) *core.Runner {
	b.Helper()
	tools, err := core.NewToolbox(ask)
	if err != nil {
		b.Fatal(err)
	}
	r := core.NewRunner(coretest.NewBackend(coretest.Simple("ask", `{"input":"go"}`, `parent: {{output "ask"}}`), nil), tools, &core.Options{Logger: quiet})
	b.Cleanup(func() { r.Close() })
	return r
}
