package mcptest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/mcptools"
)

// Transports name the ways [Over] reaches a test server.
var Transports = []string{"memory", "stdio", "http"}

// Over returns a fresh test server, named "tester", as a server of
// package mcptools reached over transport: "memory" (the SDK's in-memory
// transport), "stdio" (the test binary started again, see [Command]) or
// "http" (streamable HTTP on a loopback port, whose crash drops the
// connections and the session); and the directory it records in
// ([Events]). What it starts ends with the test.
func Over(t testing.TB, transport string) (mcptools.Server, string) {
	t.Helper()
	dir := t.TempDir()
	s := mcptools.Server{Name: "tester"}
	switch transport {
	case "memory":
		srv, rec := newServer(dir, nil)
		t.Cleanup(rec.close)
		s.Transport = mcptools.InMemory(srv)
	case "stdio":
		s.Command, s.Env = Command(dir)
	case "http":
		var (
			hs   *httptest.Server
			mu   sync.Mutex
			dead = map[string]bool{} // the sessions of the server that died
		)
		srv, rec := newServer(dir, func(req *mcp.CallToolRequest) {
			// The server dies: its connections drop, its sessions are gone
			// (the server that comes back knows none of them).
			mu.Lock()
			dead[req.Session.ID()] = true
			mu.Unlock()
			go req.Session.Close()
			hs.CloseClientConnections()
		})
		t.Cleanup(rec.close)
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			gone := dead[r.Header.Get("Mcp-Session-Id")]
			mu.Unlock()
			if gone {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		s.URL = hs.URL
	default:
		t.Fatalf("mcptest: unknown transport %q", transport)
	}
	return s, dir
}
