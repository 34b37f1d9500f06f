package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// key returns the journal key of call c: the backend's name, and the
// call's thread, turn and id.
func (r *Runner) key(c *Call) journaldriver.Key {
	return journaldriver.Key{Backend: r.b.Name(), Thread: c.Thread, Turn: c.Turn, Call: c.ID}
}

// keys returns the journal keys of the calls results answer.
func (r *Runner) keys(results []driver.ToolResult) []journaldriver.Key {
	keys := make([]journaldriver.Key, len(results))
	for i := range results {
		keys[i] = r.key(&results[i].Call)
	}
	return keys
}

// answer is hookedAnswer without its hook.
func (c *callRun) answer(ctx context.Context) (driver.ToolResult, error) {
	r := c.r
	j, call := r.opts.Journal, c.call
	if err := c.mayStart(ctx); err != nil {
		return driver.ToolResult{}, err
	}
	c.prepare()
	if c.tool != nil && c.tool.mayRerun() {
		c.unsynced, _ = j.(journaldriver.Unsynced)
	}
	if rule := approvalRule(call, c.tool); rule != nil && (c.argErr == nil || call.Kind == ServiceApproval) {
		if c.mode == outsideCall {
			// A journaled call of Runner.Call: no one to ask.
			if deny := c.outsideApproval(ctx, rule); deny != "" {
				tr := toResult(call, &journaldriver.Result{Failed: true, Error: deny, Outcome: Denied}, c.idem)
				return c.report(ctx, EventCallFinished, tr, 0, nil), nil
			}
		} else if err := c.approve(ctx, rule); err != nil {
			return driver.ToolResult{}, err
		}
	}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var (
			entry   journaldriver.Entry
			claimed bool
		)
		err := r.opts.Hooks.journalWrite(ctx, "claim", func() (err error) {
			fenced, _ := j.(journaldriver.Fenced)
			switch {
			case fenced != nil && c.fence != "":
				entry, claimed, err = fenced.ClaimFenced(ctx, journaldriver.ClaimRequest{Key: c.key, Digest: c.digest, IdempotencyKey: c.idem,
					Owner: r.opts.Owner, Lease: r.opts.Lease, Run: c.fence, Unsynced: c.unsynced != nil})
			case c.unsynced != nil:
				entry, claimed, err = c.unsynced.ClaimUnsynced(ctx, c.key, c.digest, c.idem, r.opts.Owner, r.opts.Lease)
			default:
				entry, claimed, err = j.Claim(ctx, c.key, c.digest, c.idem, r.opts.Owner, r.opts.Lease)
			}
			return err
		})
		if err != nil && c.fence != "" && errors.Is(err, journaldriver.ErrLeaseLost) && ctx.Err() == nil {
			// This runner lost the run (it stalled past its lease, and
			// another worker took it over, or even finished it): the call
			// is that worker's, and this run stops here.
			return driver.ToolResult{}, &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: run",
				Err: fmt.Errorf("the run of thread %s is not this worker's any more (another took it over, or it ended): call %s not run: %w", c.fence, c.call.ID, err)}
		}
		if err != nil {
			return driver.ToolResult{}, journalError(ctx, err)
		}
		if claimed {
			return c.runClaimed(ctx)
		}
		if entry.Digest != c.digest {
			err := fmt.Errorf("call %q is in the journal with other arguments (digest %.12s, now %.12s)", call.ID, entry.Digest, c.digest)
			c.event(ctx, EventCallReused, Conflict, 0, err)
			return driver.ToolResult{}, &errcode.Error{Code: errcode.FailedPrecondition, Op: "core: journal", Err: err}
		}
		if entry.State.Finished() {
			if entry.Result == nil {
				err := fmt.Errorf("call %q is in the journal as %v, without its result: the entry is damaged (its handler is not run again)", call.ID, entry.State)
				c.event(ctx, EventCallReused, Conflict, 0, err)
				return driver.ToolResult{}, &errcode.Error{Code: errcode.DataLoss, Op: "core: journal", Err: err}
			}
			tr := toResult(call, entry.Result, entry.IdempotencyKey)
			tr.Resend = entry.State == journaldriver.Submitted
			c.reused = true
			return c.report(ctx, EventCallReused, tr, 0, nil), nil
		}
		// Started: wait for its owner to finish, unless its lease expired.
		if !time.Now().Before(entry.LeaseUntil) {
			var took bool
			err := r.opts.Hooks.journalWrite(ctx, "takeover", func() (err error) {
				took, err = j.TakeOver(ctx, c.key, r.opts.Owner, r.opts.Lease)
				return err
			})
			if err != nil {
				return driver.ToolResult{}, journalError(ctx, err)
			}
			if took {
				c.idem = entry.IdempotencyKey
				return c.runInDoubt(ctx)
			}
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return driver.ToolResult{}, ctxError(ctx)
		}
	}
}

