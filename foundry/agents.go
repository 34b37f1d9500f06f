package foundry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/owned"
	"github.com/toolrelay/toolrelay/internal/respond"
)

// agentsAPIVersion is the api-version every agents route requires.
const agentsAPIVersion = "v1"

var agentNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkAgentName refuses a name the service would refuse.
func checkAgentName(name string) error {
	if !agentNameRE.MatchString(name) {
		return errcode.Errorf(errcode.InvalidArgument, "foundry: invalid agent name %q: use at most 63 letters, digits and hyphens, starting and ending with a letter or digit", name)
	}
	return nil
}

// agentsClient calls the agents API of a project through an azcore
// pipeline.
type agentsClient struct {
	endpoint string // project endpoint, no trailing slash
	pl       runtime.Pipeline
}

// versionInfo is an agent version as the service describes it.
type versionInfo struct {
	Metadata    map[string]string `json:"metadata,omitempty"`
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Version     string            `json:"version"`
	Description string            `json:"description,omitempty"`
	CreatedAt   int64             `json:"created_at"`
	Definition  json.RawMessage   `json:"definition"`
	Status      string            `json:"status,omitempty"`
}

// agentObject is an agent as the service describes it (the 2026 Agent
// object: Learn, @azure/ai-projects Agent and AgentEndpointConfig).
type agentObject struct {
	Name     string `json:"name"`
	Versions struct {
		Latest versionInfo `json:"latest"`
	} `json:"versions"`
	// State is "enabled" or "disabled": it "controls whether the agent
	// endpoint accepts or rejects requests"; StateSource says where a
	// disabled state comes from.
	State       string `json:"state,omitempty"`
	StateSource string `json:"state_source,omitempty"`
	// Endpoint is the agent's endpoint configuration, nil when none is
	// configured.
	Endpoint *agentEndpoint `json:"agent_endpoint,omitempty"`
}

// agentEndpoint is an agent's endpoint configuration (AgentEndpointConfig):
// its version selector routes the endpoint's traffic among the agent's
// versions ("creating a new version does not move traffic").
type agentEndpoint struct {
	VersionSelector *struct {
		Rules []versionRule `json:"version_selection_rules"`
	} `json:"version_selector,omitempty"`
}

// versionRule is a rule of a version selector (VersionSelectionRule; the
// one type defined is FixedRatio, with traffic_percentage).
type versionRule struct {
	Type              string   `json:"type"`
	AgentVersion      string   `json:"agent_version"`
	TrafficPercentage *float64 `json:"traffic_percentage,omitempty"`
}

type promptDefinition struct {
	Kind         string                 `json:"kind"`
	Model        string                 `json:"model"`
	Instructions string                 `json:"instructions,omitempty"`
	Tools        []respond.FunctionTool `json:"tools,omitempty"`
	Text         *textConfig            `json:"text,omitempty"`
}

// textConfig is the text member of a definition: the format of the
// agent's answers, as a response's text.format.
type textConfig struct {
	Format textFormat `json:"format"`
}

