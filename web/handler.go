package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/defaults"
	"github.com/toolrelay/toolrelay/internal/inflight"
	"github.com/toolrelay/toolrelay/internal/usertext"
)

// Defaults of [Options].
const (
	DefaultMaxBodyBytes    = 1 << 20 // 1 MiB
	DefaultMaxInputBytes   = 32 << 10
	DefaultMaxParts        = 8
	DefaultMaxInFlight     = 4
	DefaultMaxShownBytes   = 64 << 10
	DefaultMaxMessageBytes = 1 << 20
	DefaultReconnectWindow = 10 * time.Second
	DefaultKeepAlive       = 15 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
)

// Options configure a [Handler]. Identity is required; the rest may be
// left zero for the defaults.
type Options struct {
	// Identity names the caller of a request: the user the program
	// authenticated (by its session cookie, its proxy's header, …). The
	// handler authenticates nothing itself. A request whose identity is
	// empty, or whose Identity returns an error, is refused (401) before
	// its body is read. Each chat belongs to the identity that created
	// it: another identity is told it does not exist (404). Identity
	// also names who decided an approval (core.Decision.Actor).
	Identity func(*http.Request) (string, error)
	// TrustedOrigins are origins ("https://app.example.com") whose pages
	// may POST to the handler from another origin. Cross-origin requests
	// from browsers are refused (403) otherwise (see
	// http.CrossOriginProtection); requests that are not from a browser
	// (no Origin or Sec-Fetch-Site header) are not affected.
	TrustedOrigins []string
	// MaxBodyBytes bounds a request's body (413 past it). Zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInputBytes bounds the text of the user's message and of an
	// approval's reason (413 past it). Zero means DefaultMaxInputBytes.
	MaxInputBytes int
	// MaxParts bounds the parts (text and files) of the user's message
	// (400 past it). Zero means DefaultMaxParts.
	MaxParts int
	// MaxInFlight bounds the requests of one identity being served at
	// once, streams included (429 past it). Zero means
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxShownBytes bounds a call's input, output or error as the page
	// is shown it (cut short past it, saying so; the model gets the
	// whole). Zero means DefaultMaxShownBytes.
	MaxShownBytes int
	// MaxMessageBytes bounds the chunks of one assistant message, which
	// the handler keeps while it is written, to replay them to a page
	// that reconnects: past it, the run stops with an error. Zero means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// ReconnectWindow is how long an answer goes on after the last page
	// reading it went away (a reload, a dropped connection) before its
	// run stops, as breaking out of core.Stream does; the next request
	// on the chat resumes it. It is also how long a finished answer is
	// kept for a page that reconnects as it finishes. Zero means
	// DefaultReconnectWindow; a negative window stops a run as soon as
	// its last reader goes.
	ReconnectWindow time.Duration
	// KeepAlive is how often a quiet stream gets a comment line, so that
	// proxies keep it open. Zero means DefaultKeepAlive.
	KeepAlive time.Duration
	// WriteTimeout bounds each write to a page; a page that reads slower
	// is dropped (the answer goes on, for it to reconnect). Zero means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// RunOptions, if set, returns the options of each run (its time
	// limit, step limit, format); the handler sets their Thread and
	// Parts.
	RunOptions func(*http.Request) *core.RunOptions
	// ErrorText returns the text a page is shown for a run that failed.
	// It must hold nothing internal: nil means a message by the error's
	// code, such as "The agent's service is unavailable. Try again
	// later. (unavailable)".
	ErrorText func(error) string
	// Logger receives what the page is not told: the errors behind
	// failed runs and requests. Nil means slog.Default().
	Logger *slog.Logger
}

// A Runner runs the chats' turns: a *core.Runner, a *temporal.Runner, or
// any runner with their methods, as [core.Runner] documents them. One
// whose run options carry Held and NoWait (core.RunOptions) as core's
// does lets a chat be answered by one process at a time; its Journal, if
// it has one (a Journal() journaldriver.Journal method, and Backend()
// for the notes' name space), keeps the chats' records; else the runner
// itself, if it keeps notes ([journaldriver.Notes], as temporal.Runner
// does in Temporal).
type Runner interface {
	// Stream starts a run of input, streamed.
	Stream(ctx context.Context, input string, opts *core.RunOptions) *core.Stream
	// ResumeStream resumes, streamed, the run left on thread.
	ResumeStream(ctx context.Context, thread string, opts *core.RunOptions) *core.Stream
	// Approvals lists the approvals of thread's calls, awaiting a
	// decision or decided.
	Approvals(ctx context.Context, thread string) ([]core.Approval, error)
	// Decide records a decision about a call awaiting one.
	Decide(ctx context.Context, thread, callID string, d core.Decision) error
}

var _ Runner = (*core.Runner)(nil)

// handler serves a runner's chats; see [Handler].
type handler struct {
	r     Runner
	opts  Options
	store store
	cop   *http.CrossOriginProtection

	mu       sync.Mutex
	chats    map[string]*chat
	inFlight inflight.Limits // per identity

	// turns counts the runs in progress, for tests.
	turns sync.WaitGroup
	// newID makes messages' ids.
	newID func() string
}

