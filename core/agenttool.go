package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// AgentToolOptions configure an agent tool ([NewAgentTool]). The zero
// value (or nil) is usable.
type AgentToolOptions struct {
	// Parameters, if set, is the JSON Schema of the tool's arguments (an
	// object), and the child's input is the call's arguments as canonical
	// JSON text. Without it the tool takes {"input": string}, and the
	// child's input is that string.
	Parameters json.RawMessage
	// Run configures each run of the child: MaxSteps, Timeout, Format
	// (the child's answer is then a JSON document of its schema, which is
	// the call's output, as JSON), Budget (the child's own; the parent's
	// applies too, see [NewAgentTool]). Thread, Parts, NoWait, Held and
	// HandOver are refused: the tool chooses the child's thread.
	Run RunOptions
	// Tool configures the tool as [ToolOptions] configure any tool's:
	// Timeout (zero means the child's run time limit, Run.Timeout or the
	// child runner's Options.RunTimeout, and a little more, so that the
	// child's own limit ends it first), Approval (of the call of the
	// child itself), Middleware, TruncateOutput, Strict, DeferLoading,
	// Server. Verify, Fields, Abandon, ReadOnly and Idempotent are
	// refused: the tool is idempotent (a call run again goes on with the
	// same child turn, see NewAgentTool), and abandons its child itself.
	Tool ToolOptions
}

// agentTimeMargin is how much longer an agent tool's handler may run than
// its child's run: the child's time limit ends it first, with its own
// error, its turn left waiting for a resume.
const agentTimeMargin = 10 * time.Second

// An agentTool is the child side of a tool made by [NewAgentTool].
type agentTool struct {
	name  string
	child *Runner
	ro    RunOptions // the child's run options
	raw   bool       // the input is the arguments, as JSON text
}