type textFormat struct {
	Type   string          `json:"type"` // json_schema
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// textOf returns the text member of a definition whose answers follow
// format (nil for none).
func textOf(format *driver.Format) (*textConfig, error) {
	if format == nil {
		return nil, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(format.Schema, &schema); err != nil || schema == nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: format %q: the schema is not a JSON object", format.Name)
	}
	return &textConfig{Format: textFormat{Type: "json_schema", Name: format.Name, Schema: format.Schema, Strict: format.Strict}}, nil
}

type versionRequest struct {
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Definition  promptDefinition  `json:"definition"`
}

func (c *agentsClient) url(path ...string) string {
	u := c.endpoint + "/agents"
	for _, p := range path {
		u += "/" + url.PathEscape(p)
	}
	return u + "?api-version=" + agentsAPIVersion
}

// do sends a request with an optional JSON body and decodes a 200/201
// answer into out (if not nil). An error answer is an
// *azcore.ResponseError.
func (c *agentsClient) do(ctx context.Context, method, u string, body, out any) error {
	req, err := runtime.NewRequest(ctx, method, u)
	if err != nil {
		return err
	}
	if body != nil {
		if err := runtime.MarshalAsJSON(req, body); err != nil {
			return err
		}
	}
	resp, err := c.pl.Do(req)
	if err != nil {
		return err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		return runtime.NewResponseError(resp)
	}
	if out == nil {
		runtime.Drain(resp)
		return nil
	}
	return runtime.UnmarshalAsJSON(resp, out)
}

// createVersion creates a version of agent name (and the agent, if it does
// not exist yet).
func (c *agentsClient) createVersion(ctx context.Context, name string, req *versionRequest) (*versionInfo, error) {
	var v versionInfo
	if err := c.do(ctx, http.MethodPost, c.url(name, "versions"), req, &v); err != nil {
		return nil, fmt.Errorf("foundry: create a version of agent %q: %w", name, err)
	}
	return &v, nil
}

// getAgent returns the agent name.
func (c *agentsClient) getAgent(ctx context.Context, name string) (*agentObject, error) {
	var a agentObject
	if err := c.do(ctx, http.MethodGet, c.url(name), nil, &a); err != nil {
		return nil, fmt.Errorf("foundry: get agent %q: %w", name, err)
	}
	return &a, nil
}

// getVersion returns a version of agent name; "" means the latest.
func (c *agentsClient) getVersion(ctx context.Context, name, version string) (*versionInfo, error) {
	if version == "" {
		a, err := c.getAgent(ctx, name)
		if err != nil {
			return nil, err
		}
		return &a.Versions.Latest, nil
	}
	var v versionInfo
	if err := c.do(ctx, http.MethodGet, c.url(name, "versions", version), nil, &v); err != nil {
		return nil, fmt.Errorf("foundry: get version %q of agent %q: %w", version, name, err)
	}
	return &v, nil
}

// deleteVersion deletes a version of agent name.
func (c *agentsClient) deleteVersion(ctx context.Context, name, version string) error {
	if err := c.do(ctx, http.MethodDelete, c.url(name, "versions", version), nil, nil); err != nil {
		return fmt.Errorf("foundry: delete version %q of agent %q: %w", version, name, err)
	}
	return nil
}

// maxListPages bounds a listing of agents, or of an agent's versions,
// that looks for the version of a definition (100 a page, newest first).
const maxListPages = 10

// findVersion returns the newest live version of agent name whose metadata
// holds digest under owned.DefinitionKey, or "" if there is none (or no
// such agent). It lists the project's agents (a listing of an agent that
// does not exist would be a 404, an error in every trace of a first run),
// and the agent's versions unless its latest is the one.
func (c *agentsClient) findVersion(ctx context.Context, name, digest string) (string, error) {
	var agent *agentObject
	err := c.list(ctx, c.url(), func(raw json.RawMessage) (bool, error) {
		var a agentObject
		if err := json.Unmarshal(raw, &a); err != nil {
			return false, err
		}
		if a.Name == name {
			agent = &a
		}
		return agent != nil, nil
	})
	switch {
	case err != nil:
		return "", fmt.Errorf("foundry: list the agents: %w", err)
	case agent == nil:
		return "", nil
	case agent.State == "disabled":
		return "", disabledError(agent)
	case defines(&agent.Versions.Latest, digest):
		return agent.Versions.Latest.Version, nil
	}
	found := ""
	err = c.list(ctx, c.url(name, "versions"), func(raw json.RawMessage) (bool, error) {
		var v versionInfo
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, err
		}
		if defines(&v, digest) {
			found = v.Version
		}
		return found != "", nil
	})
	if err != nil && errorCode(err) != errcode.NotFound { // deleted meanwhile
		return "", fmt.Errorf("foundry: list the versions of agent %q: %w", name, err)
	}
	return found, nil
}

// defines reports whether v is a live version of the definition of digest.
func defines(v *versionInfo, digest string) bool {
	return v.Metadata[owned.DefinitionKey] == digest && v.Status != "deleting" && v.Status != "deleted" && v.Status != "failed"
}

// list pages through a listing (u, with its api-version), newest first,
// handing each element to each until it reports done, for at most
// maxListPages pages.
func (c *agentsClient) list(ctx context.Context, u string, each func(json.RawMessage) (done bool, err error)) error {
	after := ""
	for range maxListPages {
		q := u + "&limit=100&order=desc"
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
			LastID  string            `json:"last_id"`
		}
		if err := c.do(ctx, http.MethodGet, q, nil, &page); err != nil {
			return err
		}
		for _, raw := range page.Data {
			if done, err := each(raw); done || err != nil {
				return err
			}
		}
		if !page.HasMore || len(page.Data) == 0 || page.LastID == "" {
			return nil
		}
		after = page.LastID
	}
	return nil
}
