package temporal

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/corestream"
)

// Stream is core's streamed run: [Runner.Stream] and [Runner.ResumeStream]
// return their turns as core.Streams, as core's Runner does, so that a
// program (and package web) reads both runners' streams alike.
type Stream = core.Stream

// Stream starts a turn as [Runner.Run] does, but streamed: the turn starts
// when the events are first read, and its events are read as they happen,
// by a caller in any process: the worker's activities hand the model's
// text to the workflow as it is written (signals), and the reader polls
// the workflow's events query. The Stream's Thread is the workflow id
// from the start.
//
// The events are core's, in core's order, each once: the pieces of a
// message (EventTextDelta) join to its EventTextDone, also when a worker
// dies in the middle of the message and another runs the step again (the
// workflow keeps how much of each message the reader was given, and
// passes on only the rest). Unlike core's Stream, a reader that stops
// does not end the turn: it goes on, and Resume (or ResumeStream)
// returns it. A reader whose queries no worker answers for a while (the
// workflow's worker died and another takes it over) asks again until its
// context ends, as Run waits.
//
// A thread runs one turn at a time: a turn asked for while another runs
// (in any process) is refused at once with an error matching
// core.ErrThreadBusy, whatever opts.NoWait says; opts.Held is called once
// the workflow accepted the turn.
func (r *Runner) Stream(ctx context.Context, input string, opts *core.RunOptions) *core.Stream {
	thread, req := r.request(input, opts, true)
	f := &follower{r: r, ctx: ctx, thread: thread, held: heldOf(opts)}
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		h, err := r.startTurn(ctx, thread, req, client.WorkflowUpdateStageAccepted)
		if err != nil {
			return f.fail(err, yield)
		}
		return f.follow(h, false, yield)
	})
}

// ResumeStream follows, streamed, the turn running on thread, as
// [Runner.Resume] waits for it: its events from the turn's start (a
// reader that resumes shows what it had not shown yet; the text of each
// message comes again from its start), through a pause on calls awaiting
// a decision that were decided since, to its end or next pause. When no
// turn runs, it replays the last turn's events (or, once the workflow
// dropped them, its answer). A turn stopped on its budget goes on, as
// Resume's does, under opts.Budget. opts.Held is called once the
// workflow accepted the wait; the rest of opts is ignored.
func (r *Runner) ResumeStream(ctx context.Context, thread string, opts *core.RunOptions) *core.Stream {
	f := &follower{r: r, ctx: ctx, thread: thread, held: heldOf(opts)}
	return corestream.New(thread, func(yield func(core.Event, error) bool) (*core.Result, error) {
		h, err := r.resume(ctx, thread, opts, true, client.WorkflowUpdateStageAccepted)
		if err != nil {
			return f.fail(clientError("resume", err), yield)
		}
		return f.follow(h, true, yield)
	})
}

// heldOf returns opts.Held, or nothing.
func heldOf(opts *core.RunOptions) func() {
	if opts == nil || opts.Held == nil {
		return func() {}
	}
	return opts.Held
}

// Poll intervals of a stream's reader: from the first, doubling while no
// event comes, up to the last.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 200 * time.Millisecond
)

// A follower reads a turn's events for a Stream.
type follower struct {
	r      *Runner
	ctx    context.Context
	thread string
	held   func()
}

// fail ends a stream whose turn could not be started or found.
func (f *follower) fail(err error, yield func(core.Event, error) bool) (*core.Result, error) {
	res := &core.Result{Thread: f.thread}
	yield(core.Event{Kind: core.EventRunFinished, Thread: f.thread, Err: err}, err)
	return res, err
}

