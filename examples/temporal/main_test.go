package main

import (
	"os"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/examples/internal/shop/pagetest"
)

// asMainEnv makes the test binary play the program, for the second
// process of the -dev flow.
const asMainEnv = "TOOLRELAY_EXAMPLE_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDev runs the -dev flow: the refund pauses, a second process
// approves it, and the answer reports the refund.
func TestDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	t.Setenv(asMainEnv, "1")
	self = func() string { return os.Args[0] }
	var out strings.Builder
	if err := run(t.Context(), flags{dev: true}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{"awaits a decision: a refund of 150 is over the limit of 100", "asking a second process to approve", "approved=true",
		"Refund: refunded 150 on order 7. Order: order 7: 1 espresso machine, 150."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBrowser serves the chat page of examples/web over the Temporal
// runner (-web) to that example's browser test (pagetest.Try): the answer
// streamed and resumed after a reload, the refunds approved and denied by
// clicks and run once, on every embedded fake.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	pagetest.Try(t, os.Args[0]+" -web", asMainEnv+"=1")
}
