package mcptest

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv, when set in a process's environment, makes that process the
// test server over stdio, recording in the directory it names (see
// [Command]).
const serveEnv = "TOOLRELAY_MCPTEST_SERVE"

// init turns a test binary started by [Command] into the test server: it
// serves on stdio and exits, before the tests would run.
func init() {
	dir := os.Getenv(serveEnv)
	if dir == "" {
		return
	}
	err := NewServer(dir, func(*mcp.CallToolRequest) { os.Exit(3) }).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}

// Command returns the command and environment that start the test server
// as a child process over stdio, recording in dir: the running program
// (a test binary that imports this package) started again, which serves
// instead of testing.
func Command(dir string) (command string, env []string) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exe, []string{serveEnv + "=" + dir}
}
