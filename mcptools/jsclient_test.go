package mcptools_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/nodetest"
	"github.com/toolrelay/toolrelay/mcptools"
)

// TestMain serves the toolbox of the official client's test (clients/mcp)
// when TOOLRELAY_MCP_SERVE says how (stdio, or http on a loopback port it
// prints as URL=…), instead of testing.
func TestMain(m *testing.M) {
	switch os.Getenv("TOOLRELAY_MCP_SERVE") {
	case "":
		os.Exit(m.Run())
	case "stdio":
		if err := mcptools.ServeStdio(context.Background(), served(), &mcptools.ServeOptions{Runner: core.Options{Logger: quiet}}); err != nil {
			log.Fatal(err)
		}
	case "http":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("URL=http://%s/mcp\n", l.Addr())
		log.Fatal(http.Serve(l, mcptools.Handler(served(), &mcptools.ServeOptions{Runner: core.Options{Logger: quiet}})))
	}
	os.Exit(0)
}

// served is the toolbox the official client drives.
func served() *core.Toolbox {
	weather, _ := core.NewTool("get_weather", "Gets the weather in a city.", func(_ context.Context, in cityArgs) (string, error) {
		if in.City != "Seattle" {
			return "", core.ModelErrorf("no weather for %s", in.City)
		}
		return "70f and rainy", nil
	}, &core.ToolOptions{ReadOnly: true})
	leak, _ := core.NewTool("leak", "Fails with an internal error.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("db password is hunter2")
	}, nil)
	refund, _ := core.NewTool("refund", "Refunds an order.", func(context.Context, struct{}) (string, error) { return "refunded", nil },
		&core.ToolOptions{Approval: core.ApprovalAlways("money goes out")})
	picture, _ := core.NewTool("picture", "Returns a picture.", func(context.Context, struct{}) (core.Content, error) {
		return core.Content{core.TextPart("here:"), core.ImageData("image/png", []byte("png!"))}, nil
	}, nil)
	tb, err := core.NewToolbox(weather, leak, refund, picture)
	if err != nil {
		log.Fatal(err)
	}
	return tb
}

// TestOfficialJSClient runs clients/mcp: the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk) listing and calling a served toolbox over
// stdio and streamable HTTP, the server being this test binary (see
// TestMain). It needs Node.js and the packages `npm ci` installs in
// clients/mcp (.ci/run does it); without them it is skipped.
func TestOfficialJSClient(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Run(t, "../clients/mcp", "@modelcontextprotocol/sdk", "the official MCP TypeScript client", "TOOLRELAY_MCP_SERVER="+exe)
}
