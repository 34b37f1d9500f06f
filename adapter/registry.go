package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/runnerhook"
	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/replay"
)

// OpenRequest is what an [Opener] gets to open its backend.
type OpenRequest struct {
	// Settings holds the shared settings in effect (after [Load]).
	Settings *Settings
	// Tools are the program's tools, for backends that define them on the
	// service (an agent made from the toolbox), with those the
	// configuration names (see [ToolSource]); never nil.
	Tools *core.Toolbox
	// Logger is the program's logger; never nil.
	Logger *slog.Logger

	wrap func(http.RoundTripper) http.RoundTripper // Options.WrapTransport

	file *file // the configuration file's sections
	code []any // Options.BackendSettings
}

// BackendSettings fills s, a pointer to a backend's settings struct, for the
// backend whose file section is named section. The struct's fields carry
// a json tag (their key in the section) and an env tag (their environment
// variable), as [Settings]'s do, and optionally a min tag (see the package
// doc). s is filled from the file's section, then the environment, then a
// value of the same type in Options.BackendSettings (its non-zero fields), and
// checked. Errors are as [Load]'s: InvalidArgument, naming the key or
// variable and never its value.
func (r *OpenRequest) BackendSettings(section string, s any) error {
	v := reflect.ValueOf(s)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("adapter: BackendSettings of a %T, not a pointer to a struct", s))
	}
	if r.file != nil {
		if b, ok := r.file.section(section); ok {
			if err := decodeStrict("adapter: config file "+r.file.path+": "+section, b, s); err != nil {
				return err
			}
		}
	}
	if err := fromEnv(v.Elem()); err != nil {
		return err
	}
	for _, c := range r.code {
		cv := reflect.ValueOf(c)
		if cv.Kind() == reflect.Pointer && !cv.IsNil() {
			cv = cv.Elem()
		}
		if cv.Type() == v.Elem().Type() {
			overlay(v.Elem(), cv)
		}
	}
	return checkRanges(v.Elem(), section+".")
}

// Client returns the HTTP client a backend should send its requests with,
// given the one it would use (nil for the SDK's default): base, or, when
// the program set Options.WrapTransport, a copy of base (of
// http.DefaultClient when nil) whose transport is wrapped. It returns nil
// when base is nil and nothing wraps.
func (r *OpenRequest) Client(base *http.Client) *http.Client {
	if r.wrap == nil {
		return base
	}
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	t := c.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	c.Transport = r.wrap(t)
	return c
}

// An Opener opens a backend. req is never nil.
type Opener func(ctx context.Context, req *OpenRequest) (driver.Backend, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Opener{}
)

// builtin names the package that registers each built-in backend, for the
// error that says which import a program lacks.
var builtin = map[string]string{
	"openai":         "github.com/toolrelay/toolrelay/openai",
	"foundry":        "github.com/toolrelay/toolrelay/foundry",
	"responses":      "github.com/toolrelay/toolrelay/responses",
	"fake-openai":    "github.com/toolrelay/toolrelay/openai/openaitest",
	"fake-foundry":   "github.com/toolrelay/toolrelay/foundry/foundrytest",
	"fake-responses": "github.com/toolrelay/toolrelay/foundry/foundrytest",
}

// Register makes a backend available by name. A backend package calls it
// from an init function, so that a program selects the backend by
// importing its package, as with database/sql's drivers. It panics if name
// is empty or already registered, or if open is nil.
func Register(name string, open Opener) {
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
	return slices.Sorted(func(yield func(string) bool) {
		for n := range registry {
			if !yield(n) {
				return
			}
		}
	})
}

