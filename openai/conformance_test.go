package openai_test

import (
	"testing"

	"github.com/toolrelay/toolrelay/conformance"
	"github.com/toolrelay/toolrelay/conformance/fakes"
)

// TestConformance runs the shared suite on the sessions backend, streaming
// and polling.
func TestConformance(t *testing.T) {
	t.Run("Stream", func(t *testing.T) { conformance.Run(t, fakes.OpenAI(false)) })
	t.Run("Poll", func(t *testing.T) { conformance.Run(t, fakes.OpenAI(true)) })
}

// TestConformanceReplay runs the suite on the fake with every scenario's
// traffic recorded, then again on the cassettes with the fakes stopped:
// each scenario gives the same results from its cassette, sending every
// recorded request and no other.
func TestConformanceReplay(t *testing.T) {
	for _, poll := range []bool{false, true} {
		tape := fakes.Tape{Dir: t.TempDir()}
		name := map[bool]string{false: "Stream", true: "Poll"}[poll]
		t.Run(name+"/Record", func(t *testing.T) { conformance.Run(t, fakes.Taped(tape, fakes.OpenAI(poll))) })
		tape.Replay = true
		t.Run(name+"/Replay", func(t *testing.T) { conformance.Run(t, fakes.Taped(tape, fakes.OpenAI(poll))) })
	}
}
