package replay_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// BenchmarkStep measures one step of the checked-in openai run (a turn of
// two steps: one call of lookup, then the answer), opened through the
// adapter each time: on the embedded fake (fake-openai, the fake serving
// over loopback HTTP in this process), and replayed from
// testdata/openai.yaml on the real backend with no service. ns/step is the
// run's time over its 2 steps.
func BenchmarkStep(b *testing.B) {
	b.Setenv("TOOLRELAY_CONFIG", "")
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "lookup", Arguments: json.RawMessage(`{"id":"7"}`)}}},
		{Text: `answer: {{output "lookup"}}`},
	}}}}
	for _, bc := range []struct {
		name string
		env  map[string]string
		opts *adapter.Options
	}{
		{"fake", map[string]string{"TOOLRELAY_BACKEND": "fake-openai", "TOOLRELAY_REPLAY": ""},
			&adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: script}}}},
		{"replay", map[string]string{"TOOLRELAY_BACKEND": "openai", "TOOLRELAY_REPLAY": "replay:" + filepath.Join("testdata", "openai.yaml"),
			"OPENAI_API_KEY": "sk-replay-no-key", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for k, v := range bc.env {
				b.Setenv(k, v)
			}
			tools := lookupToolbox(b)
			b.ReportAllocs()
			for b.Loop() {
				r, err := adapter.Open(b.Context(), tools, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				res, err := r.Run(b.Context(), "look up 7", nil)
				if err != nil || res.Text != "answer: found 7" {
					b.Fatalf("run: %v, %v", res, err)
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/step")
		})
	}
}
