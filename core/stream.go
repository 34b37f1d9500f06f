package core

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/toolrelay/toolrelay/core/driver"
)

// ErrStreamStopped is the cause of a streamed run that ended because its
// reader stopped ranging over its events. It matches context.Canceled.
var ErrStreamStopped = fmt.Errorf("core: the reader of the stream stopped: %w", context.Canceled)

var errRangedTwice = errors.New("core: a Stream's events can be read once")

// A Stream is a run whose events are read as they happen: the model's text
// as it is written, its calls as they arrive, each call as it starts and
// finishes, each step's results as they are sent. Range over [Stream.Events]
// (once); [Stream.Result] then returns what [Runner.Run] would have.
//
//	st := runner.Stream(ctx, "What's the weather?", nil)
//	for ev, err := range st.Events() {
//		if err != nil {
//			return err
//		}
//		if ev.Kind == core.EventTextDelta {
//			fmt.Print(ev.Text)
//		}
//	}
//
// The run happens while the loop runs, in the loop's goroutine: nothing
// runs before the loop starts, and a reader that is slow to take an event
// slows the reading of the service's stream, which is never buffered beyond
// one event; a reader that stops reading (without breaking out) holds the
// run, but not past its time limit (see [Options.RunTimeout]): a lease
// after it, another worker may take the run over. Breaking out of the
// loop ends the run as a canceled context
// would (its error matches [ErrStreamStopped] and context.Canceled): no
// handler starts after it, and the service's turn is left waiting, on
// every backend; the Result, with the thread, is kept: [Runner.Resume] (or
// ResumeStream) picks the turn up where it stopped, sending the results
// the journal kept, and [Runner.Cancel] abandons it.
//
// The text of each message arrives once and in order, also when the
// service's stream drops and the backend resumes it: the pieces
// (EventTextDelta) of a message concatenate to the text of its
// EventTextDone. A backend that does not stream gives each message in one
// piece.
//
// Other runners speaking core's vocabulary return their streamed runs as
// Streams too (see [NewStream]): temporal.Runner's are.
type Stream struct {
	run    func(yield func(Event, error) bool) (*Result, error) // see NewStream
	thread string

	ranged bool
	res    *Result
	err    error
}

// NewStream returns a Stream whose run is run: core's Runner makes its
// streams with it, and so may another runner (temporal.Runner does). run
// is called once, when the events are first read (or by
// [Stream.Result]): it yields the run's events in order, the last
// EventRunFinished with the run's error, returns as soon as yield returns
// false, and returns the run's Result and error. thread is the run's
// thread, if it is known before the run (see [Stream.Thread]).
func NewStream(thread string, run func(yield func(Event, error) bool) (*Result, error)) *Stream {
	return &Stream{run: run, thread: thread}
}

// Thread returns the thread of the stream's run: the one it continues or
// resumes, or whose name its runner chose before it started (a
// temporal.Runner's workflow id); for a run of core's Runner on a new
// thread, the service's thread once the events were read ("" before).
func (s *Stream) Thread() string {
	if s.thread == "" && s.res != nil {
		return s.res.Thread
	}
	return s.thread
}

// Stream starts a run as [Runner.Run] does, but streamed: the run takes
// place as the returned Stream's events are read.
func (r *Runner) Stream(ctx context.Context, input string, opts *RunOptions) *Stream {
	ro := r.runOptions(opts)
	return NewStream(ro.Thread, streamed(ctx, r, ro, start(input)))
}

// ResumeStream resumes the turn waiting on thread as [Runner.Resume] does,
// but streamed.
func (r *Runner) ResumeStream(ctx context.Context, thread string, opts *RunOptions) *Stream {
	return NewStream(thread, streamed(ctx, r, r.runOptions(opts), resume(thread)))
}

// streamed returns the run of a Stream of r from b: exec, its events
// going to the Stream's reader.
func streamed(ctx context.Context, r *Runner, ro RunOptions, b beginning) func(yield func(Event, error) bool) (*Result, error) {
	return func(yield func(Event, error) bool) (*Result, error) {
		return r.exec(ctx, ro, b, &sink{yield: yield})
	}
}

// Events returns the run's events, in the order they happen. The error is
// nil but on the last event, EventRunFinished, whose Err it repeats when
// the run failed. A run that paused for a person's decision did not fail:
// its events end without an error, and [Stream.Result] reports the pause
// (ErrAwaitingApproval, with the calls in Result.Pending), as Run does.
// The events can be ranged over once; another range yields only an
// error.
func (s *Stream) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if s.ranged {
			yield(Event{Kind: EventRunFinished, Err: errRangedTwice}, errRangedTwice)
			return
		}
		s.ranged = true
		s.res, s.err = s.run(yield)
	}
}

// Text returns the pieces of the model's text, in order, and nothing else
// (its commentary too: see [Event].Commentary); [Stream.Result] then tells
// how the run ended.
func (s *Stream) Text() iter.Seq[string] {
	return func(yield func(string) bool) {
		for ev := range s.Events() {
			if ev.Kind == EventTextDelta && !yield(ev.Text) {
				return
			}
		}
	}
}

// Result returns the run's result and error, as [Runner.Run] does. Called
// before the events were read, it runs the run, discarding them.
func (s *Stream) Result() (*Result, error) {
	if !s.ranged {
		for range s.Events() {
		}
	}
	return s.res, s.err
}

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
