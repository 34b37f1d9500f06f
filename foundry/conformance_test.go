package foundry_test

import (
	"testing"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/conformance/fakes"
	"github.com/toolrelay/toolrelay/foundry"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// TestConformance runs the shared suite on the Foundry backend, in both
// ways of linking a thread's responses, and on the plain responses backend.
func TestConformance(t *testing.T) {
	for _, stream := range []bool{false, true} {
		suffix := map[bool]string{true: "Stream"}[stream]
		t.Run("Conversation"+suffix, func(t *testing.T) { conformance.Run(t, fakes.Foundry(foundry.Conversation, false, stream)) })
		t.Run("Chain"+suffix, func(t *testing.T) { conformance.Run(t, fakes.Foundry(foundry.Chain, false, stream)) })
		t.Run("Responses"+suffix, func(t *testing.T) { conformance.Run(t, fakes.Foundry(foundry.Chain, true, stream)) })
		t.Run("Stateless"+suffix, func(t *testing.T) { conformance.Run(t, fakes.Foundry(trresponses.Stateless, true, stream)) })
	}
}