// follow yields the events of the turn whose run or wait update h is,
// until its end (or pause), and returns its outcome. A follower that
// resumes passes over the pauses of the turn that were decided since.
// The events of its agent calls' children come in with them (see
// source).
func (f *follower) follow(h client.WorkflowUpdateHandle, resumed bool, yield func(core.Event, error) bool) (*core.Result, error) {
	f.held()
	turn, after, wait := 0, 0, pollFirst
	text := map[string]int{} // what was given of each message, for a turn whose events are gone
	root := &source{}
	for {
		n, ok := f.children(root, resumed, yield)
		if !ok {
			return &core.Result{Thread: f.thread}, core.ErrStreamStopped
		}
		page, err := f.page(f.thread, turn, after)
		if err != nil {
			return f.fail(err, yield)
		}
		if page.Gone {
			return f.finishGone(h, text, yield)
		}
		turn = page.Turn
		after += page.Skipped
		for i, e := range page.Events {
			after++
			ev := e.core()
			if ev.Kind == core.EventTextDelta && !ev.Commentary {
				text[ev.Item] += len(ev.Text) // of the answer, not of its commentary
			}
			if ev.Kind == core.EventRunFinished {
				if resumed && errors.Is(ev.Err, core.ErrAwaitingApproval) && (i < len(page.Events)-1 || f.decided()) {
					continue // a pause the turn went on from
				}
				if !f.drain(root, "", resumed, yield) {
					return &core.Result{Thread: f.thread}, core.ErrStreamStopped
				}
				res, err := f.finish(h)
				ev.Thread = f.thread
				yield(ev, ev.Err)
				return res, err
			}
			if !f.take(root, &e, &ev, resumed, yield) || !yield(ev, nil) {
				// The turn goes on; Resume returns it.
				return &core.Result{Thread: f.thread}, core.ErrStreamStopped
			}
		}
		if n > 0 || len(page.Events) > 0 {
			wait = pollFirst
			continue
		}
		select {
		case <-time.After(wait):
		case <-f.ctx.Done():
			err := clientError("stream", f.ctx.Err())
			yield(core.Event{Kind: core.EventRunFinished, Thread: f.thread, Err: err}, err)
			return &core.Result{Thread: f.thread}, err
		}
		wait = min(2*wait, pollMax)
	}
}

// A source is the child workflow of an agent call (see thread.agentCall)
// whose events a stream gives with its parent's, the call in their Path
// (as core's Runner gives a child's, see core.NewAgentTool): the stream's
// reader queries it as it queries the thread's, after its own children,
// from the agent call's EventCallStarted (which names it, event.Child) to
// its turn's end. The thread's own events have a source too, with no
// workflow, that holds its children.
type source struct {
	id          string
	path        []*core.Call // the agent calls, from the thread's
	turn, after int
	children    []*source
	// done: the child's turn ended, and its events were all given.
	done bool
}

// take notes what e, ev as core has it, an event of s's, says of s's
// children: the start of one, which the reader follows from then on, or
// the end of an agent call, whose child's events the reader gives first
// (its turn ended: all of them). It reports whether the reader goes on.
func (f *follower) take(s *source, e *event, ev *core.Event, resumed bool, yield func(core.Event, error) bool) bool {
	switch {
	case ev.Call == nil:
	case e.Child != "":
		s.children = append(s.children, &source{id: e.Child, path: append(slices.Clip(s.path), ev.Call)})
	case ev.Kind == core.EventCallFinished || ev.Kind == core.EventCallInDoubt:
		return f.drain(s, ev.Call.ID, resumed, yield)
	}
	return true
}

// children yields the events of s's children that are not done (see
// poll), and returns how many it gave, and whether the reader goes on.
func (f *follower) children(s *source, resumed bool, yield func(core.Event, error) bool) (n int, ok bool) {
	for _, c := range s.children {
		if c.done {
			continue
		}
		m, ok := f.poll(c, resumed, yield)
		n += m
		if !ok {
			return n, false
		}
	}
	return n, true
}

// poll yields the events of child c that its reader has not had, after
// its own children's, and returns how many it gave, and whether the
// reader goes on. A child whose events cannot be read (its workflow is
// not there yet) gives none this time.
func (f *follower) poll(c *source, resumed bool, yield func(core.Event, error) bool) (n int, ok bool) {
	n, ok = f.children(c, resumed, yield)
	if !ok {
		return n, false
	}
	page, err := f.page(c.id, c.turn, c.after)
	if err != nil {
		return n, true
	}
	c.turn = page.Turn
	c.after += page.Skipped
	c.done = page.Gone
	for i, e := range page.Events {
		c.after++
		n++
		ev := e.core()
		ev.Path = append(slices.Clip(c.path), ev.Path...)
		var err error
		if ev.Kind == core.EventRunFinished {
			paused := errors.Is(ev.Err, core.ErrAwaitingApproval)
			if paused && resumed && (i < len(page.Events)-1 || f.decided()) {
				continue // a pause the child went on from
			}
			if !paused {
				c.done, err = true, ev.Err // as core's stream gives a child's end
			}
		}
		if !f.take(c, &e, &ev, resumed, yield) || !yield(ev, err) {
			return n, false
		}
	}
	return n, true
}

