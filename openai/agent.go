package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/owned"
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
			return asyncRefused("agent "+b.opts.Agent, t.Name)
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

// asyncRefused is the error refusing an agent that declares function
// name async (a function tool's async: "the agent continues without
// waiting for the function result", openai-go betaagent.go
// AgentToolFunction): such calls never enter required_actions, so the
// backend would never run them. who names the agent.
func asyncRefused(who, name string) error {
	return errcode.Errorf(errcode.FailedPrecondition, "openai: %s declares function %q async: toolrelay answers every function call within its turn, so it runs synchronous functions only; declare it without async", who, name)
}

// checkSession reads session id, once per thread (and whenever a run asks
// for a format), before the backend sends it input: a session whose agent,
// as the session runs it (the agent's tools with the session's overrides:
// openai-go betaagent.go AgentSession.Agent, AgentSessionAgent.Tools),
// declares a function async is refused as an existing agent is at Open
// (FailedPrecondition), and a format other than the session's is refused
// (see checkSessionFormat). The sessions this backend creates need no
// check: their agent is the toolbox's, or the one Open checked.
func (b *Backend) checkSession(ctx context.Context, id string, f *driver.Format, text oai.AgentTextParam) error {
	st, err := b.thread(id)
	if err != nil {
		return err
	}
	if st.agentChecked && f == nil {
		return nil
	}
	sess, err := b.client.Beta.Agents.Sessions.Get(ctx, id)
	if err != nil {
		return apiError("read session "+id, err)
	}
	for _, t := range sess.Agent.Tools {
		if t.Type == "function" && t.Async {
			return asyncRefused(fmt.Sprintf("session %s (its agent %s, as the session runs it)", id, sess.Agent.ID), t.Name)
		}
	}
	st.agentChecked = true
	if f != nil {
		return checkSessionFormat(id, sess, f, text)
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
// made from the toolbox (found or made on first use, and again when the
// toolbox changed).
func (b *Backend) agent(ctx context.Context) (string, error) {
	if b.opts.Agent != "" {
		return b.opts.Agent, nil
	}
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	v := b.tools.Version()
	if b.agentID != "" && v == b.agentTools {
		return b.agentID, nil
	}
	params, err := agentParams(b.tools, b.opts.Model, b.opts.Instructions)
	if err != nil {
		return "", err
	}
	id, err := b.findOrMakeAgent(ctx, params)
	if err != nil {
		return "", err
	}
	b.agentID, b.agentTools = id, v
	return id, nil
}

// maxAgentPages bounds the listing of agents that looks for one of the
// definition wanted (100 agents a page, newest first).
const maxAgentPages = 10

// findOrMakeAgent returns the id of an agent of params' definition: one
// that a backend (of this process or another) made before, whose metadata
// holds the definition's digest, or else a new one. The caller holds
// agentMu.
func (b *Backend) findOrMakeAgent(ctx context.Context, params oai.BetaAgentNewParams) (string, error) {
	digest := params.Metadata[owned.DefinitionKey]
	pager := b.client.Beta.Agents.ListAutoPaging(ctx, oai.BetaAgentListParams{Limit: oai.Int(100), Order: oai.BetaAgentListParamsOrderDesc})
	for n := 0; n < 100*maxAgentPages && pager.Next(); n++ {
		if a := pager.Current(); a.Metadata[owned.DefinitionKey] == digest {
			b.useAgent(a.ID, true)
			return a.ID, nil
		}
	}
	if err := pager.Err(); err != nil {
		return "", apiError("list agents", err)
	}
	agent, err := b.client.Beta.Agents.New(ctx, params, option.WithHeader("Idempotency-Key", newKey()))
	if err != nil {
		return "", apiError("create agent", err)
	}
	b.useAgent(agent.ID, true)
	return agent.ID, nil
}

// useAgent records an agent that Close deletes once no session uses it:
// one made from a definition (made is true), or the agent of a session
// taken over from another process, which Close deletes only if its
// metadata shows a backend made it. The caller holds agentMu.
func (b *Backend) useAgent(id string, made bool) {
	if b.agents == nil {
		b.agents = map[string]bool{}
	}
	b.agents[id] = b.agents[id] || made
}

// forgetAgent drops id as the agent new sessions run, after the service
// said it is gone (another process deleted it once no session used it):
// the next session finds or makes one again.
func (b *Backend) forgetAgent(id string) {
	b.agentMu.Lock()
	defer b.agentMu.Unlock()
	if b.agentID == id {
		b.agentID = ""
	}
	delete(b.agents, id)
}

// closeAgents deletes, of the agents the backend made or found (and those
// of the sessions it took over), each that a backend made and that no
// session uses any more: sessions paused for a decision, here or in
// another process, keep theirs. It returns the errors, joined.
func (b *Backend) closeAgents(ctx context.Context) error {
	b.agentMu.Lock()
	agents := maps.Clone(b.agents)
	b.agentMu.Unlock()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		if !agents[id] {
			a, err := b.client.Beta.Agents.Get(ctx, id)
			if err != nil || a.Metadata[owned.DefinitionKey] == "" {
				continue // gone, or not one a backend made
			}
		}
		page, err := b.client.Beta.Agents.Sessions.List(ctx, oai.BetaAgentSessionListParams{AgentID: oai.String(id), Limit: oai.Int(1)})
		if err != nil {
			errs = append(errs, apiError("list the sessions of agent "+id, err))
			continue
		}
		if len(page.Data) > 0 {
			b.log.Info("openai: the agent stays: sessions use it (paused for a decision, or another process's)", "agent", id)
			continue
		}
		if _, err := b.client.Beta.Agents.Delete(ctx, id); err != nil && !isNotFound(err) {
			errs = append(errs, apiError("delete agent "+id, err))
		}
	}
	return errors.Join(errs...)
}

// agentParams defines an agent from a toolbox: one function tool per tool,
// its schema sent as it is (the API has no strict flag), defer_loading
// where asked, and a tool_search tool whenever a tool is deferred; its
// metadata holds the definition's digest (owned.DefinitionKey).
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
	// The digest of the definition (metadata aside) marks the agent as one
	// a backend made, and finds it again.
	digest, err := owned.Digest(p)
	if err != nil {
		return p, errcode.Errorf(errcode.InvalidArgument, "openai: the agent's definition: %v", err)
	}
	p.Metadata = map[string]string{owned.DefinitionKey: digest}
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
