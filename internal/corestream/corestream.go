// Package corestream makes a core.Stream from a run, for the runners of
// toolrelay's other packages that speak core's vocabulary (temporal.Runner
// returns each streamed turn as a core.Stream) and for tests that fake a
// runner. An application does not make Streams: it reads those a runner
// returns.
package corestream

import (
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/runnerhook"
)

// New returns a Stream whose run is run, as core's Runner makes its
// streams. run is called once, when the events are first read (or by
// [core.Stream.Result]): it yields the run's events in order, the last
// EventRunFinished with the run's error, returns as soon as yield returns
// false, and returns the run's Result and error. thread is the run's
// thread, if it is known before the run (see [core.Stream.Thread]).
func New(thread string, run func(yield func(core.Event, error) bool) (*core.Result, error)) *core.Stream {
	return runnerhook.NewStream(thread, run).(*core.Stream)
}
