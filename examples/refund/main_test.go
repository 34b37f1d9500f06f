package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun answers yes and no on every fake: the lookup runs at once, the
// refund waits for the answer, then runs (yes) or is denied (no).
func TestRun(t *testing.T) {
	for _, backend := range []string{"fake-openai", "fake-foundry", "fake-responses"} {
		for _, tc := range []struct {
			answer string
			want   []string
		}{
			{"y\n", []string{"ran lookup_order: ok\nrefund {\"amount\":150,\"order\":\"7\"} needs approval (a refund of 150 is over the limit of 100). Approve? [y/N] \nran refund: ok\n",
				"Refund: refunded 150 on order 7. Order: order 7: 1 espresso machine, 150.\n"}},
			{"n\n", []string{"Approve? [y/N] \nran refund: denied\n", "a person denied this call: the operator said no"}},
			{"", []string{"ran refund: denied\n"}}, // no answer at all is a no
		} {
			t.Run(backend+"/"+strings.TrimSpace(tc.answer), func(t *testing.T) {
				for _, k := range []string{"TOOLRELAY_CONFIG", "TOOLRELAY_JOURNAL", "TOOLRELAY_SCRIPT", "TOOLRELAY_CONCURRENCY"} {
					t.Setenv(k, "")
				}
				t.Setenv("TOOLRELAY_BACKEND", backend)
				var out bytes.Buffer
				if err := run(t.Context(), strings.NewReader(tc.answer), &out); err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if !strings.Contains(out.String(), w) {
						t.Errorf("output lacks %q:\n%s", w, out.String())
					}
				}
				if strings.Count(out.String(), "ran refund:") != 1 {
					t.Errorf("the refund was decided %d times, want once:\n%s", strings.Count(out.String(), "ran refund:"), out.String())
				}
			})
		}
	}
}
