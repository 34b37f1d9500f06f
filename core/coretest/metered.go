package coretest

import (
	"context"

	"github.com/toolrelay/toolrelay/core/driver"
)

// Metered is a Backend whose every step reports Usage, made by Model (a
// step given again by Resume included), as a service reports a response's
// usage: for tests of what a run counts and spends (core.Budget).
type Metered struct {
	*Backend
	// Model is the steps' model (driver.Step.Model).
	Model string
	// Usage is each step's usage.
	Usage driver.Usage
}

// meter gives s the usage and the model of m.
func (m Metered) meter(s *driver.Step, err error) (*driver.Step, error) {
	if s != nil {
		s.Usage, s.Model = m.Usage, m.Model
	}
	return s, err
}

// Start implements [driver.Backend].
func (m Metered) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return m.meter(m.Backend.Start(ctx, req))
}

// Submit implements [driver.Backend].
func (m Metered) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	return m.meter(m.Backend.Submit(ctx, req))
}

// Resume implements [driver.Backend].
func (m Metered) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return m.meter(m.Backend.Resume(ctx, thread))
}