// NewAgentTool makes a tool whose calls run child's agent, on whatever
// backend child has: the agent as a tool of another run (the parent). A
// call's arguments are the child's input ({"input": "…"}, unless
// opts.Parameters says otherwise), and its result is the child's answer
// ([Result.Text]; with opts.Run.Format, the JSON document of the format,
// as a JSON value). opts may be nil.
//
// Each call runs the child exactly once, whatever stops the parent: the
// child's thread is noted in the parent's journal under the journal key
// of the parent's call (its backend, thread, turn and id) as soon as the
// child's backend names it, so that the call run again, after a crash, a
// canceled context, a pause or a takeover (in this process or another
// sharing the parent's journal and the child's), resumes the same child
// turn ([Runner.Resume] of child) rather than starting a second, and the
// child's journal runs each of the child's calls once. A call whose child
// answered gets that answer again without asking the child. What is not
// covered is a crash between the child's backend creating the thread and
// the note being written: as for any run (see package doc, Fleets), a
// worker that dies before it recorded a thread leaves no trace of it, and
// the call starts a new child. (Nor is the child's run recorded for a
// takeover before its thread exists, as a run of its own would be: the
// parent's call stands for it, so that [Runner.TakeOver] of child never
// starts a second child; once the thread exists, a takeover of either
// runner goes on with the same child turn.) The parent's journal must
// keep notes (memory, SQLite, PostgreSQL; without them every run of the
// call starts a new child), and approvals to pause (see below); the
// child's journal must be one both processes share for its calls to run
// once across them.
// (Runners that share a journal must not have backends of one name that
// name their threads alike, as two fakes of one kind do: their calls'
// journal keys would meet. Services' thread ids are unique.)
//
// The parent's run and the child's are one run:
//
//   - Approvals: a child that pauses for a person's decision pauses the
//     parent. The parent's journal keeps a copy of each approval the
//     child awaits, keyed by the parent's call with the id of the
//     parent's call, "/" and the id of the child's call as its call id:
//     [Runner.Approvals] of the parent lists them, [Runner.Decide] of the
//     parent decides them (approve or deny; edited arguments are
//     refused), and [Runner.Resume] of the parent, once every one is
//     decided, hands the decisions to the child and resumes both.
//   - Budget: the child runs under the parent's budget as well as its own:
//     it may spend, of each limit of the parent's, at most what the parent
//     had left when the call started (the parent's step's calls counted);
//     past it, the child stops as on its own budget, and so does the parent
//     (an error matching [ErrBudgetExceeded]), the call left to run again:
//     a resume of the parent with a raised budget resumes the child.
//     Concurrent agent calls of one step are each given what the parent had
//     left. A parent that is itself an agent's child gives its own child no
//     more than what its cap leaves (what its parent had left, less what it
//     spent since it started), so that a grandchild stays within each
//     budget above it: past it, the grandchild, its parent and each run
//     above stop so, and a resume of the top run with a raised budget
//     resumes them all. (A grandchild past what its parent's own budget had
//     left stops them all so too, and as that resume raises the top run's
//     budget only, they stop again.) The child's spend (its turn's usage,
//     cost and calls) is added to the parent's when the parent sends the
//     call's result, and is part of the parent's [Result.Usage], Cost and
//     ToolCalls from then on.
//   - Events: the child's events, with their Path naming the parent's
//     call ([Event.Path]), go to the parent's OnEvent and, for a streamed
//     parent, to its stream, besides the child runner's own logger and
//     OnEvent. (Where the child runs elsewhere, its calls' events come
//     through [CallRequest.Parents].)
//   - Tracing: the child's run is a run inside the parent's call (its
//     hooks get the call's context), so with package telemetry on both
//     runners the child's spans nest in the call's execute_tool span.
//   - Cancellation: the child's run has the call's context: the parent's
//     ending (canceled, past its time limit) ends the child's, whose turn
//     is left waiting, as the parent's is, for a resume of the parent.
//     [Runner.Cancel] of the parent, which abandons its turn, cancels
//     the child's waiting turn too.
//
// A call answered for a loop run elsewhere ([Runner.Call]) runs the child
// the same way, but no one can be asked for a decision there and no run's
// budget is shared: a child that pauses gives a failed result. (Module
// toolrelay/temporal runs the child itself, as a child workflow, with the
// child's approvals and budget the parent's: see [Tool.Agent].) A child
// that stops on its own budget (its runner's Options.Budget, or
// opts.Run.Budget) gives a failed result saying so, and one that fails
// otherwise a failed result naming its error's code; the child's turn is
// then canceled (where its backend can), as no one will resume it.
func NewAgentTool(name, description string, child *Runner, opts *AgentToolOptions) (*Tool, error) {
	if child == nil {
		return nil, fmt.Errorf("core: agent tool %q: nil child runner", name)
	}
	var o AgentToolOptions
	if opts != nil {
		o = *opts
	}
	ro := o.Run
	switch {
	case ro.Thread != "":
		return nil, fmt.Errorf("core: agent tool %q: Run.Thread is chosen by the tool (one child thread per call)", name)
	case len(ro.Parts) > 0:
		return nil, fmt.Errorf("core: agent tool %q: Run.Parts are not supported: the child's input is the call's arguments", name)
	case ro.NoWait || ro.Held != nil || ro.HandOver != nil:
		return nil, fmt.Errorf("core: agent tool %q: Run.NoWait, Held and HandOver are not supported", name)
	case ro.Timeout < 0 || ro.MaxSteps < 0:
		return nil, fmt.Errorf("core: agent tool %q: negative Run.Timeout or Run.MaxSteps", name)
	}
	if err := ro.Budget.Check(); err != nil {
		return nil, fmt.Errorf("core: agent tool %q: Run.Budget: %w", name, err)
	}
	to := o.Tool
	switch {
	case to.Verify != nil || len(to.Fields) > 0 || to.Abandon != nil:
		return nil, fmt.Errorf("core: agent tool %q: Tool.Verify, Tool.Fields and Tool.Abandon are not supported (the tool abandons its child itself)", name)
	case to.ReadOnly || to.Idempotent:
		return nil, fmt.Errorf("core: agent tool %q: Tool.ReadOnly and Tool.Idempotent are not for an agent tool to set (it is idempotent)", name)
	}
	to.Idempotent = true
	a := &agentTool{name: name, child: child, ro: ro, raw: len(o.Parameters) > 0}
	to.Abandon = a.abandonCall
	if to.Timeout == 0 {
		to.Timeout = child.runOptions(&ro).Timeout + agentTimeMargin
	}
	var (
		t   *Tool
		err error
	)
	if a.raw {
		t, err = NewRawTool(name, description, o.Parameters, a.runRaw, &to)
	} else {
		t, err = NewTool(name, description, a.runInput, &to)
	}
	if err != nil {
		return nil, err
	}
	t.agent = a
	return t, nil
}

