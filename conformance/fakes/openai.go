package fakes

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// OpenAI returns harnesses of the sessions backend (package openai) on
// a fresh fake Agents API (package openaitest) per scenario, streaming
// or polling. It injects every fault but CutStream when polling.
func OpenAI(poll bool) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		return &openaiHarness{t: t, poll: poll}, nil
	}
}

// openaiHarness wires the backend to a fresh fake Agents API per scenario.
type openaiHarness struct {
	t    *testing.T
	poll bool

	mu           sync.Mutex
	srv          *openaitest.Server
	faults       []*pending
	duplicate    bool
	unauthorized bool

	wrap      func(http.RoundTripper) http.RoundTripper // see Taped
	replaying bool
}

func (s *openaiHarness) tape(wrap func(http.RoundTripper) http.RoundTripper, replaying bool) {
	s.wrap, s.replaying = wrap, replaying
}

func (s *openaiHarness) stop() { s.srv.Close() }

// pending is a fault the fake has yet to inject.
type pending struct {
	f    conformance.Fault
	left int
}

func (s *openaiHarness) MakeBackend(ctx context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error) {
	s.srv = openaitest.NewServer(script, &openaitest.Options{APIKey: "the-right-key", Fault: s.fault, DuplicateEvents: s.duplicate})
	return s.Reopen(ctx, tools)
}

// Reopen implements conformance.Reopener: another backend on the same fake.
func (s *openaiHarness) Reopen(ctx context.Context, tools *core.Toolbox) (driver.Backend, error) {
	key := "the-right-key"
	if s.unauthorized {
		key = "a-wrong-key"
	}
	return openai.Open(ctx, tools, &openai.Options{
		BaseURL: s.srv.URL, APIKey: key, Delivery: map[bool]openai.Delivery{true: openai.Polling}[s.poll], PollInterval: time.Millisecond, Logger: discard,
		RequestOptions: []option.RequestOption{option.WithMaxRetryDelay(time.Millisecond)}, HTTPClient: wrapped(nil, s.wrap),
	})
}

func (s *openaiHarness) Received() []coretest.Received { return s.srv.Received() }

func (s *openaiHarness) Inject(f conformance.Fault) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Kind {
	case conformance.Unauthorized:
		s.unauthorized = true
	case conformance.Duplicate:
		s.duplicate = true
	case conformance.CutStream:
		if s.poll {
			return false // no stream to cut
		}
		s.faults = append(s.faults, &pending{f: f, left: 1})
	default:
		s.faults = append(s.faults, &pending{f: f, left: max(f.Times, 1)})
	}
	return true
}

// OnService implements conformance.Inventory: the sessions and the
// saved agents of the fake.
func (s *openaiHarness) OnService() map[string]int {
	return map[string]int{"sessions": len(s.srv.Sessions()), "agents": len(s.srv.Agents())}
}

// Close checks that every fault was injected: a scenario that passes
// without meeting its fault proves nothing.
func (s *openaiHarness) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.replaying {
		return // the fake met nothing: the cassette holds what it did
	}
	for _, p := range s.faults {
		if p.left == max(p.f.Times, 1) {
			s.t.Errorf("the %s fault was never injected", p.f.Kind)
		}
	}
}

// fault injects the pending faults on the requests they target: the user's
// input is a session creation or an input.message event, results are
// tool_result events.
func (s *openaiHarness) fault(r *openaitest.Request) *openaitest.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	events := r.Events()
	input := r.Method == "POST" && (r.Path == "agents/sessions" || slices.Contains(events, "agent.session.input.message"))
	results := r.Method == "POST" && slices.Contains(events, "agent.session.input.tool_result")
	for _, p := range s.faults {
		if p.left == 0 || p.f.Kind == conformance.CutStream && !r.Stream {
			continue
		}
		switch p.f.On {
		case conformance.InputRequests:
			if !input {
				continue
			}
		case conformance.ResultsRequests:
			if !results {
				continue
			}
		}
		p.left--
		switch p.f.Kind {
		case conformance.RateLimited:
			return &openaitest.Fault{Status: 429, RetryAfter: time.Millisecond}
		case conformance.ServerError:
			return &openaitest.Fault{Status: 500, RetryAfter: time.Millisecond}
		case conformance.LostResponse:
			return &openaitest.Fault{Drop: true}
		case conformance.CutStream:
			return &openaitest.Fault{CutText: 2}
		}
	}
	return nil
}