// drain gives the events left of the children of s's call callID (all of
// s's children when callID is ""), whose turns ended: it reads them until
// they have no more. It reports whether the reader goes on.
func (f *follower) drain(s *source, callID string, resumed bool, yield func(core.Event, error) bool) bool {
	for _, c := range s.children {
		if c.done || callID != "" && c.path[len(c.path)-1].ID != callID {
			continue
		}
		for !c.done {
			n, ok := f.poll(c, resumed, yield)
			if !ok {
				return false
			}
			if n == 0 {
				break
			}
		}
		c.done = true
	}
	return true
}

// decided reports whether the turn's calls awaiting a decision (when the
// last of its events is a pause) were all decided: the turn goes on.
func (f *follower) decided() bool {
	list, err := f.r.Approvals(f.ctx, f.thread)
	if err != nil {
		return false
	}
	for _, a := range list {
		if a.Decision == nil {
			return false
		}
	}
	return true
}

// page reads the events of turn of workflow id after the first after. A query no worker
// answered in time, or that the server canceled (the worker that ran the
// workflow stopped, and another takes it over), is asked again until the
// reader's context ends, as the turn's outcome is waited for: see
// Runner.query.
func (f *follower) page(id string, turn, after int) (*eventsPage, error) {
	v, err := f.r.query(f.ctx, 0, id, QueryEvents, eventsRequest{Turn: turn, After: after})
	if err != nil {
		return nil, clientError("stream", err)
	}
	var p eventsPage
	if err := v.Get(&p); err != nil {
		return nil, clientError("stream", err)
	}
	return &p, nil
}

// unanswered reports whether a query failed for want of a worker to answer
// it in time: the query's own deadline (the client's, 10 s a request,
// not the caller's) passed, or the workflow's task is failing for now.
// When the worker that ran the workflow dies, the server offers the query
// to that worker's queue for 5 s (its sticky schedule-to-start timeout),
// then waits for another worker to take the workflow and replay it: on a
// loaded machine, or while a new worker starts, that passes 10 s. The
// turn goes on meanwhile.
func unanswered(err error) bool {
	var (
		de *serviceerror.DeadlineExceeded
		nr *serviceerror.WorkflowNotReady
	)
	return errors.As(err, &de) || errors.As(err, &nr) || errors.Is(err, context.DeadlineExceeded)
}

// finish takes the turn's outcome from its run or wait update.
func (f *follower) finish(h client.WorkflowUpdateHandle) (*core.Result, error) {
	tr, err := f.r.outcome(f.ctx, f.thread, h)
	if err != nil {
		return &core.Result{Thread: f.thread}, clientError("stream", err)
	}
	return result(f.thread, tr)
}

// finishGone ends a stream whose turn's events were dropped (the workflow
// continued as new): the rest of the answer's text, then the end.
func (f *follower) finishGone(h client.WorkflowUpdateHandle, text map[string]int, yield func(core.Event, error) bool) (*core.Result, error) {
	res, err := f.finish(h)
	if res != nil && res.Text != "" {
		n := 0
		for _, m := range text {
			n = max(n, m)
		}
		if n < len(res.Text) && !yield(core.Event{Kind: core.EventTextDelta, Text: res.Text[n:]}, nil) {
			return res, err
		}
		if !yield(core.Event{Kind: core.EventTextDone, Text: res.Text}, nil) {
			return res, err
		}
	}
	yield(core.Event{Kind: core.EventRunFinished, Thread: f.thread, Err: err}, err)
	return res, err
}

// core returns the event as package core has it.
func (e *event) core() core.Event {
	ev := core.Event{Kind: e.Kind, Thread: e.Thread, Turn: e.Turn, Step: e.Step, Call: e.Call, Calls: e.Calls, Outcome: e.Outcome,
		Result: e.Result, Item: e.Item, Text: e.Text, Usage: e.Usage, Remaining: e.Remaining, Commentary: e.Commentary}
	if e.Err != nil {
		ev.Err = e.Err.Err()
	}
	if ev.Call != nil {
		c := *ev.Call
		c.Arguments = unwrapArgs(c.Arguments)
		ev.Call = &c
	}
	if ev.Result != nil {
		r := *ev.Result
		r.Call.Arguments = unwrapArgs(r.Call.Arguments)
		ev.Result = &r
	}
	return ev
}
