package foundry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/errcode"
)

// This file holds how the backend runs an existing agent (Options.Agent)
// as the 2026 Agent object describes it: its state, its endpoint and the
// version selector that routes the endpoint's traffic, and the kinds of
// its versions' definitions. Sources: Learn's @azure/ai-projects reference
// (Agent: state, state_source, agent_endpoint; AgentEndpointConfig:
// version_selector; VersionSelector, FixedRatioVersionSelectionRule;
// AgentKind "prompt" | "hosted" | "workflow" | "external";
// HostedAgentDefinition: container_protocol_versions, tools;
// WorkflowAgentDefinition: workflow; ExternalAgentDefinition:
// registration only), and public samples that call
// {project}/agents/{name}/endpoint/protocols/openai/responses?api-version=v1
// with an OpenAI client whose base URL is the endpoint's
// .../protocols/openai (microsoft-foundry/foundry-samples and others).

// maxServedVersions bounds the versions of an endpoint's selector whose
// tools are checked.
const maxServedVersions = 16

// agentPlan is how the backend runs an existing agent: the route of its
// requests, the versions they may run, and whether they run in hosted
// sessions.
type agentPlan struct {
	// endpoint: the requests go to the agent's own endpoint
	// ({project}/agents/{name}/endpoint/protocols/openai/), which runs
	// the version its selector serves; otherwise to the project's
	// {project}/openai/v1/ with an agent_reference.
	endpoint bool
	// hosted: a version the requests may run is a hosted agent's, whose
	// turns run in a session (a sandbox) the backend keeps per thread.
	hosted bool
	// versions are the versions the requests may run: the one named, or
	// those the endpoint's selector routes traffic to, or the latest.
	versions []*versionInfo
}

// planAgent reads the agent name and decides how to run it, version
// naming the version to run ("" for the one the service chooses). It
// refuses, before any responses request, a disabled agent
// (FailedPrecondition), a version whose kind toolrelay cannot run
// (Unimplemented), and a version named for a hosted agent whose endpoint
// does not serve it alone (FailedPrecondition).
//
// An agent named without a version whose endpoint is configured is called
// on its endpoint, and may run any version the endpoint's selector routes
// traffic to: its tools are checked against each of them (not against
// versions.latest: creating a version does not move the endpoint's
// traffic). A version named runs on the project's route, where the agent
// reference names it, unless the agent is hosted: hosted agents are
// reachable only on their endpoint.
func (b *Backend) planAgent(ctx context.Context, name, version string) (*agentPlan, error) {
	a, err := b.agents.getAgent(ctx, name)
	if err != nil {
		return nil, err
	}
	if a.State == "disabled" {
		return nil, disabledError(a)
	}
	p := &agentPlan{endpoint: a.Endpoint != nil && version == ""}
	switch {
	case version != "":
		v, err := b.agents.getVersion(ctx, name, version)
		if err != nil {
			return nil, err
		}
		p.versions = []*versionInfo{v}
	case p.endpoint:
		if p.versions, err = b.servedVersions(ctx, a); err != nil {
			return nil, err
		}
	default:
		p.versions = []*versionInfo{&a.Versions.Latest}
	}
	for _, v := range p.versions {
		hosted, err := checkKind(name, v)
		if err != nil {
			return nil, err
		}
		p.hosted = p.hosted || hosted
	}
	if p.hosted && !p.endpoint && version != "" {
		// A hosted agent runs on its endpoint only: the version named
		// must be the one the endpoint serves.
		served := []*versionInfo{&a.Versions.Latest}
		if a.Endpoint != nil {
			if served, err = b.servedVersions(ctx, a); err != nil {
				return nil, err
			}
		}
		if len(served) != 1 || served[0].Version != version {
			return nil, errcode.Errorf(errcode.FailedPrecondition, "foundry: agent %q is a hosted agent, reachable only on its endpoint, which serves version %s, not version %q alone: name the agent without a version, or route the endpoint's traffic to version %q with its version selector", name, versionList(served), version, version)
		}
	}
	p.endpoint = p.endpoint || p.hosted
	return p, nil
}