// runClaimed runs the handler of a call this runner claimed and records
// its result.
func (c *callRun) runClaimed(ctx context.Context) (driver.ToolResult, error) {
	r := c.r
	if c.denial != "" || c.approved {
		jr := failed(Denied, c.denial)
		if c.approved {
			jr = journaldriver.Result{Output: Output{Text: "approved"}, Outcome: OK}
		}
		if err := c.finish(ctx, &jr); err != nil {
			return driver.ToolResult{}, err
		}
		return c.report(ctx, EventCallFinished, toResult(c.call, &jr, c.idem), 0, nil), nil
	}
	if err := c.mayStart(ctx); err != nil {
		// The run's context ended, or the step halted, since the claim:
		// the call is left to run on resume.
		if c.mode != detachedCall {
			c.release(ctx)
		}
		return driver.ToolResult{}, err
	}
	if c.mode != detachedCall {
		r.leases.hold(ctx, c.key)
	}
	c.event(ctx, EventCallStarted, OK, 0, nil)
	if ctx.Err() != nil {
		// The run's context ended as the call was reported (a stream's
		// reader stopped there): the handler does not start.
		if c.mode != detachedCall {
			r.leases.drop(ctx, c.key)
			c.release(ctx)
		}
		c.event(ctx, EventCallFinished, Interrupted, 0, context.Cause(ctx))
		return driver.ToolResult{}, ctxError(ctx)
	}
	t0 := time.Now()
	jr, cause := c.handle(ctx)
	d := time.Since(t0)
	if c.mode != detachedCall {
		r.leases.drop(ctx, c.key)
	}
	c.cause = cause
	if jr.Outcome == Interrupted {
		// The run was canceled and the handler gave up: let it run again.
		// A handler left behind may still take effect: its call stays
		// started, and a resume decides it as in doubt (once its lease,
		// no longer renewed, has passed).
		c.event(ctx, EventCallFinished, jr.Outcome, d, cause)
		if c.mode == detachedCall || errors.Is(cause, errLeftBehind) {
			return driver.ToolResult{}, ctxError(ctx)
		}
		c.release(ctx)
		return driver.ToolResult{}, ctxError(ctx)
	}
	if err := c.finish(ctx, &jr); err != nil {
		return driver.ToolResult{}, err
	}
	return c.report(ctx, EventCallFinished, toResult(c.call, &jr, c.idem), d, c.cause), nil
}

// runInDoubt decides a call found started but not finished, now owned by
// this runner. With a Verify hook: the result it finds is sent; if it finds
// that the call did not take effect, the call runs again; if it cannot tell
// (an error), the call is treated as having no hook. Without one: an
// idempotent tool runs again; any other call gets a failed result saying
// its outcome is unknown.
func (c *callRun) runInDoubt(ctx context.Context) (driver.ToolResult, error) {
	r := c.r
	call, tool := c.call, c.tool
	if tool != nil && tool.opts.Verify != nil {
		v, found, err := tool.verify(ctx, call, c.toolTimeout())
		if ctx.Err() != nil {
			// The run ended while the hook looked: the call stays in
			// doubt, for the next owner to decide.
			return driver.ToolResult{}, ctxError(ctx)
		}
		switch {
		case err == nil && found:
			out, err := encodeOutput(v, c.outputLimit())
			jr := journaldriver.Result{Output: out, Outcome: OK}
			var tl *tooLargeError
			if errors.As(err, &tl) {
				jr = failed(TooLarge, tl.Error())
			} else if err != nil {
				break
			}
			if err := c.finish(ctx, &jr); err != nil {
				return driver.ToolResult{}, err
			}
			return c.report(ctx, EventCallInDoubt, toResult(call, &jr, c.idem), 0, nil), nil
		case err == nil:
			c.event(ctx, EventCallInDoubt, OK, 0, nil)
			return c.runClaimed(ctx)
		default:
			attrs := []any{"call_id", call.ID, "tool", call.Name}
			if r.opts.LogCallErrors || r.opts.Logger.Enabled(ctx, slog.LevelDebug) {
				attrs = append(attrs, errorAttr(err))
			}
			r.opts.Logger.WarnContext(ctx, "toolrelay: verify failed", attrs...)
		}
	}
	if tool == nil || tool.mayRerun() {
		c.event(ctx, EventCallInDoubt, OK, 0, nil)
		return c.runClaimed(ctx)
	}
	jr := failed(InDoubt, fmt.Sprintf("the outcome of this call of %q is unknown: it may or may not have taken effect, and it was not run again", call.Name))
	if err := c.finish(ctx, &jr); err != nil {
		return driver.ToolResult{}, err
	}
	c.cause = errors.New("call started but not finished; not verified and not idempotent")
	return c.report(ctx, EventCallInDoubt, toResult(call, &jr, c.idem), 0, c.cause), nil
}

