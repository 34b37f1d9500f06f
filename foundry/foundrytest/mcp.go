package foundrytest

import (
	"encoding/json"
	"slices"
)

// mcpServerLabel returns the server_label of the MCP tool among tools
// that serves a call of name: the first whose allowed_tools name it, else
// the first that does not restrict its tools, else the first MCP tool.
// Without an MCP tool (a script's approval call that the request declared
// no tool for) it is "fake-mcp".
func mcpServerLabel(tools json.RawMessage, name string) string {
	var list []struct {
		Type         string          `json:"type"`
		ServerLabel  string          `json:"server_label"`
		AllowedTools json.RawMessage `json:"allowed_tools"`
	}
	json.Unmarshal(tools, &list)
	label, open := "", ""
	for _, t := range list {
		if t.Type != "mcp" {
			continue
		}
		if label == "" {
			label = t.ServerLabel
		}
		var names []string
		var filter struct {
			ToolNames []string `json:"tool_names"`
		}
		if json.Unmarshal(t.AllowedTools, &names) != nil && json.Unmarshal(t.AllowedTools, &filter) == nil {
			names = filter.ToolNames
		}
		switch {
		case slices.Contains(names, name):
			return t.ServerLabel
		case len(names) == 0 && open == "":
			open = t.ServerLabel
		}
	}
	switch {
	case open != "":
		return open
	case label != "":
		return label
	}
	return "fake-mcp"
}

// mcpCalls returns the mcp_call items of the calls the service made once
// a person approved them: one for each approving mcp_approval_response
// among answers, of the request it answers among waiting. The fake runs
// no MCP server: a call's output is "approved", what the model is told.
func (s *Server) mcpCalls(waiting, answers []*item) []*item {
	var made []*item
	for _, a := range answers {
		if a.Type != "mcp_approval_response" || !a.Approve {
			continue
		}
		i := slices.IndexFunc(waiting, func(c *item) bool { return c.Type == "mcp_approval_request" && c.CallID == a.CallID })
		if i < 0 {
			continue
		}
		req := waiting[i]
		made = append(made, &item{Type: "mcp_call", ID: s.newID("mcp_"), Status: "completed", CallID: req.CallID,
			Name: req.Name, Arguments: req.Arguments, ServerLabel: req.ServerLabel, Output: mustJSON("approved")})
	}
	return made
}
