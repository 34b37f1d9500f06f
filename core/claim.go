package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// A callMode says whose loop a call is answered for, and so whether the
// journal keeps its result and a person may be asked to approve it.
type callMode uint8

const (
	// stepCall is a call of a step of this runner's own run: journaled,
	// under a lease, and a person may be asked to approve it.
	stepCall callMode = iota
	// outsideCall is a journaled call of [Runner.Call]
	// (CallRequest.Journaled): journaled as a step's call, but no person
	// can approve it.
	outsideCall
	// detachedCall is a call answered for a loop run elsewhere
	// ([Runner.Call]), which keeps its result: no journal, no lease.
	detachedCall
)

// A callRun is one call being run: its journal key, its arguments in
// canonical form (parsed once, for the digest and for the handler), and
// the step it belongs to.
type callRun struct {
	r        *Runner // the runner the call is run by
	call     *Call
	tool     *Tool // the tool of the call's name; nil if none
	key      journaldriver.Key
	args     []byte         // canonical arguments; nil when argErr is set
	obj      map[string]any // the arguments parsed (numbers as json.Number)
	argErr   error          // why the arguments are not valid
	digest   string
	idem     string
	step     int
	out      *sink  // the stream the call's events go to, if any
	denial   string // set when a person denied the call: the model is told it
	approved bool   // a service's approval request a person approved
	reused   bool   // the journal held the result
	cause    error  // the internal cause of a failed result
	// unsynced: the call's tool may run again, and the journal can write
	// its claim and result without waiting for the disk.
	unsynced journaldriver.Unsynced
	mode     callMode // whose loop the call is answered for
	halt     *halt    // the step's, if it has several calls
	// fence: the thread of the record of the run the call is answered
	// for, which the claim checks is still this runner's; empty: none.
	fence string
	// remaining is what an agent call's child may spend of the run's
	// budget, and charges what its step's agent calls' children spent
	// (see stepRun).
	remaining Remaining
	charges   *charges
	// child, on Runner.Call of an agent tool's call, is how the child's
	// run ended elsewhere (CallRequest.Child); nil: the call runs it.
	child *childRun
}