// servedVersions returns the versions the endpoint of agent a routes
// traffic to (a share above zero), at most maxServedVersions of them; the
// latest when its selector has no rule.
func (b *Backend) servedVersions(ctx context.Context, a *agentObject) ([]*versionInfo, error) {
	var names []string
	if vs := a.Endpoint.VersionSelector; vs != nil {
		for _, r := range vs.Rules {
			if r.AgentVersion == "" || r.TrafficPercentage != nil && *r.TrafficPercentage <= 0 || slices.Contains(names, r.AgentVersion) {
				continue
			}
			names = append(names, r.AgentVersion)
		}
	}
	if len(names) == 0 {
		return []*versionInfo{&a.Versions.Latest}, nil
	}
	if len(names) > maxServedVersions {
		b.logger.Warn("foundry: the agent endpoint routes traffic to more versions than are checked; the tools of the others are not checked", "agent", a.Name, "checked", maxServedVersions, "versions", len(names))
		names = names[:maxServedVersions]
	}
	out := make([]*versionInfo, 0, len(names))
	for _, n := range names {
		if n == a.Versions.Latest.Version {
			out = append(out, &a.Versions.Latest)
			continue
		}
		v, err := b.agents.getVersion(ctx, a.Name, n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// versionList names versions for an error: "1", or "[1 2]".
func versionList(vs []*versionInfo) string {
	if len(vs) == 1 {
		return strconv.Quote(vs[0].Version)
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = strconv.Quote(v.Version)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// disabledError is the refusal of a disabled agent.
func disabledError(a *agentObject) error {
	from := ""
	if a.StateSource != "" {
		from = " by " + strconv.Quote(a.StateSource)
	}
	return errcode.Errorf(errcode.FailedPrecondition, "foundry: agent %q is disabled (state %q%s): its endpoint rejects requests; enable the agent in its project to run it", a.Name, a.State, from)
}

// checkKind reports whether version v of agent name is a hosted agent's,
// refusing a kind toolrelay cannot run over the Responses protocol with
// an Unimplemented error that names it:
//
//   - prompt (or no kind): runs;
//   - hosted: runs, on the agent's endpoint, each thread in a session of
//     its own; refused when its container_protocol_versions name
//     protocols and none is "responses" (the container then speaks
//     another protocol: invocations, activity, a2a);
//   - workflow: refused. Its definition is a workflow (CSDL YAML) and
//     declares no tools: the agents it invokes run their tools on the
//     service, and its output items (workflow_action, structured_outputs)
//     are no calls a caller answers, so toolrelay has nothing to run;
//   - external: refused. Its registration is metadata only (traces and
//     evaluations of an agent that runs outside Foundry): there is nothing
//     to call;
//   - any other kind: refused.
func checkKind(name string, v *versionInfo) (hosted bool, err error) {
	var def struct {
		Kind      string `json:"kind"`
		Protocols []struct {
			Protocol string `json:"protocol"`
		} `json:"container_protocol_versions"`
	}
	if err := json.Unmarshal(v.Definition, &def); err != nil {
		return false, errcode.Errorf(errcode.Unimplemented, "foundry: agent %q version %q: its definition cannot be read: %v", name, v.Version, err)
	}
	switch def.Kind {
	case "prompt", "":
		return false, nil
	case "hosted":
		if len(def.Protocols) > 0 && !slices.ContainsFunc(def.Protocols, func(p struct {
			Protocol string `json:"protocol"`
		}) bool {
			return p.Protocol == "responses"
		}) {
			var ps []string
			for _, p := range def.Protocols {
				ps = append(ps, p.Protocol)
			}
			return false, errcode.Errorf(errcode.Unimplemented, "foundry: agent %q version %q is a hosted agent whose container speaks %q, not the Responses protocol toolrelay runs agents over", name, v.Version, ps)
		}
		return true, nil
	case "workflow":
		return false, errcode.Errorf(errcode.Unimplemented, "foundry: agent %q version %q is a workflow agent: toolrelay does not run workflows (a workflow declares no function tools; the agents it invokes run theirs on the service, and its workflow_action items are not calls to answer)", name, v.Version)
	case "external":
		return false, errcode.Errorf(errcode.Unimplemented, "foundry: agent %q version %q is an external agent: Foundry keeps its registration only (it runs outside Foundry), so there is nothing to call", name, v.Version)
	}
	return false, errcode.Errorf(errcode.Unimplemented, "foundry: agent %q version %q is of kind %q, which toolrelay does not run (it runs prompt and hosted agents)", name, v.Version, def.Kind)
}

// endpointOptions returns the request options that send the OpenAI client's
// requests (responses and conversations) to the endpoint of agent name,
// with the api-version the endpoint takes, and that drop the agent
// reference the loop puts in a create-response request: the route names
// the agent, and the endpoint's version selector, not a reference, picks
// the version.
func endpointOptions(endpoint, name string, s *sessions) []option.RequestOption {
	return []option.RequestOption{
		option.WithBaseURL(endpoint + "/agents/" + url.PathEscape(name) + "/endpoint/protocols/openai/"),
		option.WithQuery("api-version", agentsAPIVersion),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			box := boxFrom(req.Context())
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/protocols/openai/responses") {
				if err := rewriteBody(req, box.id()); err != nil {
					return nil, err
				}
			}
			resp, err := next(req)
			if err == nil && resp != nil && s != nil {
				s.observe(box, resp.Header.Get(sessionHeader))
			}
			return resp, err
		}),
	}
}

// rewriteBody drops the agent_reference of a create-response request and,
// when session is not "", names the hosted agent session its turn runs
// in (agent_session_id).
func rewriteBody(req *http.Request, session string) error {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil && m != nil {
		delete(m, "agent_reference")
		if session != "" {
			m["agent_session_id"], _ = json.Marshal(session)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the request as written
		if err := enc.Encode(m); err != nil {
			return err
		}
		raw = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	req.ContentLength = int64(len(raw))
	return nil
}
