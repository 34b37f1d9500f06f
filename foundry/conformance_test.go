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

// TestConformanceReplay runs the suite on the fake with every scenario's
// traffic recorded (the agent's management requests, the conversations
// and responses, and the token requests of the credential), then again on
// the cassettes with the fakes stopped: each scenario gives the same
// results from its cassette, sending every recorded request and no other.
func TestConformanceReplay(t *testing.T) {
	for _, stream := range []bool{false, true} {
		suffix := map[bool]string{true: "Stream"}[stream]
		for _, v := range []struct {
			name  string
			mode  foundry.Mode
			plain bool
		}{{"Conversation", foundry.Conversation, false}, {"Chain", foundry.Chain, false}, {"Responses", foundry.Chain, true}, {"Stateless", trresponses.Stateless, true}} {
			tape := fakes.Tape{Dir: t.TempDir()}
			t.Run(v.name+suffix+"/Record", func(t *testing.T) { conformance.Run(t, fakes.Taped(tape, fakes.Foundry(v.mode, v.plain, stream))) })
			tape.Replay = true
			t.Run(v.name+suffix+"/Replay", func(t *testing.T) { conformance.Run(t, fakes.Taped(tape, fakes.Foundry(v.mode, v.plain, stream))) })
		}
	}
}
