package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
)

// Settings name the MCP servers whose tools a program opened by package
// adapter offers: the section "mcp" of the configuration file
// ({"mcp": {"servers": {"weather": {...}}}}), the environment variable
// TOOLRELAY_MCP_SERVERS (the servers' object as JSON, which replaces the
// file's), or a Settings value in adapter.Options.BackendSettings.
type Settings struct {
	Servers ServerTable `json:"servers,omitempty" env:"TOOLRELAY_MCP_SERVERS"`
}

// ServerTable holds servers' settings by the servers' names.
type ServerTable map[string]ServerSettings

// UnmarshalText reads the table as JSON, refusing unknown keys; its
// errors never repeat the text (which may hold a secret).
func (t *ServerTable) UnmarshalText(b []byte) error {
	var m map[string]ServerSettings
	if err := decodeStrict(b, &m); err != nil {
		return err
	}
	*t = m
	return nil
}

// ServerSettings configure one server, as [Server] does (see it for
// what each setting means). In Env and Headers values, ${NAME} is
// replaced by the program's environment variable NAME, so that secrets
// stay out of the file.
type ServerSettings struct {
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Dir         string            `json:"dir,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Prefix      string            `json:"prefix,omitempty"`
	Allow       []string          `json:"allow,omitempty"`
	Deny        []string          `json:"deny,omitempty"`
	Approve     []string          `json:"approve,omitempty"` // tools (or patterns) whose calls need approval
	TrustHints  bool              `json:"trust_hints,omitempty"`
	Timeout     adapter.Duration  `json:"timeout,omitempty"`
	MaxRestarts int               `json:"max_restarts,omitempty"`
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("not valid JSON (at byte %d)", se.Offset)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: wrong type", te.Field)
		}
		return err // unknown field: names the key only
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${NAME} in s with the environment variable NAME.
func expand(s string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string { return os.Getenv(m[2 : len(m)-1]) })
}

// Servers returns the servers the settings name, in the order of their
// names.
func (s *Settings) servers() []Server {
	var out []Server
	for _, name := range slices.Sorted(maps.Keys(s.Servers)) {
		c := s.Servers[name]
		srv := Server{
			Name: name, Command: c.Command, Args: c.Args, Dir: c.Dir, URL: c.URL,
			Prefix: c.Prefix, Allow: c.Allow, Deny: c.Deny, TrustHints: c.TrustHints,
			Timeout: time.Duration(c.Timeout), MaxRestarts: c.MaxRestarts,
		}
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			srv.Env = append(srv.Env, k+"="+expand(c.Env[k]))
		}
		if len(c.Headers) > 0 {
			srv.Headers = make(map[string]string, len(c.Headers))
			for k, v := range c.Headers {
				srv.Headers[k] = expand(v)
			}
		}
		if len(c.Approve) > 0 {
			srv.Approval = ApproveNames(c.Approve...)
		}
		out = append(out, srv)
	}
	return out
}

func init() {
	adapter.RegisterTools("mcp", openConfigured)
}

// openConfigured connects to the MCP servers of the configuration, for
// adapter.Open.
func openConfigured(ctx context.Context, req *adapter.OpenRequest) (io.Closer, error) {
	var s Settings
	if err := req.BackendSettings("mcp", &s); err != nil {
		return nil, err
	}
	if len(s.Servers) == 0 {
		return nil, nil
	}
	set, err := Connect(ctx, req.Tools, s.servers(), &Options{Logger: req.Logger})
	if err != nil {
		return nil, err
	}
	return set, nil
}

// UnmarshalJSON reads the table from the configuration file, refusing
// unknown keys.
func (t *ServerTable) UnmarshalJSON(b []byte) error { return t.UnmarshalText(b) }
