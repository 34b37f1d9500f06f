package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// checkAgent reads the agent named by Options.Agent and records the
// functions it declares that the toolbox does not implement.
func (b *Backend) checkAgent(ctx context.Context) error {
	agent, err := b.client.Beta.Agents.Get(ctx, b.opts.Agent)
	if err != nil {
		return apiError("read agent "+b.opts.Agent, err)
	}
	var missing []string
	for _, t := range agent.Tools {
		if t.Type == "function" && t.Async {
			return errcode.Errorf(errcode.FailedPrecondition, "openai: agent %s declares function %q async: toolrelay answers every function call within its turn, so it runs synchronous functions only; declare it without async", b.opts.Agent, t.Name)
		}
		if t.Type == "function" && b.tools.Lookup(t.Name) == nil {
			missing = append(missing, t.Name)
		}
	}
	slices.Sort(missing)
	b.agentMu.Lock()
	b.missing, b.agentModel = missing, agent.Model
	b.agentMu.Unlock()
	if len(missing) > 0 {
		b.log.WarnContext(ctx, "openai: the agent declares functions with no implementation; calls to them will fail",
			"agent", b.opts.Agent, "functions", missing)
	}
	return nil
}

// model returns the model of the agent the sessions run: Options.Model
// for the agent made from the toolbox, or the existing agent's.
func (b *Backend) model() string {
	if b.opts.Agent == "" {
		return b.opts.Model
	}
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	return b.agentModel
}

// agent returns the id of the agent to run: Options.Agent, or the agent
// made from the toolbox (made on first use).
func (b *Backend) agent(ctx context.Context) (string, error) {
	if b.opts.Agent != "" {
		return b.opts.Agent, nil
	}
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	v := b.tools.Version()
	if b.agentID != "" && v != b.agentTools {
		// The toolbox changed since the agent was made: new sessions get
		// the new set.
		params, err := agentParams(b.tools, b.opts.Model, b.opts.Instructions)
		if err != nil {
			return "", err
		}
		if _, err := b.client.Beta.Agents.Update(ctx, b.agentID, oai.BetaAgentUpdateParams{Tools: params.Tools}); err != nil {
			return "", apiError("update agent", err)
		}
		b.agentTools = v
	}
	if b.agentID != "" {
		return b.agentID, nil
	}
	params, err := agentParams(b.tools, b.opts.Model, b.opts.Instructions)
	if err != nil {
		return "", err
	}
	agent, err := b.client.Beta.Agents.New(ctx, params, option.WithHeader("Idempotency-Key", newKey()))
	if err != nil {
		return "", apiError("create agent", err)
	}
	b.agentID, b.agentCreated, b.agentTools = agent.ID, true, v
	return agent.ID, nil
}

// agentParams defines an agent from a toolbox: one function tool per tool,
// its schema sent as it is (the API has no strict flag), defer_loading
// where asked, and a tool_search tool whenever a tool is deferred.
func agentParams(tools *core.Toolbox, model, instructions string) (oai.BetaAgentNewParams, error) {
	p := oai.BetaAgentNewParams{Model: model, Name: oai.String("toolrelay")}
	if instructions != "" {
		p.Instructions = oai.String(instructions)
	}
	deferred := false
	for _, t := range tools.Tools() {
		schema, err := schemaMap(t.Parameters())
		if err != nil {
			return p, errcode.Errorf(errcode.InvalidArgument, "openai: tool %q: %v", t.Name(), err)
		}
		fn := &oai.PersistedAgentToolParamFunction{Name: t.Name(), Description: t.Description(), Parameters: schema}
		if t.DeferLoading() {
			fn.DeferLoading = oai.Bool(true)
			deferred = true
		}
		p.Tools = append(p.Tools, oai.PersistedAgentToolParamUnion{OfParamFunction: fn})
	}
	if deferred {
		search := oai.NewPersistedAgentToolParamToolSearch()
		p.Tools = append([]oai.PersistedAgentToolParamUnion{{OfParamToolSearch: &search}}, p.Tools...)
	}
	return p, nil
}

// schemaMap decodes a JSON Schema object, keeping numbers as written.
func schemaMap(schema json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}
