package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/mcptools"
	"github.com/toolrelay/toolrelay/mcptools/mcptest"
)

// BenchmarkMCP (P8) measures the cost of a call of an MCP server's tool
// against the same function registered directly: one op is one call,
// answered as a step's call is (core.Runner.Call, journaled in memory).
// "direct" is a Go tool echoing its text; "memory" the test server's echo
// tool over the SDK's in-memory transport; "stdio" the same tool of the
// test server as a child process (this binary started again). The
// difference to direct is the per-call overhead of MCP.
func BenchmarkMCP(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	for _, kind := range []string{"direct", "memory", "stdio"} {
		b.Run(kind, func(b *testing.B) {
			tb, err := core.NewToolbox()
			if err != nil {
				b.Fatal(err)
			}
			switch kind {
			case "direct":
				echo, err := core.NewTool("echo", "Echoes the text.", func(_ context.Context, in struct {
					Text string `json:"text"`
				}) (string, error) {
					return in.Text, nil
				}, nil)
				if err != nil {
					b.Fatal(err)
				}
				tb.Add(echo)
			default:
				s, _ := mcptest.Over(b, kind)
				set, err := mcptools.Connect(b.Context(), tb, []mcptools.Server{s}, &mcptools.Options{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				defer set.Close()
			}
			r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, nil), tb, &core.Options{Logger: quiet})
			defer r.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tr, err := r.Call(b.Context(), &core.CallRequest{Journaled: true, Call: core.Call{ID: "c" + strconv.Itoa(i), Thread: "t", Name: "echo", Arguments: args}})
				if err != nil || tr.Failed || tr.Output.Text != "hello" {
					b.Fatalf("call %d = %+v, %v", i, tr, err)
				}
			}
		})
	}
}