// Handler returns an http.Handler that serves the chats of runner to
// pages using the AI SDK's chat client (npm ai 7.x: useChat, Chat,
// DefaultChatTransport), in its UI message stream protocol. Mount it at
// the transport's api path, and at the same path with a slash for the
// client's reconnections (GET {api}/{chat id}/stream):
//
//	h := web.Handler(runner, &web.Options{Identity: userOf})
//	mux.Handle("/api/chat", h)
//	mux.Handle("/api/chat/", h)
//
// A POST carries the chat's newest message: the user's (the run's input;
// only it is sent to the service, which keeps the conversation), or the
// assistant's with answered approvals (each becomes [core.Runner.Decide],
// by the request's identity, and the run resumes). The response is the
// run's events as UI message chunks. A GET of {api}/{id}/stream replays
// the answer being written, from its start, and follows it to its end
// (204 when none is).
//
// Each chat's thread is kept in the runner's journal ([journaldriver.Notes]),
// so that any process sharing the journal serves the chat's next
// message; temporal.Runner keeps it in Temporal (its notes), so that any
// process whose runner has the same task queue does; a runner with
// neither, or a journal that keeps no notes, keeps it in this process.
//
// Handler panics if opts or opts.Identity is nil.
func Handler(runner Runner, opts *Options) http.Handler {
	if opts == nil || opts.Identity == nil {
		panic("web: Handler needs Options.Identity")
	}
	h := &handler{r: runner, opts: *opts, chats: map[string]*chat{}, newID: newID}
	o := &h.opts
	defaults.Positive(&o.MaxBodyBytes, DefaultMaxBodyBytes)
	defaults.Positive(&o.MaxInputBytes, DefaultMaxInputBytes)
	defaults.Positive(&o.MaxParts, DefaultMaxParts)
	defaults.Positive(&o.MaxInFlight, DefaultMaxInFlight)
	defaults.Positive(&o.MaxShownBytes, DefaultMaxShownBytes)
	defaults.Positive(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	if o.ReconnectWindow == 0 {
		o.ReconnectWindow = DefaultReconnectWindow
	}
	defaults.Positive(&o.KeepAlive, DefaultKeepAlive)
	defaults.Positive(&o.WriteTimeout, DefaultWriteTimeout)
	if o.ErrorText == nil {
		o.ErrorText = usertext.Of
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h.cop = http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := h.cop.AddTrustedOrigin(origin); err != nil {
			panic("web: Options.TrustedOrigins: " + err.Error())
		}
	}
	h.store = newStore(runner)
	return h
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var chatID string
	switch {
	case r.Method == http.MethodPost:
		if err := h.cop.Check(r); err != nil {
			h.fail(w, r, refuse(http.StatusForbidden, "cross-origin request refused"))
			return
		}
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/stream"):
		if h.crossSite(r) {
			h.fail(w, r, refuse(http.StatusForbidden, "cross-origin request refused"))
			return
		}
		// {api}/{id}/stream, the id escaped (encodeURIComponent).
		p := strings.TrimSuffix(r.URL.EscapedPath(), "/stream")
		id, err := url.PathUnescape(p[strings.LastIndexByte(p, '/')+1:])
		if err != nil {
			id = ""
		}
		chatID = id
	default:
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, r, refuse(http.StatusMethodNotAllowed, "method not allowed"))
		return
	}
	who, err := h.opts.Identity(r)
	if err != nil || who == "" {
		if err != nil {
			h.opts.Logger.InfoContext(r.Context(), "web: no identity", "error", err)
		}
		h.fail(w, r, refuse(http.StatusUnauthorized, "not signed in"))
		return
	}
	if !h.inFlight.Enter(who, h.opts.MaxInFlight) {
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, refuse(http.StatusTooManyRequests, "too many requests at once"))
		return
	}
	defer h.inFlight.Leave(who)
	if r.Method == http.MethodPost {
		h.post(w, r, who)
	} else {
		h.reconnect(w, r, who, chatID)
	}
}

// crossSite reports whether a GET comes from another site's page (one
// whose origin is not trusted).
func (h *handler) crossSite(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") != "cross-site" {
		return false
	}
	origin := r.Header.Get("Origin")
	for _, o := range h.opts.TrustedOrigins {
		if origin == o {
			return false
		}
	}
	return true
}

// fail answers a request that cannot be served: a requestError with its
// status and message, anything else 500 with a safe message (the error
// goes to the log).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	re, ok := errors.AsType[*requestError](err)
	if !ok {
		h.opts.Logger.WarnContext(r.Context(), "web: request failed", "error", err)
		re = &requestError{status: http.StatusInternalServerError, msg: "the chat could not be served"}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(re.status)
	w.Write([]byte(re.msg))
}

// runOptions returns the options of a run for request r on thread.
func (h *handler) runOptions(r *http.Request, thread string, parts []core.Part) *core.RunOptions {
	var ro core.RunOptions
	if h.opts.RunOptions != nil {
		if o := h.opts.RunOptions(r); o != nil {
			ro = *o
		}
	}
	ro.Thread, ro.Parts = thread, parts
	return &ro
}

// detachedContext returns a context for a run that outlives request r:
// its values, not its cancellation.
func detachedContext(r *http.Request) context.Context {
	return context.WithoutCancel(r.Context())
}
