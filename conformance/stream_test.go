package conformance

import (
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// dropEnv names, in a child run of TestStreamBreakOwesEvents, what its
// backend drops.
const dropEnv = "TOOLRELAY_CONFORMANCE_DROP"

// What a dropping backend drops.
const (
	dropNothing = "nothing"
	dropCalls   = "calls"   // every step comes without its calls
	dropResults = "results" // every submission of results fails
	dropText    = "text"    // the answer comes without its text
)

// TestStreamBreakOwesEvents checks that a StreamBreakResume scenario fails,
// and is not skipped, on a backend that loses the event it stops at (its
// run reported none, and read as a skip). The test binary doubles as the
// suite on a backend that drops something (with dropEnv set): each case
// runs one scenario in a child, which must fail saying which event it
// missed; on a backend that drops nothing, every scenario passes.
func TestStreamBreakOwesEvents(t *testing.T) {
	if drop := os.Getenv(dropEnv); drop != "" {
		run(t, func(context.Context, *testing.T) (Harness, error) { return &droppingHarness{drop: drop}, nil }, nil)
		return
	}
	for _, tc := range []struct {
		scenario, drop string
		missed         core.EventKind // 0: the scenario passes
	}{
		{"ToolCall", dropCalls, core.EventToolCall},
		{"StepStarted", dropCalls, core.EventStepStarted},
		{"CallStarted", dropCalls, core.EventCallStarted},
		{"CallFinished", dropCalls, core.EventCallFinished},
		{"ResultsSubmitted", dropResults, core.EventResultsSubmitted},
		{"TextDelta", dropText, core.EventTextDelta},
		{"", dropNothing, 0}, // every scenario
	} {
		t.Run(cmp.Or(tc.scenario, "All")+"/drop "+tc.drop, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestStreamBreakOwesEvents$/^StreamBreakResume$/^"+cmp.Or(tc.scenario, ".*")+"$", "-test.v")
			cmd.Env = append(os.Environ(), dropEnv+"="+tc.drop)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			switch {
			case strings.Contains(string(out), "--- SKIP"):
				t.Errorf("a scenario was skipped on a backend that drops %s:\n%s", tc.drop, out)
			case tc.missed == 0 && (err != nil || !strings.Contains(string(out), "--- PASS: TestStreamBreakOwesEvents/StreamBreakResume/")):
				t.Errorf("on a backend that drops nothing: %v\n%s", err, out)
			case tc.missed != 0 && (err == nil || !strings.Contains(string(out), "--- FAIL: TestStreamBreakOwesEvents/StreamBreakResume/"+tc.scenario)):
				t.Errorf("StreamBreakResume/%s did not fail on a backend that drops %s (%v):\n%s", tc.scenario, tc.drop, err, out)
			case tc.missed != 0 && !strings.Contains(string(out), "the run reported no "+tc.missed.String()+" event"):
				t.Errorf("StreamBreakResume/%s failed without saying it missed the %v event:\n%s", tc.scenario, tc.missed, out)
			}
		})
	}
}

// droppingHarness wires the suite to an in-memory backend that drops
// what drop names.
type droppingHarness struct {
	drop string
	b    *coretest.Backend
}

func (h *droppingHarness) MakeBackend(_ context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error) {
	h.b = coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})
	return &dropping{Backend: h.b, drop: h.drop}, nil
}

func (h *droppingHarness) Received() []coretest.Received { return h.b.Received() }
func (h *droppingHarness) Inject(Fault) bool             { return false }
func (h *droppingHarness) Close()                        {}

// dropping is a backend that loses what drop names, as a faulty backend
// would.
type dropping struct {
	*coretest.Backend
	drop string
}

func (b *dropping) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return b.step(b.Backend.Start(b.observed(ctx), req))
}

func (b *dropping) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	if b.drop == dropResults {
		return nil, errcode.Errorf(errcode.FailedPrecondition, "conformance: the results were dropped")
	}
	return b.step(b.Backend.Submit(b.observed(ctx), req))
}

func (b *dropping) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return b.step(b.Backend.Resume(ctx, thread))
}

// observed returns ctx without its observer if the text is dropped: the
// answer is not streamed either.
func (b *dropping) observed(ctx context.Context) context.Context {
	if b.drop == dropText {
		return driver.WithObserver(ctx, nil)
	}
	return ctx
}

// step returns s without what the backend drops.
func (b *dropping) step(s *driver.Step, err error) (*driver.Step, error) {
	if s == nil || err != nil {
		return s, err
	}
	c := *s
	switch b.drop {
	case dropCalls:
		c.Calls = nil
	case dropText:
		c.Text = ""
	}
	return &c, nil
}
