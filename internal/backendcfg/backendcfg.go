// Package backendcfg holds what the built-in backends (openai, foundry,
// responses) share in reading their configuration through package
// adapter: their registration, and the service limits every backend takes
// from the shared settings. Each backend still reads its own section
// (adapter.OpenRequest.BackendSettings) into its own Settings type, whose
// refusals name the key or variable and never its value.
package backendcfg

import (
	"context"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
)

// Register registers the backend name with package adapter (see
// adapter.Register): its opener reads the backend's options from the
// request with optionsFor and opens the backend with open, over the
// request's tools. It panics as adapter.Register does.
func Register[O any, B driver.Backend](name string, optionsFor func(*adapter.OpenRequest) (*O, error), open func(context.Context, *core.Toolbox, *O) (B, error)) {
	adapter.Register(name, func(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
		o, err := optionsFor(req)
		if err != nil {
			return nil, err
		}
		return open(ctx, req.Tools, o)
	})
}

// Limits returns the bounds of what a backend reads from its service, as
// the shared settings s give them (adapter.Settings' MaxResponseBytes,
// MaxEventBytes, IdleTimeout and MaxSilence), in the types of the
// backends' options: zero means the backend's default, negative no limit.
func Limits(s *adapter.Settings) (maxResponseBytes, maxEventBytes int, idleTimeout, maxSilence time.Duration) {
	return s.MaxResponseBytes, s.MaxEventBytes, time.Duration(s.IdleTimeout), time.Duration(s.MaxSilence)
}
