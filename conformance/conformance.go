// Package conformance is the shared test suite every toolrelay backend must
// pass. A backend's test runs it with one line, giving a [HarnessMaker] that
// wires the backend to a fresh fake of its service:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, newHarness)
//	}
//
// Each scenario is a subtest on a fresh harness, kept in a table with a
// one-line explanation of the rule it checks, so a failure names the rule
// that broke. The scenarios run in parallel (as go test's -parallel
// allows), each on its own harness: a HarnessMaker is called from several
// goroutines at once, and its harnesses must share nothing (a fake of
// their own each). A scenario that needs something the backend or its fake does
// not support is skipped with the reason, never silently passed.
//
// The MCP scenarios (named MCP…/memory, /stdio, /http) offer the tools of
// an MCP server (package mcptools/mcptest's, through package mcptools)
// beside the program's own, over the transports where they differ: they
// check that the backend offers them, and offers a changed set from the
// next step.
//
// The scenarios are written in the backend-neutral model scripts of package
// coretest; what the fake received is compared in the neutral terms of
// [coretest.Received].
package conformance

import (
	"context"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
)

// Harness connects the suite to one backend and a fake of its service.
type Harness interface {
	// MakeBackend returns a backend wired to the fake, whose model plays
	// script, for a program with tools. It may fail with the error the
	// service gives (for instance when a fault makes authentication fail).
	MakeBackend(ctx context.Context, script *coretest.Script, tools *core.Toolbox) (driver.Backend, error)
	// Received returns what the fake received so far, in neutral terms: user
	// inputs, submissions of results (with failures decoded as the backend
	// documents them) and cancellations.
	Received() []coretest.Received
	// Inject arranges for the fake to produce a fault. It reports false when
	// the fake cannot produce that fault; the scenario is then skipped.
	Inject(f Fault) bool
	// Close releases the fake.
	Close()
}

// A Reopener is a Harness that can open a second backend on the fake of its
// last MakeBackend, as another process of the same program would (with no
// state shared with the first backend but the service). Scenarios of work
// picked up in a second process need it; without it they are skipped.
type Reopener interface {
	Reopen(ctx context.Context, tools *core.Toolbox) (driver.Backend, error)
}

// An Inventory is a Harness whose fake can count what exists on its
// service. The LeftOnService scenarios need it; without it they are
// skipped.
type Inventory interface {
	// OnService counts, by kind ("sessions", "conversations", "agents",
	// "agent versions", as the service has them), what exists on the
	// fake's service now, whoever made it. Every kind the service has is
	// present, zeros included.
	OnService() map[string]int
}

// A ClientItemSender is a Harness whose fake can send, for a script's
// coretest.Call.Item, output items that the client is to run other than
// function calls (the Responses API's computer_call, shell_call, …). The
// ClientItems scenario needs it; without it, it is skipped.
type ClientItemSender interface {
	// ClientItems lists the types of such items the fake's service sends.
	ClientItems() []string
}

// HarnessMaker makes a fresh Harness for one scenario.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// FaultKind names a fault a fake can inject.
type FaultKind int

// The faults the suite uses.
const (
	// RateLimited answers requests with 429 and a short retry delay.
	RateLimited FaultKind = iota + 1
	// ServerError answers requests with 500.
	ServerError
	// Unauthorized answers every request with 401.
	Unauthorized
	// LostResponse processes a request but drops the connection before the
	// client reads the answer (for a streaming service: cuts the stream).
	LostResponse
	// Duplicate delivers the service's next events (or response) twice.
	Duplicate
	// CutStream drops, once, the stream that carries the model's text, in
	// the middle of a message (after two pieces of it), although the
	// service finished the message. Fakes of services that do not stream
	// (or backends that poll) cannot inject it.
	CutStream
)

var faultNames = map[FaultKind]string{
	RateLimited: "rate limited", ServerError: "server error", Unauthorized: "unauthorized",
	LostResponse: "lost response", Duplicate: "duplicate delivery", CutStream: "cut stream",
}

// String returns the fault's name.
func (k FaultKind) String() string { return faultNames[k] }

// Target says which requests a fault hits.
type Target int

// The targets of a fault.
const (
	// AnyRequest: the next requests, whatever they are.
	AnyRequest Target = iota
	// InputRequests: requests that send the user's input.
	InputRequests
	// ResultsRequests: requests that send results of calls.
	ResultsRequests
)

// A Fault is what a harness injects.
type Fault struct {
	Kind FaultKind
	// Times is how many matching requests get the fault (at least 1).
	// Unauthorized ignores it: every request is refused.
	Times int
	// On says which requests get it.
	On Target
}

// Run runs every scenario as a subtest of t, each on a fresh harness.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	run(t, newHarness, nil)
}

// alone names the scenarios that look at the whole process (its
// goroutines, its heap): they run before the others of a suite, which run
// in parallel with one another (go test's -parallel bounds how many at
// once).
var alone = map[string]bool{"StreamBreak": true, "StreamSlowReader": true}

func run(t *testing.T, newHarness HarnessMaker, newLoop LoopMaker) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if !alone[sc.name] {
				t.Parallel()
			}
			h, err := newHarness(t.Context(), t)
			if err != nil {
				t.Fatalf("making harness: %v", err)
			}
			t.Cleanup(h.Close)
			e := &env{t: t, h: h, newLoop: newLoop, newHarness: newHarness}
			sc.run(e)
			if t.Failed() {
				t.Logf("rule: %s", sc.explanation)
			}
		})
	}
}