// agentInput is the default arguments of an agent tool.
type agentInput struct {
	Input string `json:"input" jsonschema:"what to ask the agent"`
}

func (a *agentTool) runInput(ctx context.Context, in agentInput) (any, error) {
	return a.run(ctx, in.Input)
}

func (a *agentTool) runRaw(ctx context.Context, args json.RawMessage) (any, error) {
	return a.run(ctx, string(args))
}

// An agentCall is one call of an agent tool, in the handler: the
// parent's call (its callRun) and the child it runs.
type agentCall struct {
	a     *agentTool
	c     *callRun // the parent's call
	notes journaldriver.Notes
	name  string // the note's name
}

// callOf returns the agent call of the parent's call c: its note, in the
// parent's journal if it keeps notes.
func (a *agentTool) callOf(c *callRun) *agentCall {
	ac := &agentCall{a: a, c: c, name: agentNoteName(c.call)}
	ac.notes, _ = c.r.opts.Journal.(journaldriver.Notes)
	return ac
}

// agentCallKey keys the parent's callRun in the context of an agent
// tool's handler (see callRun.execute).
type agentCallKey struct{}

// agentNote is what the parent's journal notes of an agent call: the
// child's thread, what of its turn's spend the parent was charged, and,
// once it answered, its answer.
type agentNote struct {
	Thread  string       `json:"thread"`
	Done    bool         `json:"done,omitempty"`
	Text    string       `json:"text,omitempty"`
	Charged driver.Spent `json:"charged,omitzero"`
}

// agentNoteName is the name, on the parent's thread, of the note of the
// agent call c.
func agentNoteName(c *Call) string { return "agent." + c.Turn + "." + c.ID }

// run runs the child on input for the parent's call in ctx.
func (a *agentTool) run(ctx context.Context, input string) (any, error) {
	c, _ := ctx.Value(agentCallKey{}).(*callRun)
	if c == nil {
		return nil, errors.New("core: an agent tool runs only as a runner's tool")
	}
	if c.child != nil {
		return a.ranElsewhere(c.child)
	}
	ac := a.callOf(c)
	n, found := ac.read(ctx)
	if found && n.Done {
		return a.output(n.Text), nil
	}
	b := start(input)
	b.child = true
	if found && n.Thread != "" {
		ac.hand(ctx, n.Thread)
		b = resume(n.Thread)
		b.child = true
	} else {
		b.onThread = func(t string) { ac.write(ctx, agentNote{Thread: t}) }
	}
	if c.mode == stepCall && c.remaining.Set {
		b.cap = &c.remaining
	}
	res, err := a.child.exec(ctx, a.child.runOptions(&a.ro), b, ac.relay(ctx))
	if res != nil {
		if res.Thread != "" {
			n.Thread = res.Thread
		}
		ac.charge(&n, res)
	}
	switch {
	case err == nil:
		n.Done, n.Text = true, res.Text
		ac.write(ctx, n)
		return a.output(res.Text), nil
	case n.Thread != "":
		ac.write(ctx, n)
	}
	switch {
	case ctx.Err() != nil:
		return nil, err
	case errors.Is(err, ErrAwaitingApproval) && res != nil && len(res.Pending) > 0:
		if c.mode != stepCall {
			return nil, a.failure(err)
		}
		return nil, ac.mirror(ctx, res.Pending)
	case errors.Is(err, errParentBudget) && c.mode == stepCall:
		return nil, &callStop{err: err}
	}
	// The call's result is final: the child's turn, if it waits, is
	// abandoned, not left parked.
	ac.abandon(ctx, n.Thread)
	return nil, a.failure(err)
}

