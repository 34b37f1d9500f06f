package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/runnerhook"
	"github.com/toolrelay/toolrelay/journal"
)

// OpenRequest is what an [Opener] gets to open its backend.
type OpenRequest struct {
	// Config is the configuration in effect (after [Load]).
	Config *Config
	// Tools are the program's tools, for backends that define them on the
	// service (an agent made from the toolbox).
	Tools *core.Toolbox
	// Script is what the model of a fake backend plays; real backends
	// ignore it.
	Script *coretest.Script
	// Logger is the program's logger; never nil.
	Logger *slog.Logger
}

// An Opener opens a backend. req is never nil.
type Opener func(ctx context.Context, req *OpenRequest) (driver.Backend, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Opener{}
)

// reserved names the built-in backends; only this package registers them.
var reserved = []string{"openai", "foundry", "responses", "fake-openai", "fake-foundry"}

// Register makes a backend available by name, for third-party backends
// (call it from an init function of your package). It panics if name is
// empty, already registered, reserved for a built-in backend, or if open is
// nil.
func Register(name string, open Opener) {
	if slices.Contains(reserved, name) {
		panic(fmt.Sprintf("adapter: backend name %q is reserved", name))
	}
	register(name, open)
}

func register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if name == "" || open == nil {
		panic("adapter: Register with an empty name or a nil opener")
	}
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("adapter: backend %q registered twice", name))
	}
	registry[name] = open
}

// Backends returns the names of the registered backends, sorted.
func Backends() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// OpenBackend opens the backend registered as name. req may be nil.
func OpenBackend(ctx context.Context, name string, req *OpenRequest) (driver.Backend, error) {
	regMu.RLock()
	open := registry[name]
	regMu.RUnlock()
	if open == nil {
		known := strings.Join(Backends(), ", ")
		if slices.Contains(reserved, name) {
			return nil, &errcode.Error{Code: errcode.Unimplemented, Op: "adapter: open", Err: fmt.Errorf("backend %q is not available in this build (available: %s)", name, known)}
		}
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: open", Err: fmt.Errorf("unknown backend %q (known: %s)", name, known)}
	}
	r := OpenRequest{}
	if req != nil {
		r = *req
	}
	if r.Config == nil {
		r.Config = &Config{}
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	return open(ctx, &r)
}

// Options configure [Open]. nil is usable.
type Options struct {
	// Config holds settings made in code; they win over the environment
	// and the configuration file.
	Config Config
	// DefaultBackend is opened when no backend is configured anywhere.
	DefaultBackend string
	// Script is what the model of a fake backend plays.
	Script *coretest.Script
	// Runner is the base of the runner's options; the configuration's
	// MaxSteps, Concurrency, ToolTimeout, RunTimeout, MaxArgumentBytes,
	// MaxOutputBytes, TruncateOutput and JournalLease override it when
	// set. Its Journal, if set, wins over the configured journal.
	Runner core.Options
}

// Open loads the configuration (see [Load]), opens the configured journal
// (unless opts.Runner.Journal is set) and backend, and returns a runner
// over them with tools. The caller must Close the runner, which closes the
// backend and the journal Open opened. opts may be nil.
func Open(ctx context.Context, tools *core.Toolbox, opts *Options) (*core.Runner, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := Load(&o.Config)
	if err != nil {
		return nil, err
	}
	if cfg.Backend == "" {
		cfg.Backend = o.DefaultBackend
	}
	if cfg.Backend == "" {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: open", Err: fmt.Errorf("no backend configured: set TOOLRELAY_BACKEND (known: %s)", strings.Join(Backends(), ", "))}
	}
	ro := o.Runner
	if cfg.MaxSteps > 0 {
		ro.MaxSteps = cfg.MaxSteps
	}
	if cfg.Concurrency > 0 {
		ro.Concurrency = cfg.Concurrency
	}
	if cfg.ToolTimeout > 0 {
		ro.ToolTimeout = time.Duration(cfg.ToolTimeout)
	}
	if cfg.RunTimeout > 0 {
		ro.RunTimeout = time.Duration(cfg.RunTimeout)
	}
	if cfg.MaxArgumentBytes > 0 {
		ro.MaxArgumentBytes = cfg.MaxArgumentBytes
	}
	if cfg.MaxOutputBytes > 0 {
		ro.MaxOutputBytes = cfg.MaxOutputBytes
	}
	if cfg.TruncateOutput {
		ro.TruncateOutput = true
	}
	if cfg.JournalLease > 0 {
		ro.Lease = time.Duration(cfg.JournalLease)
	}
	var opened closers // what Open opens for the runner, to close with it
	if ro.Journal == nil && cfg.Journal != "" {
		store, err := journal.Open(ctx, cfg.Journal)
		if err != nil {
			return nil, err
		}
		ro.Journal = store
		if cfg.JournalRetention > 0 {
			opened = append(opened, journal.StartPruning(store, time.Duration(cfg.JournalRetention), ro.Logger))
		}
		opened = append(opened, store)
	}
	b, err := OpenBackend(ctx, cfg.Backend, &OpenRequest{Config: cfg, Tools: tools, Script: o.Script, Logger: ro.Logger})
	if err != nil {
		opened.Close()
		return nil, err
	}
	r := core.NewRunner(b, tools, &ro)
	if len(opened) > 0 {
		runnerhook.OnClose(r, opened)
	}
	return r, nil
}

// closers closes each of its non-nil closers, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
