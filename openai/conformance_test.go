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
