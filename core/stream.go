package core

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/toolrelay/toolrelay/internal/runnerhook"
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
// Streams too: temporal.Runner's are.
type Stream struct {
	run    func(yield func(Event, error) bool) (*Result, error) // see newStream
	thread string

	ranged bool
	res    *Result
	err    error
}

// newStream returns a Stream whose run is run: core's Runner makes its
// streams with it, and so may another runner (temporal.Runner does,
// through package internal/corestream). run is called once, when the
// events are first read (or by [Stream.Result]): it yields the run's
// events in order, the last EventRunFinished with the run's error,
// returns as soon as yield returns false, and returns the run's Result
// and error. thread is the run's thread, if it is known before the run
// (see [Stream.Thread]).
func newStream(thread string, run func(yield func(Event, error) bool) (*Result, error)) *Stream {
	return &Stream{run: run, thread: thread}
}

func init() {
	runnerhook.NewStream = func(thread string, run any) any {
		return newStream(thread, run.(func(yield func(Event, error) bool) (*Result, error)))
	}
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