// finish bounds the result of call c as the model reads it (see
// [outputLimit.result]: the one check every result passes, whatever
// produced it) and records it in the journal (none for a detached call).
func (c *callRun) finish(ctx context.Context, jr *journaldriver.Result) error {
	r := c.r
	var err error
	if *jr, err = c.outputLimit().result(*jr); err != nil && c.cause == nil {
		c.cause = err
	}
	if c.mode == detachedCall {
		return nil
	}
	err = r.opts.Hooks.journalWrite(ctx, "finish", func() error {
		if c.unsynced != nil {
			return c.unsynced.FinishUnsynced(ctx, c.key, r.opts.Owner, *jr)
		}
		return r.opts.Journal.Finish(ctx, c.key, r.opts.Owner, *jr)
	})
	if err != nil {
		return journalError(ctx, err)
	}
	return nil
}

// release gives up this runner's claim on call c, whose handler did not
// start or gave up, so that the call runs again; the journal's error, if
// any, only reaches the JournalWrite hook.
func (c *callRun) release(ctx context.Context) {
	r := c.r
	r.opts.Hooks.journalWrite(ctx, "release", func() error {
		return r.opts.Journal.Release(context.WithoutCancel(ctx), c.key, r.opts.Owner)
	})
}

// toResult returns the result of call the journal's result jr gives, under
// the idempotency key idem.
func toResult(call *Call, jr *journaldriver.Result, idem string) driver.ToolResult {
	return driver.ToolResult{Call: *call, Output: jr.Output, Failed: jr.Failed, Error: jr.Error, Outcome: jr.Outcome, IdempotencyKey: idem}
}

// journalError returns the error of a journal operation that failed with
// err: the context's (see ctxError) once the run's context has ended, else
// err with its code.
func journalError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	return &errcode.Error{Code: errcode.Of(err), Op: "core: journal", Err: err}
}

// journalWrite makes the journal write write, named op, and returns its
// error. When a hook wants to know how long journal writes take
// (Hooks.JournalWrite), it times the write and reports it.
func (h *Hooks) journalWrite(ctx context.Context, op string, write func() error) error {
	if h == nil || h.JournalWrite == nil {
		return write()
	}
	t0 := time.Now()
	err := write()
	h.JournalWrite(ctx, op, time.Since(t0), err)
	return err
}

// leases are the claims of the calls a runner is running. One goroutine
// renews them all every third of Options.Lease, so that a call arms no
// timer of its own: a timer due before every other wakes the runtime's
// network poller, which costs more than a quick call. The goroutine runs
// while the runner holds claims; it ends at the first renewal that finds
// none, or when the runner is closed.
//
// A claim is held for a run, and renewed only while the run's context is
// not done: once it ends (its caller, its time limit, a stream's reader
// that stopped), the claim is left to expire, whether or not the run's
// goroutine gets to act on it (a stream's reader that stops reading
// holds that goroutine), so that no other worker waits for the run more
// than a lease past its end.
type leases struct {
	mu sync.Mutex
	// held are the claims held: for each, the Done channels of the
	// contexts of the runs that hold it, one per hold.
	held    map[journaldriver.Key][]<-chan struct{}
	stop    chan struct{} // closed to end the renewing goroutine; nil when none runs
	stopped bool          // the runner is closed
	opts    *Options      // the runner's: its journal, owner and lease
}

