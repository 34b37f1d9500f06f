package coretest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestConformance runs the shared suite on the in-memory backend.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		return &harness{}, nil
	})
}

type harness struct {
	mu     sync.Mutex
	b      *coretest.Backend
	faults []conformance.Fault
}

func (h *harness) MakeBackend(ctx context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error) {
	h.b = coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools, Fault: h.fault, Lose: h.lose})
	return h.b, nil
}

func (h *harness) Received() []coretest.Received { return h.b.Received() }

// Inject supports what an in-memory backend can mean: refusing
// credentials, rate limits with no retry in between, and lost answers.
func (h *harness) Inject(f conformance.Fault) bool {
	switch {
	case f.Kind == conformance.Unauthorized, f.Kind == conformance.LostResponse:
	case f.Kind == conformance.RateLimited && f.Times >= 100:
	default:
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
	return true
}

func (h *harness) Close() {}

func matches(f conformance.Fault, op string) bool {
	switch f.On {
	case conformance.InputRequests:
		return op == "start"
	case conformance.ResultsRequests:
		return op == "submit"
	}
	return true
}

func (h *harness) fault(op string, n int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.faults {
		switch {
		case f.Kind == conformance.Unauthorized:
			return errcode.Errorf(errcode.PermissionDenied, "unauthorized")
		case f.Kind == conformance.RateLimited && matches(f, op):
			return errcode.Errorf(errcode.ResourceExhausted, "rate limited")
		}
	}
	return nil
}

func (h *harness) lose(op string, n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, f := range h.faults {
		if f.Kind == conformance.LostResponse && matches(f, op) {
			h.faults = append(h.faults[:i], h.faults[i+1:]...)
			return true
		}
	}
	return false
}
