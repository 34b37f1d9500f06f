package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// activities are the backend's requests and the tool calls, run by a
// worker over its runner (its backend, toolbox, middleware, limits and
// hooks).
type activities struct {
	r     *core.Runner
	hooks *core.Hooks
	// id names the worker's activities (see stepResult.Worker): another
	// worker's, or a process's after it, differs.
	id string
	// up holds, over an agent's runner (see at), the runners of the
	// agent tools that lead to it, from the worker's.
	up []*core.Runner
}

// heartbeat records a heartbeat every third of the activity's heartbeat
// timeout until stop is called, so that a worker that dies is noticed
// while one that works is not taken for dead. details, if set, gives the
// details each heartbeat carries.
func heartbeat(ctx context.Context, details func() any) (stop func()) {
	info := activity.GetInfo(ctx)
	every := info.HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if details != nil {
					activity.RecordHeartbeat(ctx, details())
				} else {
					activity.RecordHeartbeat(ctx)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// progress is what a step's heartbeat carries: the service's thread once
// it exists, and on a chain of responses (where each response is the
// thread) the response the request made as soon as the service names it,
// so that a retried attempt resumes the turn there rather than starting
// another, a second thread, or (sending the results again) a second
// answer of the model. A failed activity's error carries it too (see
// failure, withThread), with the errors the failure matches.
type progress struct {
	Thread string `json:"thread,omitempty"`
	// Is names the errors the failure matches, as ErrorInfo.Is does.
	Is []string `json:"is,omitempty"`
}

// named is what an attempt learned of the thread the service moved to (see
// driver.StartRequest.Created, driver.SubmitRequest.Moved): kept for its
// heartbeats, and recorded at once.
type named struct {
	ctx context.Context
	mu  sync.Mutex
	p   progress
	// key, on a local activity (which cannot heartbeat), is its claim
	// key: the thread is signaled with it (SignalClaim).
	key string
}

// set records thread as the attempt's progress and heartbeats it (on a
// local activity, signals it with the claim key).
func (n *named) set(thread string) {
	if thread == "" {
		return
	}
	n.mu.Lock()
	n.p.Thread = thread
	n.mu.Unlock()
	if n.key != "" && activity.GetInfo(n.ctx).IsLocalActivity {
		// Lost, a run again sends the request again, as after a worker
		// that died before its first heartbeat.
		_ = signalClaim(n.ctx, claimSignal{Key: n.key, Thread: thread})
		return
	}
	activity.RecordHeartbeat(n.ctx, progress{Thread: thread})
}

func (n *named) get() any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p
}

// thread returns the thread named, or "".
func (n *named) thread() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p.Thread
}

// previous returns the thread the attempt before named in its heartbeat
// (a local activity's run before, in its claim: prev), or "" on a first
// attempt or when it named none.
func previous(ctx context.Context, claimed string) string {
	if claimed != "" {
		return claimed
	}
	if activity.GetInfo(ctx).Attempt <= 1 || !activity.HasHeartbeatDetails(ctx) {
		return ""
	}
	var prev progress
	if activity.GetHeartbeatDetails(ctx, &prev) != nil {
		return ""
	}
	return prev.Thread
}

// again reports whether the activity may have run before and taken
// effect: a second attempt, or a local activity whose claim the history
// holds (the workflow's Again; see LoopOptions.LocalActivities).
func again(ctx context.Context, claimed bool) bool {
	return claimed || activity.GetInfo(ctx).Attempt > 1
}

// claim signals the local activity's key to its workflow (SignalClaim)
// before the activity takes effect, so that a run of it after its worker
// died is decided as a second attempt (see again). Nothing is signaled
// for a key that is empty, or by an activity that runs again.
func claim(ctx context.Context, key string, again bool) error {
	if key == "" || again {
		return nil
	}
	return signalClaim(ctx, claimSignal{Key: key})
}

func signalClaim(ctx context.Context, c claimSignal) error {
	info := activity.GetInfo(ctx)
	return activity.GetClient(ctx).SignalWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, SignalClaim, c)
}

