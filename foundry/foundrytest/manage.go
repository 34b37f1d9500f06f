package foundrytest

import (
	"encoding/json"
	"slices"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// listAgents answers GET agents: the project's agents, newest first unless
// order=asc, in pages.
func (s *Server) listAgents(ex *exchange, _ []string, _ *Fault) (any, error) {
	var list []*agent
	for _, a := range s.agents {
		if len(a.versions) > 0 {
			list = append(list, a)
		}
	}
	slices.SortFunc(list, func(a, b *agent) int { return a.seq - b.seq })
	page, more, e := pageOf(list, func(a *agent) string { return a.name }, ex)
	if e != nil {
		return nil, e
	}
	data := make([]map[string]any, len(page))
	for i, a := range page {
		data[i] = s.agentObject(a)
	}
	return fakeapi.List(page, more, func(a *agent) string { return a.name }, data), nil
}

// listAgentVersions answers GET agents/{name}/versions: its live versions,
// newest first unless order=asc, in pages.
func (s *Server) listAgentVersions(ex *exchange, args []string, _ *Fault) (any, error) {
	a := s.agents[args[0]]
	if a == nil || len(a.versions) == 0 {
		return nil, notFound("Agent %q not found.", args[0])
	}
	id := func(v *agentVersion) string { return v.Version }
	page, more, e := pageOf(a.versions, id, ex)
	if e != nil {
		return nil, e
	}
	return fakeapi.List(page, more, id, page), nil
}

// updateAgent answers POST agents/{name}: the definition given makes the
// agent's new version, as the service's update does.
func (s *Server) updateAgent(ex *exchange, args []string, _ *Fault) (any, error) {
	if s.agents[args[0]] == nil || len(s.agents[args[0]].versions) == 0 {
		return nil, notFound("Agent %q not found.", args[0])
	}
	req, e := decodeVersion(ex.body)
	if e != nil {
		return nil, e
	}
	s.addVersion(args[0], req)
	return s.agentObject(s.agents[args[0]]), nil
}

// updateConversation answers POST conversations/{id}: its metadata
// replaces the conversation's ({} or null clears it).
func (s *Server) updateConversation(ex *exchange, args []string, _ *Fault) (any, error) {
	c, e := s.conversation(args[0])
	if e != nil {
		return nil, e
	}
	var body struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(ex.body, &body); err != nil {
		return nil, schemaError("/")
	}
	metadata, given, refusal := fakeapi.Metadata(body.Metadata)
	if refusal != "" {
		return nil, badRequest("invalid_request", "metadata", "%s", refusal)
	}
	if given {
		c.metadata = metadata
	}
	return c.json(), nil
}

// listInputItems answers GET responses/{id}/input_items: the items of the
// request that made the response, newest first unless order=asc.
func (s *Server) listInputItems(ex *exchange, args []string, _ *Fault) (any, error) {
	r := s.responses[args[0]]
	if r == nil || r.deleted {
		return nil, notFound("Response with id '%s' not found.", args[0])
	}
	items, more, e := pageOf(r.inputs, itemID, ex)
	if e != nil {
		return nil, e
	}
	return itemList(items, more), nil
}

// models are the model deployments GET models lists.
var models = []string{DefaultModelDeployment, "gpt-4.1", "gpt-5"}

// DefaultModelDeployment is the first model deployment GET models lists.
const DefaultModelDeployment = "gpt-4.1-mini"

// listModels answers GET models.
func (s *Server) listModels(*exchange, []string, *Fault) (any, error) {
	data := make([]map[string]any, len(models))
	for i, m := range models {
		data[i] = map[string]any{"id": m, "object": "model", "created": 1735689600, "owned_by": "system"}
	}
	return map[string]any{"object": "list", "data": data}, nil
}

// pageOf pages list by the request's limit, order and after.
func pageOf[T any](list []T, id func(T) string, ex *exchange) ([]T, bool, *apiError) {
	page, more, perr := fakeapi.Page(list, id, ex.r.URL.Query())
	switch {
	case perr != nil && perr.NotFound:
		return nil, false, notFound("%s", perr.Message)
	case perr != nil:
		return nil, false, badRequest("invalid_request", perr.Param, "%s", perr.Message)
	}
	return page, more, nil
}

// inputItems returns a request's input as items, as input_items lists
// them.
func (s *Server) inputItems(in []inputItem) []*item {
	out := make([]*item, 0, len(in))
	for _, it := range in {
		x := &item{Type: it.Type, Status: "completed", Role: it.Role, CallID: it.CallID, Name: it.Name, Output: it.Output}
		switch it.Type {
		case "message":
			x.ID = s.newID("msg_")
			x.Text, _ = messageText(it.Content)
		case "function_call":
			x.ID = s.newID("fc_")
			json.Unmarshal(it.Args, &x.Arguments)
		case "function_call_output":
			x.ID = s.newID("fco_")
		default:
			x.ID = s.newID("item_")
		}
		out = append(out, x)
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
