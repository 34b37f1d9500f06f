package respond

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// ToolParams returns tools as the tools of a request (see
// [FunctionTools]).
func ToolParams(tools []*core.Tool) ([]responses.ToolUnionParam, error) {
	var params []responses.ToolUnionParam
	for _, t := range FunctionToolsOf(tools) {
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		params = append(params, param.Override[responses.ToolUnionParam](json.RawMessage(raw)))
	}
	return params, nil
}

// An Offering keeps what requests offer the model up to date with a
// toolbox: Offer (a [Config.Offer]) makes it again when the toolbox
// changed since it was last made, and returns it as it was otherwise.
type Offering struct {
	toolbox *core.Toolbox
	make    MakeOffer

	mu      sync.Mutex
	version uint64
	tools   []responses.ToolUnionParam
	ref     map[string]any
}

// MakeOffer makes what the requests offer for tools: the tools they
// carry, or the agent reference.
type MakeOffer func(ctx context.Context, tools []*core.Tool) ([]responses.ToolUnionParam, map[string]any, error)

// NewOffering returns an offering of toolbox, which offers tools and ref,
// made of the toolbox at version, until the toolbox changes; make makes
// the offer again then.
func NewOffering(toolbox *core.Toolbox, version uint64, tools []responses.ToolUnionParam, ref map[string]any, make MakeOffer) *Offering {
	return &Offering{toolbox: toolbox, make: make, version: version, tools: tools, ref: ref}
}

// Offer returns what the requests offer now; the format plays no part (a
// request that carries the tools carries the format too).
func (o *Offering) Offer(ctx context.Context, _ *driver.Format) ([]responses.ToolUnionParam, map[string]any, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	tools, v := o.toolbox.Snapshot()
	if v == o.version {
		return o.tools, o.ref, nil
	}
	params, ref, err := o.make(ctx, tools)
	if err != nil {
		return nil, nil, err
	}
	o.version, o.tools, o.ref = v, params, ref
	return params, ref, nil
}
