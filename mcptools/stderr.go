package mcptools

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxLogLine bounds a line of a stdio server's standard error as it is
// logged; the rest of a longer line is dropped.
const maxLogLine = 4 << 10

// lineLog logs what a stdio server writes to its standard error, a line at
// a time, at Debug.
type lineLog struct {
	logger *slog.Logger
	server string
	mu     sync.Mutex
	buf    []byte
	cut    bool // the line being read was cut
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLogLine - len(l.buf); len(chunk) > room {
			chunk, l.cut = chunk[:room], true
		}
		l.buf = append(l.buf, chunk...)
		if i < 0 {
			break
		}
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLog) flush() {
	l.logger.Debug("toolrelay: MCP server stderr", "server", l.server, "line", string(l.buf), "cut", l.cut)
	l.buf, l.cut = l.buf[:0], false
}