// hold keeps the claim on key alive until drop, while ctx is not
// done.
func (l *leases) hold(ctx context.Context, key journaldriver.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[journaldriver.Key][]<-chan struct{}{}
	}
	l.held[key] = append(l.held[key], ctx.Done())
	if l.stop == nil && !l.stopped {
		l.stop = make(chan struct{})
		go l.renewLeases(l.stop)
	}
}

// drop stops renewing the claim on key held under ctx.
func (l *leases) drop(ctx context.Context, key journaldriver.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held[key]
	if i := slices.Index(held, ctx.Done()); i >= 0 {
		held = slices.Delete(held, i, i+1)
	}
	if len(held) == 0 {
		delete(l.held, key)
	} else {
		l.held[key] = held
	}
}

// live reports whether a hold of held is under a context not done.
func live(held []<-chan struct{}) bool {
	for _, done := range held {
		select {
		case <-done:
		default:
			return true // a nil channel (a context never done) too
		}
	}
	return false
}

// holds reports whether the claim on key is held.
func (l *leases) holds(key journaldriver.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held[key]) > 0
}

// close ends the renewing goroutine for good.
func (l *leases) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.stop != nil {
		close(l.stop)
		l.stop = nil
	}
}

// renewLeases renews the claims held under a context not done every third
// of the lease, until none is held or stop is closed.
func (l *leases) renewLeases(stop chan struct{}) {
	every := l.opts.Lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if len(l.held) == 0 {
			if l.stop == stop {
				l.stop = nil
			}
			l.mu.Unlock()
			return
		}
		var keys []journaldriver.Key
		for key, held := range l.held {
			if live(held) {
				keys = append(keys, key)
			}
		}
		l.mu.Unlock()
		for _, key := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			var err error
			if key.Call == "" {
				// A run's record (see runRecord).
				err = l.opts.Journal.(journaldriver.Runs).RenewRun(ctx, key.Backend, key.Thread, l.opts.Owner, l.opts.Lease)
			} else {
				err = l.opts.Journal.Renew(ctx, key, l.opts.Owner, l.opts.Lease)
			}
			cancel()
			// A claim dropped meanwhile was finished or released: its
			// renewal may fail.
			if err != nil && l.holds(key) {
				l.opts.Logger.Warn("toolrelay: lease renewal failed", "call_id", key.Call, errorAttr(err))
			}
		}
	}
}

// mayStart returns nil if a call of the step may start its handler (or
// claim it): not once the run's context is done (its error), nor once the
// step halted (errNotStarted).
func (c *callRun) mayStart(ctx context.Context) error {
	switch {
	case ctx.Err() != nil:
		return ctxError(ctx)
	case c.halt.halted():
		return errNotStarted
	}
	return nil
}

// prepare reads a call's arguments (unless they pass the limit), and
// works out their digest and the call's idempotency key.
func (c *callRun) prepare() {
	r := c.r
	call := c.call
	if n := len(call.Arguments); n > r.opts.MaxArgumentBytes {
		// Too large to parse: the handler will not run, and the digest is
		// of the bytes as received.
		c.argErr = &tooLargeError{what: "arguments", size: n, limit: r.opts.MaxArgumentBytes}
	} else {
		c.args, c.obj, c.argErr = parseArgs(call.Arguments)
	}
	c.digest = digestOf(call.Arguments, c.args)
	c.idem = journaldriver.IdempotencyKey(c.key, c.digest)
}

// event reports an event about the call.
func (c *callRun) event(ctx context.Context, kind EventKind, o Outcome, d time.Duration, err error) {
	r := c.r
	r.send(ctx, c.out, &Event{Kind: kind, Thread: c.call.Thread, Turn: c.call.Turn, Step: c.step, Call: c.call, Outcome: o, Duration: d, Err: err})
}

// report reports the event that decided the call's result tr, and
// returns tr.
func (c *callRun) report(ctx context.Context, kind EventKind, tr driver.ToolResult, d time.Duration, err error) driver.ToolResult {
	r := c.r
	r.send(ctx, c.out, &Event{Kind: kind, Thread: c.call.Thread, Turn: c.call.Turn, Step: c.step, Call: c.call, Outcome: tr.Outcome, Duration: d, Err: err, Result: &tr})
	return tr
}