// failure returns the call's failed result of the child's run that ended
// with err, where no one can be asked and no run's budget is shared (see
// NewAgentTool): it paused, its own budget is spent, or it failed.
func (a *agentTool) failure(err error) error {
	switch {
	case errors.Is(err, ErrAwaitingApproval):
		return &ModelError{Message: fmt.Sprintf("agent %q awaits a person's decision, which cannot be asked for here", a.name), Err: err}
	case errors.Is(err, ErrBudgetExceeded):
		return &ModelError{Message: fmt.Sprintf("agent %q stopped: its budget is spent", a.name), Err: err}
	}
	return &ModelError{Message: fmt.Sprintf("agent %q failed (%s)", a.name, errcode.Of(err)), Err: err}
}

// errParentBudget is matched by the error of a child run stopped on what
// its parent's budget had left (see Remaining.exceeded), besides
// ErrBudgetExceeded: the parent stops too. A child stopped on its own
// budget gives a failed result instead.
var errParentBudget = errors.New("the parent run's budget")

// abandon cancels the child's turn waiting on thread, if any, with a
// short context of its own (the call's may have ended); a failure is
// logged.
func (ac *agentCall) abandon(ctx context.Context, thread string) {
	child := ac.a.child
	if _, ok := child.b.(driver.Canceler); !ok || thread == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := child.Cancel(cctx, thread); err != nil {
		ac.c.r.opts.Logger.WarnContext(ctx, "toolrelay: could not cancel an agent call's child", "call_id", ac.c.call.ID, errorAttr(err))
	}
}

// abandonCall is the Abandon hook of an agent tool (see Runner.Cancel,
// whose runner ctx carries): the child's turn of call, if noted and not
// answered, is canceled.
func (a *agentTool) abandonCall(ctx context.Context, call Call) error {
	r, _ := ctx.Value(cancelingKey{}).(*Runner)
	if r == nil {
		return nil
	}
	ac := a.callOf(&callRun{r: r, call: &call})
	if n, found := ac.read(ctx); found && !n.Done && n.Thread != "" {
		ac.abandon(ctx, n.Thread)
	}
	return nil
}

// cancelingKey keys, in the context of the Abandon hooks Runner.Cancel
// calls, the runner that cancels.
type cancelingKey struct{}

// charge charges the parent's run with what the child's turn spent
// (res's totals count from the turn's start) past what the parent was
// charged before (n.Charged), and notes it in n.
func (ac *agentCall) charge(n *agentNote, res *Result) {
	was := n.Charged
	now := driver.Spent{Usage: res.Usage, Cost: res.Cost, ToolCalls: res.ToolCalls}
	d := driver.Spent{
		Usage: Usage{InputTokens: max(now.Usage.InputTokens-was.Usage.InputTokens, 0), OutputTokens: max(now.Usage.OutputTokens-was.Usage.OutputTokens, 0),
			TotalTokens: max(now.Usage.TotalTokens-was.Usage.TotalTokens, 0)},
		Cost: max(now.Cost-was.Cost, 0), ToolCalls: max(now.ToolCalls-was.ToolCalls, 0),
	}
	if d == (driver.Spent{}) || ac.c.charges == nil {
		return
	}
	ac.c.charges.add(d)
	n.Charged.Usage.Add(d.Usage)
	n.Charged.Cost += d.Cost
	n.Charged.ToolCalls += d.ToolCalls
}

// output returns the child's answer as the call's output: with a format,
// its JSON document as JSON (text that is not JSON as it is).
func (a *agentTool) output(text string) any {
	if a.ro.Format != nil && json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	return text
}

// read returns the call's note, if the parent's journal has one.
func (ac *agentCall) read(ctx context.Context) (agentNote, bool) {
	var n agentNote
	if ac.notes == nil {
		return n, false
	}
	c := ac.c
	v, found, err := ac.notes.Note(ctx, c.r.b.Name(), c.call.Thread, ac.name)
	if err != nil || !found || v == "" {
		if err != nil {
			c.r.opts.Logger.WarnContext(ctx, "toolrelay: could not read an agent call's child", "call_id", c.call.ID, errorAttr(err))
		}
		return n, false
	}
	if json.Unmarshal([]byte(v), &n) != nil {
		return agentNote{}, false
	}
	return n, true
}

