package adapter

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
)

// A ToolSource adds tools named by configuration to a runner's toolbox,
// before the backend is opened (which offers them to the service): package
// mcptools registers one for the MCP servers of the settings. It reads its
// own settings with [OpenRequest.BackendSettings], adds its tools to
// req.Tools (never nil), and returns what the runner's Close must close, or
// nil when the configuration names nothing for it.
type ToolSource func(ctx context.Context, req *OpenRequest) (io.Closer, error)

var (
	sourcesMu sync.RWMutex
	sources   = map[string]ToolSource{}
)

// builtinSources names, for each tool source of toolrelay's own, the
// package that registers it and the environment variable whose presence
// (like that of its section in the file) says the configuration uses it.
var builtinSources = map[string]struct{ pkg, env string }{
	"mcp": {"github.com/toolrelay/toolrelay/mcptools", "TOOLRELAY_MCP_SERVERS"},
}

// RegisterTools makes a tool source available under name, the section of
// the configuration it reads; a package calls it from an init function,
// as backends call [Register]. Open calls every registered source, in the
// order of their names. It panics if name is empty or already registered,
// or if src is nil.
func RegisterTools(name string, src ToolSource) {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	if name == "" || src == nil {
		panic("adapter: RegisterTools with an empty name or a nil source")
	}
	if _, dup := sources[name]; dup {
		panic(fmt.Sprintf("adapter: tool source %q registered twice", name))
	}
	sources[name] = src
}

// addTools runs the registered tool sources for req, and returns what
// they opened. A configuration that names a built-in source the program
// does not link fails with code Unimplemented, naming the import to add.
func addTools(ctx context.Context, req *OpenRequest) (closers, error) {
	sourcesMu.RLock()
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sourcesMu.RUnlock()
	slices.Sort(names)
	for name, b := range builtinSources {
		if slices.Contains(names, name) {
			continue
		}
		_, inFile := req.file.section(name)
		if inFile || os.Getenv(b.env) != "" {
			return nil, &errcode.Error{Code: errcode.Unimplemented, Op: "adapter: open", Err: fmt.Errorf("the configuration names tools of %q, which this program does not link: import _ %q", name, b.pkg)}
		}
	}
	var opened closers
	for _, n := range names {
		sourcesMu.RLock()
		src := sources[n]
		sourcesMu.RUnlock()
		c, err := src(ctx, req)
		if err != nil {
			opened.Close()
			return nil, err
		}
		if c != nil {
			opened = append(opened, c)
		}
	}
	return opened, nil
}