// Start sends the user's input. A retried attempt that knows the thread
// (from the heartbeat of the attempt before, or as the thread of a turn
// after another) resumes the turn instead, unless the service shows the
// input never arrived.
func (a *activities) Start(ctx context.Context, req *stepRequest) (*stepResult, error) {
	a, err := a.at(req.Agent)
	if err != nil {
		return nil, err
	}
	b := a.r.Backend()
	n := &named{ctx: ctx, p: progress{Thread: req.Thread}, key: req.Claim}
	prev := previous(ctx, req.Prev)
	again := again(ctx, req.Again)
	if prev == "" && again && req.PrevTurn != "" {
		// The attempt before may have sent the input and died before
		// its first heartbeat: the thread's turn before this one is
		// known, so the service can tell whether the input went.
		prev = req.Thread
	}
	if prev != "" {
		n.p.Thread = prev
		step, err := a.step(ctx, "resume", req, func(ctx context.Context) (*driver.Step, error) { return b.Resume(ctx, prev) })
		switch {
		case err != nil:
			return nil, err
		case req.Thread == "" || prev != req.Thread || step.Step.Turn != req.PrevTurn || len(step.Step.Calls) > 0:
			// A new thread holds only this turn; a chain's new
			// response, or an existing thread's last turn other than
			// before: the input went.
			return step, nil
		}
		// The input never arrived: send it.
	}
	if req.Thread != "" {
		// On a new thread, the claim is the thread the service names
		// (n.set): before, nothing took effect that a run again can find.
		if err := claim(ctx, req.Claim, again); err != nil {
			return nil, err
		}
	}
	stop := heartbeat(ctx, n.get)
	defer stop()
	sreq := &driver.StartRequest{Thread: n.p.Thread, Input: req.Input, Parts: req.Parts, Format: req.Format, Created: n.set}
	res, err := a.step(ctx, "start", req, func(ctx context.Context) (*driver.Step, error) { return b.Start(ctx, sreq) })
	if t := n.thread(); err != nil && t != "" && t != req.Thread {
		err = withThread(err, t)
	}
	return res, err
}

// Submit sends a step's results. On a chain of responses the service names
// the response the results make before it is complete (Moved): the
// heartbeat carries it, and a retried attempt resumes there, so that the
// model answers the step once. Otherwise a retried attempt asks the service
// first: if the step's calls still wait, the results go again (marked as
// resent); if the turn went on, its current step is the answer. A submit
// that fails after the service named its response reports that response
// (the turn's thread from then on) with its error.
func (a *activities) Submit(ctx context.Context, req *stepRequest) (*stepResult, error) {
	a, err := a.at(req.Agent)
	if err != nil {
		return nil, err
	}
	b := a.r.Backend()
	unwrapCalls(req.Step)
	unwrapResults(req.Results)
	results := req.Results
	if prev := previous(ctx, req.Prev); prev != "" && prev != req.Step.Thread {
		// The attempt before reached the service, which named the
		// response the results made.
		return a.step(ctx, "resume", req, func(ctx context.Context) (*driver.Step, error) { return b.Resume(ctx, prev) })
	}
	again := again(ctx, req.Again)
	if !again && req.AfterPause && req.PausedOn != a.id && !localThreads(b) {
		// The step paused on another worker (another process, perhaps
		// one that died or closed): its backend kept the thread (see
		// keep), which this one takes over as core's Resume in a second
		// process does, by reading it, so that its Close deletes what
		// the other made once the turn is over. What it reads is not
		// used: the results go as they would have.
		_, _ = b.Resume(ctx, req.Step.Thread)
	}
	if again && !localThreads(b) {
		resume := func(ctx context.Context) (*driver.Step, error) { return b.Resume(ctx, req.Step.Thread) }
		cur, err := a.step(ctx, "resume", req, resume)
		// Results the service accepted before the run before died may
		// not be applied yet: the calls still wait for a while. Looked
		// at again a few times before the results go again.
		for wait := 50 * time.Millisecond; err == nil && sameCalls(cur.Step, req.Step) && wait <= 800*time.Millisecond; wait *= 2 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			cur, err = a.step(ctx, "resume", req, resume)
		}
		if err != nil {
			return nil, err
		}
		if !sameCalls(cur.Step, req.Step) {
			return cur, nil
		}
		results = make([]driver.ToolResult, len(req.Results))
		for i, r := range req.Results {
			r.Resend = true
			results[i] = r
		}
	}
	if err := claim(ctx, req.Claim, again); err != nil {
		return nil, err
	}
	n := &named{ctx: ctx, key: req.Claim}
	stop := heartbeat(ctx, n.get)
	defer stop()
	sreq := &driver.SubmitRequest{Step: req.Step, Results: results, Format: req.Format, Moved: n.set}
	res, err := a.step(ctx, "submit", req, func(ctx context.Context) (*driver.Step, error) { return b.Submit(ctx, sreq) })
	if moved := n.thread(); err != nil && moved != "" && moved != req.Step.Thread {
		err = withThread(err, moved)
	}
	return res, err
}