// write notes n for the call. A failure costs the call its exactly-once
// child across a crash, so it is logged.
func (ac *agentCall) write(ctx context.Context, n agentNote) {
	if ac.notes == nil {
		return
	}
	c := ac.c
	b, _ := json.Marshal(n)
	if err := ac.notes.SetNote(context.WithoutCancel(ctx), c.r.b.Name(), c.call.Thread, ac.name, string(b)); err != nil {
		c.r.opts.Logger.WarnContext(ctx, "toolrelay: could not note an agent call's child", "call_id", c.call.ID, errorAttr(err))
	}
}

// mirror copies the approvals the child awaits into the parent's journal,
// under the parent's call (see NewAgentTool), as questions of the call
// are (see Ask), and returns the call's stop, which reports each new one
// as the parent's approval request.
func (ac *agentCall) mirror(ctx context.Context, pending []Approval) error {
	c := ac.c
	ap, err := c.r.approvals()
	if err != nil {
		return err
	}
	copies := make([]Approval, len(pending))
	for i, p := range pending {
		copies[i] = p
		copies[i].Key = c.key
		copies[i].Key.Call = c.key.Call + askSep + p.Key.Call
	}
	events, err := c.requestApprovals(ctx, ap, copies)
	if err != nil {
		return err
	}
	return &callStop{paused: true, asked: events}
}

// hand hands the decisions the parent's journal holds for the child's
// approvals (see mirror) to the child, on its thread: a decision the
// child has already is left as it is. A copy past its time is decided
// as denied (see callRun.expire); the child denies it on its side.
func (ac *agentCall) hand(ctx context.Context, thread string) {
	c := ac.c
	ap, ok := c.r.opts.Journal.(journaldriver.Approvals)
	if !ok {
		return
	}
	list, err := ap.ListApprovals(ctx, c.r.b.Name(), c.call.Thread)
	if err != nil {
		c.r.opts.Logger.WarnContext(ctx, "toolrelay: could not read an agent call's approvals", "call_id", c.call.ID, errorAttr(err))
		return
	}
	now := time.Now()
	for _, m := range askedBy(list, c.call) {
		if m.Decision == nil && !m.Pending(now) {
			c.expire(ctx, ap, m)
			continue
		}
		if m.Decision == nil {
			continue
		}
		id := strings.TrimPrefix(m.Key.Call, c.call.ID+askSep)
		err := ac.a.child.Decide(ctx, thread, id, *m.Decision)
		if err != nil && errcode.Of(err) != errcode.FailedPrecondition {
			c.r.opts.Logger.WarnContext(ctx, "toolrelay: could not hand a decision to an agent call's child", "call_id", c.call.ID, "child_call_id", id, errorAttr(err))
		}
	}
}

// relay returns the sink of the child's run, which hands its events on
// to the parent (see NewAgentTool), or nil when the parent has neither
// OnEvent nor a stream.
func (ac *agentCall) relay(ctx context.Context) *sink {
	c := ac.c
	if c.r.opts.OnEvent == nil && c.out == nil {
		return nil
	}
	return &sink{yield: func(e Event, _ error) bool {
		e.Path = append([]*Call{c.call}, e.Path...)
		if e.Kind < EventTextDelta {
			handOn(c.r, &e)
		}
		ac.put(ctx, &e)
		return true
	}}
}

// relayTo returns a sink that hands the events of a call of an agent's
// run that goes on elsewhere to the OnEvent of each of the runners of
// parents (see CallRequest.Parents), as relay does for a child run here;
// nil when there are none.
func relayTo(parents []Parent) *sink {
	if len(parents) == 0 {
		return nil
	}
	path := make([]*Call, len(parents))
	for i := range parents {
		path[i] = &parents[i].Call
	}
	return &sink{yield: func(e Event, _ error) bool {
		if e.Kind >= EventTextDelta {
			return true
		}
		own := e.Path
		for i := len(parents) - 1; i >= 0; i-- {
			r := parents[i].Runner
			if r.opts.OnEvent == nil {
				continue
			}
			e.Path = append(slices.Clip(path[i:]), own...)
			handOn(r, &e)
		}
		return true
	}}
}

