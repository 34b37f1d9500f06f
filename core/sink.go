package core

import (
	"context"
	"errors"

	"github.com/toolrelay/toolrelay/core/driver"
)

// A sink takes a streamed run's events to its reader, in the goroutine
// that ranges over them. The events of calls running in other goroutines
// go through an async view of the sink (see runCalls), which that
// goroutine drains.
type sink struct {
	yield   func(Event, error) bool
	stop    context.CancelCauseFunc
	stopped bool
	// items holds, for each message of the run, how many bytes of its
	// text were delivered; -1 once it is done.
	items map[string]int
	// texts counts the messages done, commentary excepted.
	texts int
	// pending is an event to deliver before the next delta, or else when
	// flushPending is called.
	pending *Event

	ch chan Event // of an async view: where its events go
}

// bind returns the run's context, canceled when the reader stops, with the
// sink's observer for the backend.
func (s *sink) bind(ctx context.Context) context.Context {
	ctx, s.stop = context.WithCancelCause(ctx)
	return driver.WithObserver(ctx, s.observe)
}

func (s *sink) unbind() { s.stop(nil) }

// async returns a view of the sink for the n calls of a step running in
// their own goroutines; each call's events (at most three: in doubt,
// started, finished) fit in its buffer, so a call never waits for the
// reader. It returns nil for a nil sink.
func (s *sink) async(n int) *sink {
	if s == nil {
		return nil
	}
	return &sink{ch: make(chan Event, 3*n)}
}

// events returns an async view's channel (nil for nil, which blocks).
func (s *sink) events() <-chan Event {
	if s == nil {
		return nil
	}
	return s.ch
}

// flush delivers what is left in an async view.
func (s *sink) flush(view *sink) {
	if view == nil {
		return
	}
	for {
		select {
		case e := <-view.ch:
			s.deliver(&e)
		default:
			return
		}
	}
}

// put hands e to the reader (or, for an async view, to its channel).
func (s *sink) put(e *Event) {
	if s.ch != nil {
		s.ch <- *e
		return
	}
	s.deliver(e)
}

// deliver yields e, unless the reader stopped; when the reader stops, the
// run is canceled.
func (s *sink) deliver(e *Event) {
	if s.stopped {
		return
	}
	var err error
	if e.Kind == EventRunFinished && !errors.Is(e.Err, ErrAwaitingApproval) {
		// A pause is no failure: Result reports it, once.
		err = e.Err
	}
	if !s.yield(*e, err) {
		s.stopped = true
		s.stop(ErrStreamStopped)
	}
}

// observe is the backend's [driver.Observer]: it delivers the text of each
// message once, completing on TextDone what the pieces left out.
func (s *sink) observe(d driver.Delta) error {
	s.flushPending()
	if s.stopped {
		return ErrStreamStopped
	}
	switch d.Kind {
	case driver.TextDelta:
		if s.items == nil {
			s.items = map[string]int{}
		}
		n := s.items[d.Item]
		if n < 0 || d.Text == "" {
			return nil
		}
		s.items[d.Item] = n + len(d.Text)
		s.deliver(&Event{Kind: EventTextDelta, Item: d.Item, Text: d.Text, Commentary: d.Commentary})
	case driver.TextDone:
		n := s.items[d.Item]
		if n < 0 {
			return nil // a repeat
		}
		if s.items == nil {
			s.items = map[string]int{}
		}
		s.items[d.Item] = -1
		s.done(d.Item, d.Text, n, d.Commentary)
	case driver.ReasoningDelta:
		s.deliver(&Event{Kind: EventReasoningDelta, Item: d.Item, Text: d.Text})
	case driver.AgentActivity:
		s.deliver(&Event{Kind: EventAgentActivity, Item: d.Item, Text: d.Text, Agent: d.Agent, Activity: d.Activity})
	}
	if s.stopped {
		return ErrStreamStopped
	}
	return nil
}

// flushPending delivers the pending event, if any.
func (s *sink) flushPending() {
	if e := s.pending; e != nil {
		s.pending = nil
		s.deliver(e)
	}
}

// done delivers the end of a message of which n bytes were delivered,
// marked as commentary or not.
func (s *sink) done(item, text string, n int, commentary bool) {
	if !commentary {
		s.texts++
	}
	if n < len(text) {
		s.deliver(&Event{Kind: EventTextDelta, Item: item, Text: text[n:], Commentary: commentary})
	}
	s.deliver(&Event{Kind: EventTextDone, Item: item, Text: text, Commentary: commentary})
}

// stepArrived reports a step: its calls and usage, or, for the final
// answer of a backend that streamed no message of it (commentary aside),
// its text in one piece.
// steps counts the steps run so far.
func (s *sink) stepArrived(step *driver.Step, steps int) {
	for i := range step.Calls {
		s.deliver(&Event{Kind: EventToolCall, Thread: step.Thread, Turn: step.Turn, Step: steps + 1, Call: &step.Calls[i]})
	}
	if step.Usage != (Usage{}) {
		s.deliver(&Event{Kind: EventUsage, Thread: step.Thread, Turn: step.Turn, Step: steps, Usage: step.Usage})
	}
	if len(step.Calls) == 0 && s.texts == 0 && step.Text != "" {
		s.done("", step.Text, 0, false)
	}
}

// send emits e, and hands it to sk, if any.
func (r *Runner) send(ctx context.Context, sk *sink, e *Event) {
	r.emit(ctx, e)
	if sk != nil {
		sk.put(e)
	}
}

func (r *Runner) emit(ctx context.Context, e *Event) {
	e.log(ctx, r.opts.Logger, r.opts.LogCallErrors)
	handOn(r, e)
}

// handOn hands e to r's OnEvent, if it has one, one event at a time: for
// the runner's own events (emit) and the ones the agent tool relays from
// a child (a function, not a method: *Runner's method set is kept small,
// see internal/layering).
func handOn(r *Runner, e *Event) {
	if r.opts.OnEvent == nil {
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.opts.OnEvent(*e)
}