// Resume returns the thread's current step.
func (a *activities) Resume(ctx context.Context, req *stepRequest) (*stepResult, error) {
	a, err := a.at(req.Agent)
	if err != nil {
		return nil, err
	}
	stop := heartbeat(ctx, nil)
	defer stop()
	return a.step(ctx, "resume", req, func(ctx context.Context) (*driver.Step, error) { return a.r.Backend().Resume(ctx, req.Thread) })
}

// Cancel cancels the service's turn on a thread, where the backend can.
func (a *activities) Cancel(ctx context.Context, thread string) error {
	c, ok := a.r.Backend().(driver.Canceler)
	if !ok || thread == "" {
		return nil
	}
	if err := c.Cancel(ctx, thread); err != nil {
		return a.failure("cancel", err)
	}
	return nil
}

// Call answers one call with the runner's executor. A second attempt (or
// a local activity whose claim the history holds) is a call started
// before whose result was lost: core decides it (Verify, a rerun of an
// idempotent tool, or "outcome unknown").
func (a *activities) Call(ctx context.Context, req *callRequest) (*driver.ToolResult, error) {
	a, err := a.at(req.Agent)
	if err != nil {
		return nil, err
	}
	stop := heartbeat(ctx, nil)
	defer stop()
	if d := req.Decision; d != nil {
		d.Arguments = edited(d.Arguments) // none arrives as a JSON null
	}
	req.Call.Arguments = unwrapArgs(req.Call.Arguments)
	again := again(ctx, req.Again)
	if err := claim(ctx, req.Claim, again); err != nil {
		return nil, err
	}
	creq := &core.CallRequest{
		Call: req.Call, Step: req.Step, IdempotencyKey: req.IdempotencyKey, Decision: req.Decision,
		Again: again,
	}
	if ch := req.Child; ch != nil {
		// The child's outcome as core's Runner.Run would return it.
		creq.Child, creq.ChildErr = result("", ch)
	}
	creq.Parents = a.parents(req.Path)
	tr, err := a.r.Call(ctx, creq)
	if err != nil {
		// Interrupted (the worker stops, or the turn was canceled): the
		// call may run again.
		return nil, err
	}
	tr.Call.Arguments = wrapArgs(tr.Call.Arguments)
	return &tr, nil
}

// step runs one backend request (op) under the runner's step hook, hands
// the deltas it streams to the workflow, and asks which calls of the step
// it got need a decision.
func (a *activities) step(ctx context.Context, op string, req *stepRequest, do func(context.Context) (*driver.Step, error)) (*stepResult, error) {
	if req.Stream {
		fw := newForwarder(ctx)
		defer fw.close()
		ctx = driver.WithObserver(ctx, fw.observe)
		step, err := a.hooked(ctx, op, req, do)
		if ferr := fw.close(); ferr != nil && err == nil {
			err = ferr
		}
		return a.answer(ctx, op, step, err)
	}
	step, err := a.hooked(ctx, op, req, do)
	return a.answer(ctx, op, step, err)
}

func (a *activities) hooked(ctx context.Context, op string, req *stepRequest, do func(context.Context) (*driver.Step, error)) (*driver.Step, error) {
	if a.hooks == nil || a.hooks.Step == nil {
		return do(ctx)
	}
	info := core.StepInfo{Thread: req.Thread, Op: op}
	if req.Step != nil {
		info.Thread, info.Turn, info.Results = req.Step.Thread, req.Step.Turn, len(req.Results)
	}
	sctx, end := a.hooks.Step(ctx, &info)
	step, err := do(sctx)
	end(step, err)
	return step, err
}

func (a *activities) answer(ctx context.Context, op string, step *driver.Step, err error) (*stepResult, error) {
	if err != nil {
		return nil, a.failure(op, err)
	}
	res := &stepResult{Backend: a.r.Backend().Name(), Step: step, Worker: a.id}
	if step == nil {
		return res, nil
	}
	pause := false
	for _, c := range step.Calls {
		need, why := a.r.ApprovalNeeded(ctx, c)
		pause = pause || need
		an := approvalNeed{Need: need, Why: why}
		if tool := a.r.Toolbox().Lookup(c.Name); tool != nil {
			an.Timeout = a.r.ToolTimeout(tool)
			an.Rerun = (tool.Idempotent() || tool.ReadOnly()) && !tool.Verifies()
			an.Agent = agentRequest(tool, c.Arguments)
		}
		res.Approvals = append(res.Approvals, an)
	}
	if pause {
		a.keep(step.Thread)
	}
	wrapCalls(step)
	return res, nil
}