// Options configure [Open]. nil is usable.
type Options struct {
	// Settings holds shared settings made in code; they win over the
	// environment and the configuration file.
	Settings Settings
	// DefaultBackend is opened when no backend is configured anywhere.
	DefaultBackend string
	// BackendSettings holds backend settings made in code, such as an
	// *openai.Settings or a coretest.FakeSettings: each backend reads the
	// value of its own settings type, whose non-zero fields win over the
	// environment and the file.
	BackendSettings []any
	// Runner is the base of the runner's options; the configuration's
	// settings of core's (the fields of Settings with a runner tag:
	// MaxSteps, Concurrency, ToolTimeout, RunTimeout, MaxArgumentBytes,
	// MaxOutputBytes, TruncateOutput, JournalLease and the budget's,
	// MaxInputTokens, MaxOutputTokens, MaxTotalTokens, MaxToolCalls,
	// MaxCost and Prices, in Runner.Budget) override it when set. Its
	// Journal, if set, wins over the configured journal.
	Runner core.Options
	// WrapTransport, if set, wraps the HTTP transport of the backend's
	// requests (for tracing them: telemetry.Transport); every backend,
	// the fakes' included, applies it (see [OpenRequest.Client]).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Open loads the configuration (see [Load]), opens the configured journal
// (unless opts.Runner.Journal is set) and backend, and returns a runner
// over them with tools. The caller must Close the runner, which closes the
// backend and the journal Open opened. opts may be nil.
//
// A backend that is not registered fails with code InvalidArgument, or,
// for a built-in backend whose package the program does not import, with
// code Unimplemented and an error naming the import to add. A budget
// that fails core.Budget.Check, in the settings or in
// opts.Runner.Budget, fails with code InvalidArgument, opening nothing.
func Open(ctx context.Context, tools *core.Toolbox, opts *Options) (*core.Runner, error) {
	req, err := NewRequest(tools, opts)
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg := req.Settings
	if cfg.Backend == "" {
		cfg.Backend = o.DefaultBackend
	}
	regMu.RLock()
	open := registry[cfg.Backend]
	regMu.RUnlock()
	if open == nil {
		return nil, notRegistered(cfg.Backend)
	}
	ro := runnerOptions(cfg, o.Runner)
	if err := ro.Budget.Check(); err != nil {
		// Options.Runner.Budget: the settings' values were checked by Load.
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: open", Err: fmt.Errorf("Options.Runner.Budget: %w", err)}
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
	if cfg.Replay != "" {
		tape, err := replay.Open(cfg.Replay, nil)
		if err != nil {
			opened.Close()
			return nil, err
		}
		req.wrap = replayWrap(tape, o.WrapTransport)
		opened = append(opened, tape) // closed last: it writes what the backend sent
	}
	added, err := addTools(ctx, req)
	if err != nil {
		opened.Close()
		return nil, err
	}
	opened = append(added, opened...) // the tools' servers close before the journal
	b, err := open(ctx, req)
	if err != nil {
		opened.Close()
		return nil, err
	}
	r := core.NewRunner(b, req.Tools, &ro)
	if len(opened) > 0 {
		runnerhook.OnClose(r, opened)
	}
	return r, nil
}

// replayWrap returns the transport wrapper of a backend whose traffic
// goes through tape: the program's own wrapper (Options.WrapTransport, a
// tracer perhaps), if any, over the cassette, so that a replayed request
// is traced as a live one.
func replayWrap(tape *replay.Cassette, wrap func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		rt = tape.Wrap(rt)
		if wrap != nil {
			rt = wrap(rt)
		}
		return rt
	}
}

// notRegistered returns the error of opening the unregistered backend name.
func notRegistered(name string) error {
	known := strings.Join(Backends(), ", ")
	switch pkg, ok := builtin[name]; {
	case name == "":
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: open", Err: fmt.Errorf("no backend configured: set TOOLRELAY_BACKEND (registered: %s)", known)}
	case ok:
		return &errcode.Error{Code: errcode.Unimplemented, Op: "adapter: open", Err: fmt.Errorf("backend %q is not linked into this program: import _ %q (or github.com/toolrelay/toolrelay/all)", name, pkg)}
	}
	return &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: open", Err: fmt.Errorf("unknown backend %q (registered: %s)", name, known)}
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

// NewRequest returns the request Open would give the configured backend's
// opener, without opening anything: backend authors use it to test how
// their settings are read.
func NewRequest(tools *core.Toolbox, opts *Options) (*OpenRequest, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, f, err := load(&o.Settings)
	if err != nil {
		return nil, err
	}
	logger := o.Runner.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if tools == nil {
		tools = &core.Toolbox{}
	}
	return &OpenRequest{Settings: cfg, Tools: tools, Logger: logger, file: f, code: o.BackendSettings, wrap: o.WrapTransport}, nil
}
