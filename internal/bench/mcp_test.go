package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
//
// "memory-sdk" and "stdio-sdk" are the baselines of the SDK alone: the
// same call made with the SDK's client session (ClientSession.CallTool)
// on the same connection, with no runner and no mapping of the result.
// The difference between memory and memory-sdk (stdio and stdio-sdk) is
// what toolrelay adds to an MCP call.
//
// Besides the time, it reports cpu-ns/op, this process's CPU time per
// call (all its threads: the garbage collector's too), which the
// machine's other load disturbs less than the time: in memory, the
// server's half of the call runs in this process and counts here; over
// stdio it is the child's, and does not.
func BenchmarkMCP(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	for _, kind := range []string{"direct", "memory-sdk", "memory", "stdio-sdk", "stdio"} {
		b.Run(kind, func(b *testing.B) {
			tb, err := core.NewToolbox()
			if err != nil {
				b.Fatal(err)
			}
			var set *mcptools.Set
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
				transport, _ := strings.CutSuffix(kind, "-sdk")
				s, _ := mcptest.Over(b, transport)
				set, err = mcptools.Connect(b.Context(), tb, []mcptools.Server{s}, &mcptools.Options{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				defer set.Close()
			}
			if strings.HasSuffix(kind, "-sdk") {
				cs := set.Session("tester")
				b.ReportAllocs()
				b.ResetTimer()
				c0 := cpuTime()
				for i := range b.N {
					res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "echo", Arguments: args})
					if err != nil || res.IsError || len(res.Content) != 1 {
						b.Fatalf("call %d = %+v, %v", i, res, err)
					}
					if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hello" {
						b.Fatalf("call %d = %+v, %v", i, res, err)
					}
				}
				b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
				return
			}
			r := core.NewRunner(coretest.NewBackend(&coretest.Script{}, nil), tb, &core.Options{Logger: quiet})
			defer r.Close()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for i := range b.N {
				tr, err := r.Call(b.Context(), &core.CallRequest{Journaled: true, Call: core.Call{ID: "c" + strconv.Itoa(i), Thread: "t", Name: "echo", Arguments: args}})
				if err != nil || tr.Failed || tr.Output.Text != "hello" {
					b.Fatalf("call %d = %+v, %v", i, tr, err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