// put hands e to the parent's stream, if any: an async view (see
// runCalls), which the goroutine of the parent's run drains. It gives up
// once the call's context ends, when no one drains it any more.
func (ac *agentCall) put(ctx context.Context, e *Event) {
	out := ac.c.out
	if out == nil || out.ch == nil {
		return
	}
	select {
	case out.ch <- *e:
	case <-ctx.Done():
	}
}

// exceeded returns why a child run that spent s, from base at its start,
// must stop before running the next calls of its step, under rem, what
// its parent had left (see NewAgentTool); nil if it may go on.
func (rem *Remaining) exceeded(s, base driver.Spent, next int) error {
	reached := func(name string, left, used int64) error {
		if left >= 0 && used >= left {
			return fmt.Errorf("%w: %s %d, of the %d %w had left", ErrBudgetExceeded, name, used, left, errParentBudget)
		}
		return nil
	}
	d := spentSince(s, base)
	err := reached("input tokens", rem.InputTokens, d.Usage.InputTokens)
	if err == nil {
		err = reached("output tokens", rem.OutputTokens, d.Usage.OutputTokens)
	}
	if err == nil {
		err = reached("total tokens", rem.TotalTokens, d.Usage.TotalTokens)
	}
	if used := int64(d.ToolCalls + next); err == nil && rem.ToolCalls >= 0 && used > rem.ToolCalls {
		err = fmt.Errorf("%w: tool calls %d, of the %d %w had left", ErrBudgetExceeded, used, rem.ToolCalls, errParentBudget)
	}
	if used := d.Cost; err == nil && rem.Cost >= 0 && used >= rem.Cost {
		err = fmt.Errorf("%w: cost %s, of the %s %w had left", ErrBudgetExceeded, costText(used), costText(rem.Cost), errParentBudget)
	}
	if err == nil {
		return nil
	}
	return &errcode.Error{Code: errcode.ResourceExhausted, Op: "core: run", Err: err}
}

// A childRun is how an agent tool's child ran elsewhere
// (CallRequest.Child): its result and error.
type childRun struct {
	res *Result
	err error
}

// ranElsewhere returns the call's output, or its failure, from the
// outcome of its child's run elsewhere, as run gives them for a loop run
// elsewhere (see NewAgentTool).
func (a *agentTool) ranElsewhere(ch *childRun) (any, error) {
	switch {
	case ch.err != nil:
		return nil, a.failure(ch.err)
	case ch.res == nil:
		return nil, a.failure(errors.New("core: the child's run gave no result"))
	}
	return a.output(ch.res.Text), nil
}

// Agent returns, for a tool made by [NewAgentTool], the runner of its
// child and the options of the child's runs (AgentToolOptions.Run, its
// MaxSteps, Timeout and Budget laid over the child runner's Options);
// ok is false for any other tool. With [Tool.AgentInput] and
// [CallRequest.Child] it lets a loop run elsewhere run the child itself:
// module toolrelay/temporal runs it as a child workflow.
func (t *Tool) Agent() (child *Runner, run RunOptions, ok bool) {
	a := t.agent
	if a == nil {
		return nil, RunOptions{}, false
	}
	ro := a.child.runOptions(&a.ro)
	ro.Budget = ro.Budget.Over(a.child.opts.Budget)
	return a.child, ro, true
}

// AgentInput returns the child's input for a call of the agent tool t
// with the arguments args, as its calls give it to the child: an error
// if t is not an agent tool, or args do not fit its parameters.
func (t *Tool) AgentInput(args json.RawMessage) (string, error) {
	a := t.agent
	if a == nil {
		return "", fmt.Errorf("core: tool %q is not an agent tool", t.name)
	}
	canon, obj, err := parseArgs(args)
	if err == nil {
		canon, err = t.prepareArgs(canon, obj)
	}
	if err != nil {
		return "", fmt.Errorf("core: agent tool %q: arguments: %w", t.name, err)
	}
	if a.raw {
		return string(canon), nil
	}
	var in agentInput
	if err := json.Unmarshal(canon, &in); err != nil {
		return "", fmt.Errorf("core: agent tool %q: arguments: %w", t.name, err)
	}
	return in.Input, nil
}
