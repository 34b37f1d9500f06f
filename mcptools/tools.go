package mcptools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
)

// tool makes the toolbox's tool for t, a tool the server listed: named by
// [ToolName], its schema passed on as the server gave it (with "type" and
// "properties" added when missing, which the services require), strict
// when the schema already is, its calls sent to the server.
func (c *conn) tool(t *mcp.Tool) (*core.Tool, error) {
	schema, err := inputSchema(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	opts := core.ToolOptions{Timeout: c.srv.Timeout, Middleware: c.srv.Middleware, Server: c.srv.Name}
	if a := t.Annotations; a != nil && c.srv.TrustHints {
		opts.ReadOnly = a.ReadOnlyHint
		opts.Idempotent = a.IdempotentHint
		if a.DestructiveHint != nil && *a.DestructiveHint {
			opts.Approval = core.ApprovalAlways(fmt.Sprintf("MCP server %q declares tool %q destructive", c.srv.Name, t.Name))
		}
	}
	if c.srv.Approval != nil {
		if rule := c.srv.Approval(t.Name); rule != nil {
			opts.Approval = rule
		}
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	mcpName := t.Name
	fn := func(ctx context.Context, args json.RawMessage) (any, error) { return c.call(ctx, mcpName, args) }
	name := ToolName(c.srv.Prefix, t.Name)
	opts.Strict = true
	tool, err := core.NewRawTool(name, desc, schema, fn, &opts)
	if err != nil {
		opts.Strict = false
		tool, err = core.NewRawTool(name, desc, schema, fn, &opts)
	}
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return tool, nil
}

// inputSchema returns the JSON of an MCP tool's input schema, with
// "type": "object" and "properties": {} added where they are missing.
func inputSchema(s any) (json.RawMessage, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("input schema is not a JSON object")
	}
	_, typed := m["type"]
	_, props := m["properties"]
	if typed && props {
		return b, nil
	}
	if !typed {
		m["type"] = "object"
	}
	if m["type"] == "object" && !props {
		m["properties"] = map[string]any{}
	}
	return json.Marshal(m)
}
