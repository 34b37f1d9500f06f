package openai

import (
	"context"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// reoffer sends the toolbox's tools to st's session when the toolbox
// changed since they were last offered to it (an MCP server's tools
// changed mid-run, say), before the step's results go, so that the model's
// next step may call the new set. The tools of an agent named by
// Options.Agent are the agent's, not the toolbox's: they are left alone.
func (st *thread) reoffer(ctx context.Context) error {
	b := st.b
	if b.opts.Agent != "" || b.tools == nil {
		return nil
	}
	tools, v := b.tools.Snapshot()
	if !st.offeredKnown {
		b.agentMu.Lock()
		st.offered, st.offeredKnown = b.agentTools, true
		b.agentMu.Unlock()
	}
	if v == st.offered {
		return nil
	}
	params, err := sessionTools(tools)
	if err != nil {
		return err
	}
	if _, err := b.client.Beta.Agents.Sessions.Update(ctx, st.id, oai.BetaAgentSessionUpdateParams{Agent: oai.BetaAgentSessionUpdateParamsAgent{Tools: &params}}); err != nil {
		return apiError("offer the changed tools", err)
	}
	st.offered = v
	return nil
}

// sessionTools are tools as a session's agent.tools: one function tool
// each, and a tool_search tool when one is deferred.
func sessionTools(tools []*core.Tool) ([]oai.AgentToolParamUnion, error) {
	out := []oai.AgentToolParamUnion{}
	deferred := false
	for _, t := range tools {
		schema, err := schemaMap(t.Parameters())
		if err != nil {
			return nil, errcode.Errorf(errcode.InvalidArgument, "openai: tool %q: %v", t.Name(), err)
		}
		fn := &oai.AgentToolParamFunction{Name: t.Name(), Description: t.Description(), Parameters: schema}
		if t.DeferLoading() {
			fn.DeferLoading = oai.Bool(true)
			deferred = true
		}
		out = append(out, oai.AgentToolParamUnion{OfParamFunction: fn})
	}
	if deferred {
		search := oai.NewAgentToolParamToolSearch()
		out = append([]oai.AgentToolParamUnion{{OfParamToolSearch: &search}}, out...)
	}
	return out, nil
}
