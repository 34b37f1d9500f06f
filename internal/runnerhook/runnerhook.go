// Package runnerhook lets toolrelay's own packages attach to a core.Runner
// what they open for it alone (the journal package adapter opens from
// configuration), without a field for it in core's public options.
package runnerhook

import "io"

// OnClose, set by package core, makes the Close method of r (a
// *core.Runner) close c after the runner's backend.
var OnClose func(r any, c io.Closer)

// NewStream, set by package core, returns a *core.Stream whose run is run,
// a func(yield func(core.Event, error) bool) (*core.Result, error). Use it
// through package internal/corestream, which gives it those types.
var NewStream func(thread string, run any) any
