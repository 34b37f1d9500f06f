package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// checkResults verifies that each call got exactly one result, in order.
func checkResults(calls []Call, results []driver.ToolResult) error {
	if len(results) != len(calls) {
		return fmt.Errorf("%d results for %d calls", len(results), len(calls))
	}
	for i := range calls {
		if results[i].Call.ID != calls[i].ID {
			return fmt.Errorf("result %d answers call %q, want %q", i, results[i].Call.ID, calls[i].ID)
		}
	}
	return nil
}

// A stepRun is one step of a run whose calls are run: it fans them out
// and, once one fails, halts those not started.
type stepRun struct {
	r    *Runner
	step *driver.Step
	n    int   // the step's number in its turn
	sk   *sink // the stream the run's events go to, if any
	// fence is the thread of the run's record, if any: a call is claimed
	// only while the record is this runner's (see journaldriver.Fenced).
	fence string
	// remaining is what the run's budget has left, the step's calls
	// counted, and, in an agent's child, what its cap leaves: an agent
	// tool's child may spend that (see NewAgentTool and spend.childCap).
	remaining Remaining
	// charges gathers what the children of its agent calls spent.
	charges charges
}

// charges is what the children of a step's agent calls spent, added by
// their handlers (see NewAgentTool), concurrently.
type charges struct {
	mu sync.Mutex
	s  driver.Spent
}

// add adds what a child spent. c may be nil (a call of no run's step).
func (c *charges) add(s driver.Spent) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Usage.Add(s.Usage)
	c.s.Cost += s.Cost
	c.s.ToolCalls += s.ToolCalls
}

// take returns what was added, and starts again from nothing.
func (c *charges) take() driver.Spent {
	if c == nil {
		return driver.Spent{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	c.s = driver.Spent{}
	return s
}

// runCalls runs the calls of a step, at most Concurrency at once, and returns
// their results in call order. It returns early, with the context's error,
// when ctx is canceled. Once a call fails (the journal failed), the calls
// not started yet are not started (see halt).
func (s *stepRun) runCalls(ctx context.Context) ([]driver.ToolResult, error) {
	r, step, sk := s.r, s.step, s.sk
	if sk != nil {
		// The handlers' own backend calls (a run inside a tool) are not
		// this run's to observe.
		ctx = driver.WithObserver(ctx, nil)
	}
	ctx = s.withAsk(ctx)
	results := make([]driver.ToolResult, len(step.Calls))
	if len(step.Calls) == 1 && (sk == nil || !s.agentCall(&step.Calls[0])) {
		// A lone call runs in this goroutine (handing it to another costs
		// more than a quick call): its handler runs in one of its own,
		// which a canceled context or the call's timeout leaves behind
		// (see invoke).
		var err error
		if results[0], err = s.runCall(ctx, &step.Calls[0], sk, nil); err != nil && err != errPaused {
			return nil, err
		}
		return results, err
	}
	errs := make([]error, len(step.Calls))
	h := new(halt)
	// Otherwise calls run in goroutines, even one at a time (when the
	// bound is 1), so that a canceled context ends the run at once. Each
	// reports on done when it has finished; their events reach a stream
	// through this goroutine (see sink.async).
	done := make(chan struct{}, len(step.Calls))
	var sem chan struct{}
	if len(step.Calls) > r.opts.Concurrency {
		sem = make(chan struct{}, r.opts.Concurrency)
	}
	ask := sk.async(len(step.Calls))
	launched := 0
launch:
	for i := range step.Calls {
		for sem != nil {
			select {
			case sem <- struct{}{}:
			case e := <-ask.events():
				sk.deliver(&e)
				continue
			case <-ctx.Done():
				break launch
			}
			break
		}
		if h.halted() {
			for j := i; j < len(step.Calls); j++ {
				errs[j] = errNotStarted
			}
			break
		}
		launched++
		r.workers.do(ctx, func() {
			results[i], errs[i] = s.runCall(ctx, &step.Calls[i], ask, h)
			if errs[i] != nil && errs[i] != errPaused {
				h.stop()
			}
			if sem != nil {
				<-sem
			}
			done <- struct{}{}
		})
	}
	for launched > 0 {
		select {
		case <-done:
			launched--
		case e := <-ask.events():
			sk.deliver(&e)
		case <-ctx.Done():
			return nil, ctxError(ctx)
		}
	}
	sk.flush(ask)
	if err := ctx.Err(); err != nil {
		return nil, ctxError(ctx)
	}
	var paused error
	for _, err := range errs {
		switch {
		case err == errPaused:
			paused = err
		case err != nil && err != errNotStarted:
			return nil, stepStopped(err, errs)
		}
	}
	return results, paused
}

// A halt stops the calls of a step from starting their handlers once one
// of them failed (the journal failed, or holds a call it cannot use): a
// handler started then would end in doubt too. The calls it stops are
// left to run on resume.
type halt struct{ stopped atomic.Bool }

func (h *halt) stop() {
	if h != nil {
		h.stopped.Store(true)
	}
}

func (h *halt) halted() bool { return h != nil && h.stopped.Load() }

// errNotStarted is the "error" of a call that a halt kept from starting.
var errNotStarted = errors.New("core: the call was not started")

// stepStopped is the error of a step whose call failed with first (the
// journal's error, whose code it keeps), saying what became of the step's
// calls: errs holds each call's error (nil for those whose result is
// recorded; calls never launched have errNotStarted).
func stepStopped(first error, errs []error) error {
	var recorded, paused, notStarted, failed int
	for _, err := range errs {
		switch err {
		case nil:
			recorded++
		case errPaused:
			paused++
		case errNotStarted:
			notStarted++
		default:
			failed++
		}
	}
	msg := fmt.Sprintf("the step stopped: of its %d calls, %d failed", len(errs), failed)
	if recorded > 0 {
		msg += fmt.Sprintf(", %d have their result recorded", recorded)
	}
	if paused > 0 {
		msg += fmt.Sprintf(", %d await a decision", paused)
	}
	msg += fmt.Sprintf(", %d were not started (they run when the run is resumed)", notStarted)
	return &errcode.Error{Code: errcode.Of(first), Op: "core: step", Err: fmt.Errorf("%w; %s", first, msg)}
}

// runCall produces the result of one call: from the journal when it holds
// one, else by running the handler under a claim. Only journal failures and
// cancellation are errors; everything else is a (possibly failed) result.
// Its events go to out; stop is the step's halt, if it has several calls.
func (s *stepRun) runCall(ctx context.Context, call *Call, out *sink, stop *halt) (driver.ToolResult, error) {
	r := s.r
	c := &callRun{r: r, call: call, tool: r.tools.Lookup(call.Name), key: r.key(call), step: s.n, out: out, mode: stepCall, halt: stop, fence: s.fence, remaining: s.remaining, charges: &s.charges}
	return c.hookedAnswer(ctx)
}

// agentCall reports whether call is a call of an agent tool, whose
// child's events reach a streamed run from the handler's goroutine: such
// a call, even alone in its step, runs as one of several do, its events
// going through an async view of the stream (see runCalls).
func (s *stepRun) agentCall(call *Call) bool {
	t := s.r.tools.Lookup(call.Name)
	return t != nil && t.agent != nil
}
