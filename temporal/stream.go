package temporal

import (
	"context"
	"errors"
	"iter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// A Stream is a turn whose events are read as they happen, by a caller in
// any process: the worker's activities hand the model's text to the
// workflow as it is written (signals), and the reader polls the
// workflow's events query. Range over [Stream.Events] once; [Stream.Result]
// then returns what [Runner.Run] would have.
//
// The events are core's, in core's order, each once: the pieces of a
// message (EventTextDelta) join to its EventTextDone, also when a worker
// dies in the middle of the message and another runs the step again (the
// workflow keeps how much of each message the reader was given, and
// passes on only the rest). Unlike core's Stream, a reader that stops
// does not end the turn: it goes on, and Resume returns it.
type Stream struct {
	r      *Runner
	ctx    context.Context
	thread string
	req    *RunRequest

	ranged bool
	res    *core.Result
	err    error
}

// Stream starts a turn as [Runner.Run] does, but streamed: the turn starts
// when the events are first read.
func (r *Runner) Stream(ctx context.Context, input string, opts *core.RunOptions) *Stream {
	thread, req := r.request(input, opts, true)
	return &Stream{r: r, ctx: ctx, thread: thread, req: req}
}

// Thread returns the stream's thread (a workflow id).
func (s *Stream) Thread() string { return s.thread }

// Poll intervals of a stream's reader: from the first, doubling while no
// event comes, up to the last.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 200 * time.Millisecond
)

// Events returns the turn's events, in order. The error is nil but on the
// last event, EventRunFinished, whose Err it repeats when the turn failed
// or paused on calls awaiting a decision.
func (s *Stream) Events() iter.Seq2[core.Event, error] {
	return func(yield func(core.Event, error) bool) {
		if s.ranged {
			err := errors.New("temporal: a Stream's events can be read once")
			yield(core.Event{Kind: core.EventRunFinished, Err: err}, err)
			return
		}
		s.ranged = true
		err := checkParts(s.req.Parts)
		var h client.WorkflowUpdateHandle
		if err == nil {
			h, err = s.r.startTurn(s.ctx, s.thread, s.req, client.WorkflowUpdateStageAccepted)
		}
		if err != nil {
			s.err = err
			yield(core.Event{Kind: core.EventRunFinished, Err: err}, err)
			return
		}
		turn, after, wait := 0, 0, pollFirst
		text := map[string]int{} // what was given of each message, for a turn whose events are gone
		for {
			page, err := s.page(turn, after)
			if err != nil {
				s.err = err
				yield(core.Event{Kind: core.EventRunFinished, Thread: s.thread, Err: err}, err)
				return
			}
			if page.Gone {
				s.finishGone(h, text, yield)
				return
			}
			turn = page.Turn
			for _, e := range page.Events {
				after++
				ev := e.core()
				if ev.Kind == core.EventTextDelta {
					text[ev.Item] += len(ev.Text)
				}
				if ev.Kind == core.EventRunFinished {
					s.finish(h)
					ev.Thread = s.thread
					yield(ev, ev.Err)
					return
				}
				if !yield(ev, nil) {
					return // the turn goes on; Resume returns it
				}
			}
			if len(page.Events) > 0 {
				wait = pollFirst
				continue
			}
			select {
			case <-time.After(wait):
			case <-s.ctx.Done():
				s.err = clientError("stream", s.ctx.Err())
				yield(core.Event{Kind: core.EventRunFinished, Thread: s.thread, Err: s.err}, s.err)
				return
			}
			wait = min(2*wait, pollMax)
		}
	}
}

// page reads the events of turn after the first after.
func (s *Stream) page(turn, after int) (*EventsPage, error) {
	v, err := s.r.c.QueryWorkflow(s.ctx, s.thread, "", QueryEvents, EventsRequest{Turn: turn, After: after})
	if err != nil {
		return nil, clientError("stream", err)
	}
	var p EventsPage
	if err := v.Get(&p); err != nil {
		return nil, clientError("stream", err)
	}
	return &p, nil
}

// finish takes the turn's outcome from its run update.
func (s *Stream) finish(h client.WorkflowUpdateHandle) {
	var tr TurnResult
	if err := h.Get(s.ctx, &tr); err != nil {
		s.res, s.err = &core.Result{Thread: s.thread}, clientError("stream", err)
		return
	}
	s.res, s.err = result(s.thread, &tr)
}

// finishGone ends a stream whose turn's events were dropped (the workflow
// continued as new): the rest of the answer's text, then the end.
func (s *Stream) finishGone(h client.WorkflowUpdateHandle, text map[string]int, yield func(core.Event, error) bool) {
	s.finish(h)
	if s.res != nil && s.res.Text != "" {
		n := 0
		for _, m := range text {
			n = max(n, m)
		}
		if n < len(s.res.Text) && !yield(core.Event{Kind: core.EventTextDelta, Text: s.res.Text[n:]}, nil) {
			return
		}
		if !yield(core.Event{Kind: core.EventTextDone, Text: s.res.Text}, nil) {
			return
		}
	}
	yield(core.Event{Kind: core.EventRunFinished, Thread: s.thread, Err: s.err}, s.err)
}

// Text returns the pieces of the model's text, in order.
func (s *Stream) Text() iter.Seq[string] {
	return func(yield func(string) bool) {
		for ev := range s.Events() {
			if ev.Kind == core.EventTextDelta && !yield(ev.Text) {
				return
			}
		}
	}
}

// Result returns the turn's result and error, as [Runner.Run] does.
// Called before the events were read, it runs the turn, discarding them.
func (s *Stream) Result() (*core.Result, error) {
	if !s.ranged {
		for range s.Events() {
		}
	}
	return s.res, s.err
}

// core returns the event as package core has it.
func (e *Event) core() core.Event {
	ev := core.Event{Kind: e.Kind, Thread: e.Thread, Turn: e.Turn, Step: e.Step, Call: e.Call, Calls: e.Calls, Outcome: e.Outcome,
		Result: e.Result, Item: e.Item, Text: e.Text, Usage: e.Usage, Remaining: e.Remaining}
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

var _ = driver.TextDelta