// hookedAnswer is answer inside the call hook.
func (c *callRun) hookedAnswer(ctx context.Context) (driver.ToolResult, error) {
	r := c.r
	h := r.opts.Hooks
	if h == nil || h.Call == nil {
		return c.answer(ctx)
	}
	hc := c.hooked()
	ctx, end := h.Call(ctx, &hc.info)
	tr, err := c.answer(ctx)
	e := &hc.end
	*e = CallEnd{Reused: c.reused, Cause: c.cause}
	switch {
	case err == errPaused:
		e.Paused = true
	case err != nil:
		e.Err = err
	default:
		e.Result = CallResult{Output: tr.Output, Failed: tr.Failed, Error: tr.Error, Outcome: tr.Outcome}
	}
	end(e)
	return tr, err
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
	if stop := stopOf(c, cause); stop != nil {
		// The handler asked for decisions (see Ask), or an agent tool's
		// child paused for a decision or stopped on the run's budget: so
		// does the run, the call left to run again (see NewAgentTool).
		for _, e := range stop.asked {
			c.tell(ctx, e)
		}
		c.release(ctx)
		if stop.paused {
			return driver.ToolResult{}, errPaused
		}
		return driver.ToolResult{}, stop.err
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

// approve decides whether a call that its tool's rule covers may run: it
// may (nil), it is denied (c.denial set; it runs no handler), or it awaits
// a decision (errPaused, after the approval was requested). A call whose
// result the journal holds goes the usual way.
func (c *callRun) approve(ctx context.Context, rule ApprovalRule) error {
	r := c.r
	ap, err := r.approvals()
	if err != nil {
		return err
	}
	a, ok, err := ap.GetApproval(ctx, c.key)
	if err != nil {
		return journalError(ctx, err)
	}
	now := time.Now()
	if !ok {
		if _, ran, err := r.opts.Journal.Get(ctx, c.key); err != nil || ran {
			return err
		}
		need, why, err := rule(ctx, *c.call, c.args)
		if err != nil {
			need, why = true, "the approval rule failed: "+err.Error()
		}
		if !need {
			return nil
		}
		a = Approval{Key: c.key, Tool: c.call.Name, Arguments: c.args, Why: why, Requested: now, Expires: now.Add(r.opts.ApprovalTimeout)}
		if _, _, err := ap.RequestApproval(ctx, a); err != nil {
			return journalError(ctx, err)
		}
		r.send(ctx, c.out, &Event{Kind: EventApprovalRequested, Thread: c.call.Thread, Turn: c.call.Turn, Step: c.step, Call: c.call, Text: why})
		return errPaused
	}
	if a.Decision == nil && !a.Pending(now) {
		d := Decision{Reason: "no decision in time", Actor: "toolrelay", At: now}
		if a, err = ap.DecideApproval(ctx, c.key, d); err != nil && !errors.Is(err, journaldriver.ErrDecided) {
			return journalError(ctx, err)
		}
	}
	if a.Decision == nil {
		return errPaused
	}
	c.decided(a.Decision, &r.opts)
	return nil
}

// decided applies a person's decision d to the call, under the runner's
// options o: denied, it runs no handler; a service's approval request
// approved is answered "approved"; approved with edits, the handler gets
// the edited arguments (the journal keys the call by those the model
// sent), validated as the model's are, unless they are past
// o.MaxArgumentBytes.
func (c *callRun) decided(d *Decision, o *Options) {
	switch {
	case !d.Approved:
		c.denial = "a person denied this call"
		if d.Reason != "" {
			// Cut to the limit before the copy (finish cuts the whole
			// message, saying so).
			c.denial += ": " + d.Reason[:min(len(d.Reason), o.MaxOutputBytes)]
		}
	case c.call.Kind == ServiceApproval:
		c.approved = true
	case len(d.Arguments) > o.MaxArgumentBytes:
		// Edits past the limit (Decide refuses them; another process's
		// Decide, with other limits, may not have): the handler does not
		// run.
		c.args, c.obj = nil, nil
		c.argErr = &tooLargeError{what: "arguments", size: len(d.Arguments), limit: o.MaxArgumentBytes}
	case len(d.Arguments) > 0:
		c.args, c.obj, c.argErr = parseArgs(d.Arguments)
	}
}

// outsideApproval answers a journaled call of Runner.Call whose tool has
// an approval rule: "" when the rule asks for no one, else the denial the
// model reads.
func (c *callRun) outsideApproval(ctx context.Context, rule ApprovalRule) (deny string) {
	need, why, err := rule(ctx, *c.call, c.args)
	if err != nil {
		need, why = true, "the approval rule failed"
	}
	if !need {
		return ""
	}
	msg := fmt.Sprintf("tool %q needs a person's approval, which cannot be asked for here", c.call.Name)
	if why != "" {
		msg += " (" + why + ")"
	}
	return msg
}

// detached is Runner.Call without its hook.
func (c *callRun) detached(ctx context.Context, req *CallRequest) (driver.ToolResult, error) {
	r := c.r
	c.prepare()
	if req.IdempotencyKey != "" {
		c.idem = req.IdempotencyKey
	}
	if req.Decision != nil {
		c.decided(req.Decision, &r.opts)
	}
	if req.Child != nil {
		c.child = &childRun{res: req.Child, err: req.ChildErr}
	}
	if req.Again && c.denial == "" && !c.approved {
		return c.runInDoubt(ctx)
	}
	return c.runClaimed(ctx)
}

// journaled is Runner.Call of a Journaled request.
func (c *callRun) journaled(ctx context.Context) (driver.ToolResult, error) {
	r := c.r
	tr, err := c.hookedAnswer(ctx)
	if r.own != nil {
		// The runner's own journal keeps a call no longer than it runs:
		// nothing will ask for it again.
		r.own.Forget([]journaldriver.Key{c.key})
	}
	return tr, err
}

// handle runs call c through the runner's middleware and its tool's, then
// execute.
func (c *callRun) handle(ctx context.Context) (CallResult, error) {
	r := c.r
	var own []Middleware
	if c.tool != nil {
		own = c.tool.opts.Middleware
	}
	if len(r.opts.Middleware) == 0 && len(own) == 0 {
		return c.execute(ctx)
	}
	// A copy for the closure, so that c itself stays off the heap when no
	// middleware runs (execute only reads it).
	cp := *c
	next := CallFunc(func(ctx context.Context, _ *Call) (CallResult, error) { return cp.execute(ctx) })
	for i := len(own) - 1; i >= 0; i-- {
		next = own[i](next)
	}
	for i := len(r.opts.Middleware) - 1; i >= 0; i-- {
		next = r.opts.Middleware[i](next)
	}
	return runGuarded(ctx, next, c.call)
}

// execute runs one call: it finds the tool, normalises and validates the
// arguments, runs the handler (recovering a panic, bounding its time) and
// encodes its output. Every failure becomes a failed result; the returned
// error is the internal cause, for the operator only.
func (c *callRun) execute(ctx context.Context) (journaldriver.Result, error) {
	r := c.r
	call, tool := c.call, c.tool
	if tool == nil {
		msg := fmt.Sprintf("unknown tool %q", call.Name)
		if names := r.tools.Names(); len(names) > 0 {
			msg += "; available tools: " + strings.Join(names, ", ")
		}
		return failed(UnknownTool, msg), errors.New(msg)
	}
	var tl *tooLargeError
	if errors.As(c.argErr, &tl) {
		return failed(TooLarge, tl.Error()), tl
	}
	args, err := c.args, c.argErr
	if err == nil {
		args, err = tool.prepareArgs(args, c.obj)
	}
	if err != nil {
		msg := fmt.Sprintf("invalid arguments for tool %q: %v", tool.name, err)
		return failed(InvalidArguments, msg), errors.New(msg)
	}
	if tool.agent != nil {
		// A copy, which the agent's handler reads: the context keeping c
		// itself would put every call's callRun on the heap.
		ac := *c
		ctx = context.WithValue(ctx, agentCallKey{}, &ac)
	}
	return tool.invoke(ctx, c.r.workers, call, args, c.toolTimeout(), c.outputLimit())
}

// toolTimeout returns how long a handler (or Verify hook) of the call's tool may run.
func (c *callRun) toolTimeout() time.Duration { return c.r.ToolTimeout(c.tool) }

// outputLimit returns what the runner accepts of an output of the call's tool (which
// may be nil).
func (c *callRun) outputLimit() outputLimit {
	r := c.r
	tool := c.tool
	return outputLimit{max: r.opts.MaxOutputBytes, truncate: r.opts.TruncateOutput || (tool != nil && tool.opts.TruncateOutput)}
}

// A hookedCall is what the call hook is given of a call, as it begins
// (info) and as it ends (end), made in one allocation: the hook's function
// values keep both.
type hookedCall struct {
	info CallInfo
	end  CallEnd
}

// hooked describes the call to the call hook; its end is filled as the
// call ends.
func (c *callRun) hooked() *hookedCall {
	hc := &hookedCall{info: CallInfo{Backend: c.r.b.Name(), Call: c.call, Step: c.step}}
	if c.tool != nil {
		hc.info.Server = c.tool.opts.Server
	}
	return hc
}
