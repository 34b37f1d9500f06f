package mcptools

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
)

// maxName is the longest tool name the services accept.
const maxName = 64

// ToolName returns the name a tool called name by its MCP server gets in
// the toolbox, with prefix before it: every character the services refuse
// (anything but ASCII letters, digits, '_' and '-') becomes '_', and a
// name longer than 64 characters keeps its first 55 followed by '_' and 8
// hexadecimal digits of a hash of the whole, so that two long names stay
// apart.
func ToolName(prefix, name string) string {
	full := prefix + name
	var b strings.Builder
	b.Grow(len(full))
	for _, r := range full {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" {
		return "_"
	}
	if len(n) > maxName {
		sum := sha256.Sum256([]byte(full))
		n = n[:maxName-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return n
}

// matchAny reports whether name matches one of patterns: a name, or a
// path.Match pattern such as "get_*".
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name {
			return true
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// offered reports whether the server's allow- and deny-lists let its tool
// name through: on the allow-list, when there is one, and not on the
// deny-list.
func (s *Server) offered(name string) bool {
	if len(s.Allow) > 0 && !matchAny(s.Allow, name) {
		return false
	}
	return !matchAny(s.Deny, name)
}
