package fakes

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/internal/respond"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// Foundry returns harnesses of the Foundry backend (package foundry), or
// with plain set of the Responses backend (package responses, its mode
// given by mode: foundry.Chain, foundry.Conversation or
// responses.Stateless), on a fresh fake Foundry project (package
// foundrytest) per scenario, streaming or blocking.
func Foundry(mode foundry.Mode, plain, stream bool) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		return &foundryHarness{t: t, mode: mode, plain: plain, stream: stream}, nil
	}
}

// foundryHarness wires a backend to a fresh fake Foundry project per scenario.
type foundryHarness struct {
	t      *testing.T
	mode   foundry.Mode
	plain  bool
	stream bool

	mu           sync.Mutex
	srv          *foundrytest.Server
	faults       []conformance.Fault
	unauthorized bool

	wrap      func(http.RoundTripper) http.RoundTripper // see Taped
	replaying bool
}

func (h *foundryHarness) tape(wrap func(http.RoundTripper) http.RoundTripper, replaying bool) {
	h.wrap, h.replaying = wrap, replaying
}

func (h *foundryHarness) stop() { h.srv.Close() }

func (h *foundryHarness) MakeBackend(ctx context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error) {
	fo := &foundrytest.Options{Plain: h.plain, Token: "the-right-token"}
	if h.plain {
		fo.Token = "the-right-key" // the responses backend sends its key as a bearer token
	}
	h.srv = foundrytest.NewServer(script, fo)
	for _, f := range h.faults {
		h.apply(f)
	}
	return h.Reopen(ctx, tools)
}

// Reopen implements conformance.Reopener: another backend on the same fake.
func (h *foundryHarness) Reopen(ctx context.Context, tools *core.Toolbox) (driver.Backend, error) {
	token, key := "the-right-token", "the-right-key"
	if h.unauthorized {
		token, key = "a-wrong-token", "a-wrong-key"
	}
	if h.plain {
		return trresponses.Open(ctx, tools, &trresponses.Options{
			BaseURL: h.srv.OpenAIBaseURL(), APIKey: key, Model: "gpt-4.1-mini", Delivery: transport[h.stream], Mode: h.mode,
			HTTPClient: wrapped(h.srv.Client(), h.wrap), RequestOptions: fast, Logger: discard,
		})
	}
	return foundry.Open(ctx, tools, &foundry.Options{
		Endpoint: h.srv.ProjectEndpoint(), Token: token, Mode: h.mode, Delivery: transport[h.stream],
		Definition: &foundry.AgentDefinition{Name: "conformance", Model: "gpt-4.1-mini"},
		HTTPClient: wrapped(h.srv.Client(), h.wrap), RequestOptions: fast, Logger: discard,
	})
}

// transport is the Delivery of a streaming harness, or not.
var transport = map[bool]foundry.Delivery{false: foundry.Blocking, true: foundry.Streaming}

// Received decodes the fake's records as the backend documents them: an
// output {"error": …} is a failed result, and the answers Cancel gives
// pending calls (outputs, and denials of approval requests) are a
// cancellation.
func (h *foundryHarness) Received() []coretest.Received {
	var out []coretest.Received
	for _, r := range h.srv.Received() {
		if r.Kind != "results" {
			out = append(out, r)
			continue
		}
		canceled := len(r.Results) > 0
		for i, d := range r.Results {
			var f struct {
				Error *string `json:"error"`
			}
			if json.Unmarshal([]byte(d.Output), &f) == nil && f.Error != nil {
				r.Results[i].Failed, r.Results[i].Error = true, *f.Error
			}
			// Cancel answers a function call with CanceledOutput and
			// denies an MCP approval request for CanceledReason.
			canceled = canceled && (d.Output == respond.CanceledOutput || r.Results[i].Failed && r.Results[i].Error == respond.CanceledReason)
		}
		if canceled {
			r = coretest.Received{Kind: "cancel", Thread: r.Thread}
		}
		out = append(out, r)
	}
	return out
}

// ClientItems implements conformance.ClientItemSender: the items of the
// Responses API a client is to run other than function calls, and, on
// Foundry, its workflow agents' items.
func (h *foundryHarness) ClientItems() []string {
	items := []string{"custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call", "tool_search_call", "program"}
	if !h.plain {
		items = append(items, "workflow_action", "structured_outputs")
	}
	return items
}

// Inject maps the suite's faults onto the fake's. The fake cannot deliver
// a response twice, so Duplicate is not supported.
func (h *foundryHarness) Inject(f conformance.Fault) bool {
	switch f.Kind {
	case conformance.RateLimited, conformance.ServerError, conformance.LostResponse:
	case conformance.CutStream:
		if !h.stream {
			return false // no stream to cut
		}
	case conformance.Unauthorized:
		h.unauthorized = true
		return true
	case conformance.Duplicate:
		// A blocking response answers one HTTP request: it cannot arrive
		// twice. A stream's events can.
		if !h.stream {
			return false
		}
	default:
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
	if h.srv != nil {
		h.apply(f)
	}
	return true
}

// apply queues f on the fake. Results go back in a responses.create that
// follows the turn's first one, which is let through.
func (h *foundryHarness) apply(f conformance.Fault) {
	var fault foundrytest.Fault
	switch f.Kind {
	case conformance.RateLimited:
		fault.Status = 429
	case conformance.ServerError:
		fault.Status = 500
	case conformance.LostResponse:
		fault.Drop = true
	case conformance.CutStream:
		fault.CutText = 2
	case conformance.Duplicate:
		fault.Duplicate = true
	}
	op, queue := foundrytest.OpCreateResponse, []foundrytest.Fault{}
	switch f.On {
	case conformance.ResultsRequests:
		queue = append(queue, foundrytest.Fault{})
	case conformance.InputRequests:
		if h.mode == foundry.Conversation && !h.plain {
			op = foundrytest.OpCreateConversation
		}
	}
	for range max(f.Times, 1) {
		queue = append(queue, fault)
	}
	h.srv.InjectFault(op, queue...)
}

// OnService implements conformance.Inventory: the conversations, agents
// and agent versions of the fake project.
func (h *foundryHarness) OnService() map[string]int {
	return map[string]int{"conversations": len(h.srv.Conversations()), "agents": len(h.srv.Agents()), "agent versions": len(h.srv.Versions())}
}

// Close checks that the fake met every fault: a scenario that passes
// without meeting its fault proves nothing.
func (h *foundryHarness) Close() {
	if h.srv == nil {
		return
	}
	h.srv.Close()
	if h.replaying {
		return // the fake met nothing: the cassette holds what it did
	}
	for _, f := range h.faults {
		status := map[conformance.FaultKind]int{conformance.RateLimited: 429, conformance.ServerError: 500}[f.Kind] // else 0: dropped
		met := false
		for _, r := range h.srv.Requests() {
			met = met || r.Status == status && f.Kind != conformance.Duplicate || r.Duplicated && f.Kind == conformance.Duplicate
		}
		if !met {
			h.t.Errorf("the %s fault was never injected", f.Kind)
		}
	}
}