// keep asks the backend, if it can, to keep thread on Close (see
// driver.Keeper), as core's Runner does when a run pauses: the step has
// calls awaiting a decision, on which the turn pauses, and another worker
// (another process) may go on with it once decided, after this one's
// Close. The backend stops keeping it once a step of the thread ends its
// turn there; a turn that ends otherwise (canceled, say) leaves it kept,
// as core's Runner leaves a paused run's.
func (a *activities) keep(thread string) {
	if k, ok := a.r.Backend().(driver.Keeper); ok && thread != "" {
		k.KeepThread(thread)
	}
}

// failure turns a backend's error into the activity's: not retried (the
// SDK clients retry what can be retried), its code the error's type, so
// that the workflow ends the turn with it.
func (a *activities) failure(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	b := a.r.Backend()
	code := b.ErrorCode(err)
	var ce *errcode.Error
	if errors.As(err, &ce) {
		code = ce.Code
	}
	var details []any
	if is := errorInfo(err).Is; len(is) > 0 {
		details = append(details, progress{Is: is}) // core.ErrBudgetExceeded, say
	}
	return temporal.NewNonRetryableApplicationError(b.Name()+": "+op+": "+err.Error(), code.String(), nil, details...)
}

// withThread returns err, a failure that ends the turn, carrying thread:
// the thread the service made or moved to before the request failed, which
// the turn is resumed from.
func withThread(err error, thread string) error {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() {
		return err // retried: the heartbeat carries it
	}
	p := failed(err)
	p.Thread = thread
	return temporal.NewNonRetryableApplicationError(ae.Message(), ae.Type(), nil, p)
}

// failed returns what an activity's failure carries (see failure,
// withThread): the zero progress if nothing.
func failed(err error) progress {
	var ae *temporal.ApplicationError
	var p progress
	if !errors.As(err, &ae) || !ae.HasDetails() || ae.Details(&p) != nil {
		return progress{}
	}
	return p
}

// failedThread returns the thread an activity's failure carries (see
// withThread), or "".
func failedThread(err error) string { return failed(err).Thread }

// localThreads reports whether b keeps its threads itself, so that another
// process (or attempt) cannot ask the service about them.
func localThreads(b driver.Backend) bool {
	cr, ok := b.(driver.CapabilityReporter)
	return ok && cr.Capabilities().LocalThreads
}

// sameCalls reports whether step a asks for the calls of b.
func sameCalls(a, b *driver.Step) bool {
	if a == nil || b == nil || len(a.Calls) != len(b.Calls) || len(a.Calls) == 0 {
		return false
	}
	for i := range a.Calls {
		if a.Calls[i].ID != b.Calls[i].ID {
			return false
		}
	}
	return true
}

// maxBatch bounds the text one delta signal carries.
const maxBatch = 64 << 10

// A forwarder hands a step's deltas to the workflow in signals, at most
// every 50 ms (and when a message is done, and at the end), so that a
// reader in another process sees the text as it is written.
type forwarder struct {
	ctx    context.Context
	mu     sync.Mutex
	batch  []driver.Delta
	size   int
	last   time.Time
	err    error
	closed bool
}

func newForwarder(ctx context.Context) *forwarder { return &forwarder{ctx: ctx, last: time.Now()} }

func (f *forwarder) observe(d driver.Delta) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.batch = append(f.batch, d)
	f.size += len(d.Text)
	activity.RecordHeartbeat(f.ctx)
	if d.Kind == driver.TextDone || f.size >= maxBatch || time.Since(f.last) >= 50*time.Millisecond {
		f.err = f.flush()
	}
	return f.err
}

// flush signals the batch; f.mu is held.
func (f *forwarder) flush() error {
	if len(f.batch) == 0 {
		return nil
	}
	info := activity.GetInfo(f.ctx)
	err := activity.GetClient(f.ctx).SignalWorkflow(f.ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, SignalDeltas, deltaBatch{Deltas: f.batch})
	f.batch, f.size, f.last = nil, 0, time.Now()
	return err
}

// close sends what is left; it reports the first error of a signal.
func (f *forwarder) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return f.err
	}
	f.closed = true
	if f.err == nil {
		f.err = f.flush()
	}
	return f.err
}

var _ = json.Marshal
