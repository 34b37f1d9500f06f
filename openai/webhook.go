package openai

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/webhooks"

	"github.com/toolrelay/toolrelay/core"
	coredriver "github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/defaults"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Defaults of [WebhookOptions].
const (
	// DefaultWebhookTolerance bounds the age of a delivery's timestamp
	// (and how far ahead of the clock it may be), as openai-go's Unwrap
	// does by default.
	DefaultWebhookTolerance = 5 * time.Minute
	// DefaultMaxWebhookBytes bounds a delivery's body. A session event's
	// is a few hundred bytes.
	DefaultMaxWebhookBytes = 1 << 20
	// DefaultMaxResumes bounds the sessions a handler resumes at once.
	DefaultMaxResumes = 16
	// DefaultReplayWindow is how long a handler remembers, in memory, the
	// id of an event it took.
	DefaultReplayWindow = 24 * time.Hour
	// DefaultMaxReplayEvents bounds the event ids a handler remembers in
	// memory.
	DefaultMaxReplayEvents = 10000
	// DefaultWebhookLease is how long an event being handled is held, in
	// the journal, against the other processes sharing it.
	DefaultWebhookLease = time.Minute
	// DefaultWebhookBodyTimeout bounds the time a delivery's body takes to
	// arrive.
	DefaultWebhookBodyTimeout = 10 * time.Second
	// DefaultResumeRetryFor bounds how long a handler tries again a resume
	// that failed for a reason that may pass (see WebhookOptions.RetryFor).
	DefaultResumeRetryFor = 2 * time.Minute
	// DefaultResumeRetryWait is the first wait before a resume is tried
	// again; the wait doubles with each attempt, to maxResumeRetryWait.
	DefaultResumeRetryWait = time.Second
)

// maxResumeRetryWait bounds the wait between two attempts at a resume.
const maxResumeRetryWait = 30 * time.Second

// WebhookJournal is the backend name under which a [WebhookHandler]
// records, in its runner's journal, the events it took (an entry whose
// thread is the session, whose call is the event id). They are pruned
// with the calls' entries.
const WebhookJournal = "openai-webhook"

// WebhookOptions configure a [WebhookHandler]. nil is usable when
// OPENAI_WEBHOOK_SECRET holds the endpoint's signing secret.
type WebhookOptions struct {
	// Secret is the webhook endpoint's signing secret, "whsec_…" as the
	// platform shows it; empty means OPENAI_WEBHOOK_SECRET (as openai-go
	// reads it). It is used to verify deliveries and never appears in an
	// answer, an error or a log line.
	Secret string
	// Tolerance bounds how old (or how far ahead of the clock) a
	// delivery's timestamp may be; zero means DefaultWebhookTolerance.
	Tolerance time.Duration
	// MaxBodyBytes bounds a delivery's body; a larger one is answered 413.
	// Zero means DefaultMaxWebhookBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds the time a delivery's body takes to arrive, from
	// the handler's start (a read deadline on the connection, which
	// net/http's server allows, over HTTP/1 and HTTP/2): a body that
	// trickles in slower is answered 408 and its connection closed,
	// whatever the server's own timeouts. A ResponseWriter that allows no
	// deadline (a middleware's wrapper without an Unwrap method) leaves
	// the body to the server's ReadTimeout. Zero means
	// DefaultWebhookBodyTimeout.
	BodyTimeout time.Duration
	// MaxResumes bounds the sessions the handler resumes at once; a
	// delivery that would resume one more is answered 503 (Retry-After: 1),
	// and the service delivers it again later. Zero means
	// DefaultMaxResumes.
	MaxResumes int
	// ReplayWindow and MaxReplayEvents bound the event ids the handler
	// remembers in memory (see [WebhookHandler], Replays); zero means
	// DefaultReplayWindow and DefaultMaxReplayEvents.
	ReplayWindow    time.Duration
	MaxReplayEvents int
	// Lease is how long an event being handled is held, in the journal,
	// against the other processes sharing it: a delivery of the event to
	// another process meanwhile is answered 503, and one after the lease
	// passed (its handler died) is taken. Zero means DefaultWebhookLease.
	Lease time.Duration
	// RetryFor and RetryWait bound the attempts at a resume that fails
	// for a reason that may pass (the service unavailable, a 502, 503 or
	// 504: errcode.Unavailable; a 429; a network error): the handler tries
	// it again after RetryWait, the wait doubling with each attempt (to
	// 30 s at most, less a random part of up to half), until RetryFor has
	// passed since the first failure, or until Shutdown. A resume that
	// still fails is not recorded failed: its run is left in the journal
	// for a [core.Runner.TakeOver] of a worker sharing it (see Resumes).
	// Zero means DefaultResumeRetryFor and DefaultResumeRetryWait.
	RetryFor, RetryWait time.Duration
	// RunOptions are the options of each resume (nil: the runner's).
	// Thread, Parts and Format are ignored; HandOver is the handler's
	// (the failures it tries again).
	RunOptions *core.RunOptions
	// Accept, if set, says whether the handler handles the events of a
	// session: a webhook endpoint gets the events of every session of its
	// project, and by default the handler resumes each one that asks for
	// an action, running the calls it can and failing the others (a
	// function the toolbox lacks is an unknown tool). A program that
	// shares its project with others accepts only its own sessions.
	// An event not accepted is answered 200 and goes nowhere.
	Accept func(ctx context.Context, session string) bool
	// OnEvent, if set, is called with each verified event the first time
	// the handler takes it (a session's creation, idle or failure, an
	// action it asked for; any other event type of the project too), with
	// the delivery's context, before the handler answers: it should be
	// quick. A program starts or reconnects a self-hosted environment
	// there, when an agent.session.action_required names an
	// environment_connection. If it returns an error, the delivery is
	// answered 500 (the error is logged, not sent) and the event is
	// forgotten, so that the service's next delivery of it is taken again.
	OnEvent func(ctx context.Context, ev *webhooks.UnwrapWebhookEventUnion) error
	// OnResult, if set, is called when a resume the handler started ends,
	// with its result and error, as [core.Runner.Resume] returned them.
	// A resume of a turn that another resume finished returns that turn's
	// answer again: Result.Turn tells them apart.
	OnResult func(session string, res *core.Result, err error)
	// Logger receives the handler's messages (a delivery refused, a
	// resume's end); nil means slog.Default().
	Logger *slog.Logger
}

// WebhookHandler is an [http.Handler] for the webhooks of OpenAI Agents API
// sessions, which drives the runs of a [core.Runner] over this package's
// backend: on agent.session.action_required it resumes the session's run
// (as [core.Runner.Resume] does), in the process that received the
// webhook, so that no process needs to follow a session while it waits
// for results. Make one with [NewWebhookHandler]; give it to an
// [http.ServeMux] at the endpoint's URL.
//
// # Verification
//
// Only POST is served (405 otherwise). The body is read up to
// MaxBodyBytes (413 past it), within BodyTimeout (408 past it), and
// verified with openai-go's client.Webhooks.UnwrapWithTolerance: the
// webhook-signature header must be the endpoint secret's signature of the
// webhook-id, the webhook-timestamp and the body, and the timestamp within
// Tolerance of the clock. A delivery without those headers, with another
// signature, or stale, is answered 401, and nothing else happens; a
// verified body that is not an event, 400.
//
// # Replays
//
// The service delivers an event again until one delivery is answered 2xx,
// and a delivery may reach several processes of a fleet (or be replayed
// by someone who captured it, within the tolerance). A call's side effect
// happens once whatever the deliveries: a resume claims each call in the
// journal, and the run's record keeps the resumes of a session one at a
// time, across processes. What the handler adds is that an event is
// taken once, so that it does no work twice and OnEvent sees it once:
//
//   - In memory, the ids of the events it took (for ReplayWindow, at most
//     MaxReplayEvents of them): a delivery of one of them is answered 200
//     with nothing done, or 503 while the first is being handled (its
//     handling may yet fail).
//   - In the runner's journal, an entry per event (backend
//     [WebhookJournal], the session, the event id), claimed before the
//     event is handled and finished once it was: a delivery to another
//     process sharing the journal is answered 200 with nothing done once
//     the event was handled, 503 while it is being handled (within Lease);
//     past the lease (the process that took it died), it is taken over.
//     A journal write that fails is answered 503.
//
// # Resumes
//
// An agent.session.action_required (other than environment_connection,
// which toolrelay cannot answer: see [UnsupportedActionError]) starts a
// resume of the session in the background, and the delivery is answered
// 200 at once. The resume follows the turn as any run does (its stream,
// or polling: [Options].Delivery) until it ends or pauses for a decision,
// running the calls and sending their results; [core.Runner.Resume] takes
// the run's record first, so that a resume in another process waits for
// this one (and then finds the turn done, or the next step). A session has
// one resume at a time in a handler: an action that arrives while it runs
// makes it run once more after, at most. At most MaxResumes sessions are
// resumed at once; past that a delivery is answered 503 with Retry-After.
// OnResult gets each resume's end. agent.session.created, in_progress,
// idle and failed are acknowledged (OnEvent gets them), as are the
// project's other events.
//
// The service does not deliver again an event answered 200, so a resume
// that fails for a reason that may pass (a short outage of the service) is
// tried again, with backoff, for RetryFor (see RetryWait); the session
// keeps its place among MaxResumes meanwhile. A resume that still fails,
// or that Shutdown stops trying, is handed over
// ([core.RunOptions].HandOver): its run's record stays running in the
// runner's journal, its lease ended, so that a worker sharing the journal
// that calls [core.Runner.TakeOver] (or [core.Runner.KeepTakingOver], as
// a fleet should) goes on with it, as with the run of a worker that died;
// so does the session's next event. OnResult gets its error (the last
// attempt's).
//
// A resume started is not in the journal until the runner records its
// run (at once, unless another worker holds the session): a process that
// dies in between leaves the session waiting (the service does not deliver
// an event answered 200 again) until another event of the session, or a
// [core.Runner.Resume] on it. [WebhookHandler.Shutdown] waits for the
// resumes in flight.
type WebhookHandler struct {
	runner  *core.Runner
	svc     webhooks.WebhookService
	opts    WebhookOptions
	log     *slog.Logger
	journal journaldriver.Journal
	owner   string
	seen    *replaySet
	ro      core.RunOptions // each resume's

	life    context.Context // the resumes'; ended by Shutdown when it gives up waiting
	stop    context.CancelFunc
	closing chan struct{} // closed by Shutdown: no resume is tried again
	wg      sync.WaitGroup

	mu     sync.Mutex
	active map[string]*resuming // sessions being resumed
	cut    []string             // sessions whose resume Shutdown cut short
	closed bool
}

// resuming is a session being resumed by a handler.
type resuming struct {
	again bool // an action arrived meanwhile: resume once more
}

// NewWebhookHandler returns a handler of session webhooks that resumes the
// runs of runner, whose backend must be this package's (the sessions
// API): any other backend gives an error whose code is InvalidArgument,
// since Foundry and the Responses API send no session webhooks. opts may
// be nil. Without a secret (neither opts.Secret nor
// OPENAI_WEBHOOK_SECRET) it fails with FailedPrecondition, rather than
// accept unsigned deliveries; a secret openai-go cannot use (a "whsec_"
// secret that is not base64 of at least 24 bytes) gives InvalidArgument.
func NewWebhookHandler(runner *core.Runner, opts *WebhookOptions) (*WebhookHandler, error) {
	if runner == nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "openai: webhooks: no runner")
	}
	if _, ok := runner.Backend().(*Backend); !ok {
		return nil, errcode.Errorf(errcode.InvalidArgument, "openai: webhooks: the runner's backend is %q, not the OpenAI Agents API sessions backend (openai): "+
			"session webhooks come from the sessions API only (Foundry and the Responses API send none)", runner.Backend().Name())
	}
	h := &WebhookHandler{runner: runner, active: map[string]*resuming{}, journal: runner.Journal(), owner: "webhook-" + rand.Text()}
	if opts != nil {
		h.opts = *opts
	}
	o := &h.opts
	if o.Secret == "" {
		o.Secret = os.Getenv("OPENAI_WEBHOOK_SECRET")
	}
	if o.Secret == "" {
		return nil, errcode.Errorf(errcode.FailedPrecondition, "openai: webhooks: no signing secret: set WebhookOptions.Secret or OPENAI_WEBHOOK_SECRET "+
			"to the endpoint's secret (whsec_…); unsigned deliveries are never accepted")
	}
	h.svc = webhooks.NewWebhookService(option.WithWebhookSecret(o.Secret))
	// openai-go checks the secret before anything else: with no headers,
	// a usable one fails only for want of them.
	if err := h.svc.VerifySignature(nil, nil); err != nil && strings.Contains(err.Error(), "secret") {
		return nil, errcode.Errorf(errcode.InvalidArgument, "openai: webhooks: the signing secret cannot be used: %v", err)
	}
	defaults.Positive(&o.Tolerance, DefaultWebhookTolerance)
	defaults.Positive(&o.MaxBodyBytes, DefaultMaxWebhookBytes)
	defaults.Positive(&o.MaxResumes, DefaultMaxResumes)
	defaults.Positive(&o.ReplayWindow, DefaultReplayWindow)
	defaults.Positive(&o.MaxReplayEvents, DefaultMaxReplayEvents)
	defaults.Positive(&o.Lease, DefaultWebhookLease)
	defaults.Positive(&o.BodyTimeout, DefaultWebhookBodyTimeout)
	defaults.Positive(&o.RetryFor, DefaultResumeRetryFor)
	defaults.Positive(&o.RetryWait, DefaultResumeRetryWait)
	if o.RunOptions != nil {
		h.ro = *o.RunOptions
	}
	h.ro.HandOver = mayPass
	h.log = o.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	h.seen = newReplaySet(o.ReplayWindow, o.MaxReplayEvents)
	h.life, h.stop = context.WithCancel(context.Background())
	h.closing = make(chan struct{})
	return h, nil
}

// ServeHTTP implements [http.Handler]; see [WebhookHandler] for what each
// answer means.
func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, "a webhook is POSTed")
		return
	}
	body, status, msg := h.readBody(w, r)
	if status != 0 {
		answer(w, status, msg)
		return
	}
	ev, err := h.svc.UnwrapWithTolerance(body, r.Header, h.opts.Tolerance)
	switch {
	case err != nil && ev == nil:
		// openai-go's reasons name headers, the timestamp or the
		// signature, never the secret.
		h.log.WarnContext(r.Context(), "openai: webhook refused", "reason", err.Error(), "remote", r.RemoteAddr)
		answer(w, http.StatusUnauthorized, "webhook verification failed: "+err.Error())
		return
	case err != nil, ev.ID == "":
		answer(w, http.StatusBadRequest, "not a webhook event")
		return
	}
	status, msg = h.take(r.Context(), ev)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	answer(w, status, msg)
}

// readBody reads a delivery's body, up to MaxBodyBytes and within
// BodyTimeout (a read deadline, where the ResponseWriter allows one), or
// returns the delivery's answer.
func (h *WebhookHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	rc := http.NewResponseController(w)
	bounded := rc.SetReadDeadline(time.Now().Add(h.opts.BodyTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		if bounded {
			// The server's own read, watching for the client to leave
			// once the body is read, must not meet this deadline: it
			// would end the delivery's context while it is handled.
			rc.SetReadDeadline(time.Time{})
		}
		return body, 0, ""
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body passes %d bytes", h.opts.MaxBodyBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays: what is left of the body is not read.
		w.Header().Set("Connection", "close")
		return nil, http.StatusRequestTimeout, fmt.Sprintf("the body did not arrive within %v", h.opts.BodyTimeout)
	}
	return nil, http.StatusBadRequest, "the body could not be read"
}

// answer writes a short plain-text answer.
func answer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// take handles a verified event once (see Replays), and returns the
// delivery's answer.
func (h *WebhookHandler) take(ctx context.Context, ev *webhooks.UnwrapWebhookEventUnion) (int, string) {
	switch h.seen.begin(ev.ID, time.Now()) {
	case seenTaken:
		return http.StatusOK, "duplicate: handled before"
	case seenTaking:
		return http.StatusServiceUnavailable, "being handled; deliver it again"
	}
	key := journaldriver.Key{Backend: WebhookJournal, Thread: ev.Data.ID, Call: ev.ID}
	if key.Thread == "" {
		key.Thread = ev.Type
	}
	if status, msg := h.claim(ctx, key); status != 0 {
		if status == http.StatusOK {
			h.seen.done(ev.ID)
		} else {
			h.seen.forget(ev.ID)
		}
		return status, msg
	}
	status, msg := h.handle(ctx, ev)
	if status != http.StatusOK {
		h.seen.forget(ev.ID)
		if err := h.journal.Release(context.WithoutCancel(ctx), key, h.owner); err != nil {
			h.log.WarnContext(ctx, "openai: could not release a webhook event", "event", ev.ID, "error", err)
		}
		return status, msg
	}
	h.seen.done(ev.ID)
	res := journaldriver.Result{Output: coredriver.Output{Text: ev.Type}}
	if err := h.journal.Finish(context.WithoutCancel(ctx), key, h.owner, res); err != nil {
		// Handled all the same: a delivery elsewhere takes it over once
		// the lease passed, which costs a resume that finds nothing to do.
		h.log.WarnContext(ctx, "openai: could not record a webhook event as handled", "event", ev.ID, "error", err)
	}
	return http.StatusOK, msg
}

// claim claims event key in the journal for this handler. It returns 0 if
// the handler is to handle it, else the delivery's answer: 200 if it was
// handled, 503 while another process handles it or if the journal fails.
func (h *WebhookHandler) claim(ctx context.Context, key journaldriver.Key) (int, string) {
	e, created, err := h.journal.Claim(ctx, key, "", "", h.owner, h.opts.Lease)
	switch {
	case err != nil:
		h.log.WarnContext(ctx, "openai: could not record a webhook event", "event", key.Call, "error", err)
		return http.StatusServiceUnavailable, "the journal failed; deliver it again"
	case created:
		return 0, ""
	case e.State.Finished():
		return http.StatusOK, "duplicate: handled before"
	case time.Now().Before(e.LeaseUntil):
		return http.StatusServiceUnavailable, "being handled; deliver it again"
	}
	took, err := h.journal.TakeOver(ctx, key, h.owner, h.opts.Lease)
	if err != nil || !took {
		return http.StatusServiceUnavailable, "being handled; deliver it again"
	}
	return 0, ""
}

// handle does what the event asks (see Resumes) and returns the delivery's
// answer.
func (h *WebhookHandler) handle(ctx context.Context, ev *webhooks.UnwrapWebhookEventUnion) (int, string) {
	session := ev.Data.ID
	if strings.HasPrefix(ev.Type, "agent.session.") && h.opts.Accept != nil && !h.opts.Accept(ctx, session) {
		return http.StatusOK, "not accepted"
	}
	msg := "acknowledged"
	if ev.Type == "agent.session.action_required" && ev.Data.RequiredAction.Type != "environment_connection" && session != "" {
		if !h.schedule(session) {
			return http.StatusServiceUnavailable, "busy; deliver it again"
		}
		msg = "resuming"
	}
	if h.opts.OnEvent != nil {
		if err := h.opts.OnEvent(ctx, ev); err != nil {
			h.log.WarnContext(ctx, "openai: the webhook event's handler failed", "event", ev.ID, "type", ev.Type, "error", err)
			return http.StatusInternalServerError, "the event's handler failed"
		}
	}
	return http.StatusOK, msg
}

// schedule starts a resume of session, or makes the one running run once
// more. It reports false when the handler is shut down or resumes
// MaxResumes sessions already.
func (h *WebhookHandler) schedule(session string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return false
	case h.active[session] != nil:
		h.active[session].again = true
		return true
	case len(h.active) >= h.opts.MaxResumes:
		return false
	}
	h.active[session] = &resuming{}
	h.wg.Add(1)
	go h.resume(session)
	return true
}

// resume resumes session's run, again while actions arrived meanwhile.
func (h *WebhookHandler) resume(session string) {
	defer h.wg.Done()
	for {
		res, err := h.tryResume(session)
		h.report(session, res, err)
		h.mu.Lock()
		st := h.active[session]
		if h.life.Err() != nil {
			h.cut = append(h.cut, session)
		} else if st.again {
			// Even after Shutdown: the action's delivery was answered
			// 200, and the service will not deliver it again.
			st.again = false
			h.mu.Unlock()
			continue
		}
		delete(h.active, session)
		h.mu.Unlock()
		return
	}
}

// tryResume resumes session's run, and tries again while it fails for a
// reason that may pass, until RetryFor has passed since the first failure
// or until Shutdown; the run of the last attempt that failed so is handed
// over (h.ro.HandOver), for a Runner.TakeOver.
func (h *WebhookHandler) tryResume(session string) (*core.Result, error) {
	var until time.Time
	for wait := h.opts.RetryWait; ; wait = min(2*wait, maxResumeRetryWait) {
		res, err := h.runner.Resume(h.life, session, &h.ro)
		if err == nil || !mayPass(err) {
			return res, err
		}
		if until.IsZero() {
			until = time.Now().Add(h.opts.RetryFor)
		}
		d := wait - mrand.N(wait/2+1)
		if time.Now().Add(d).After(until) {
			return res, err
		}
		h.log.Info("openai: session resumed by webhook met a failure that may pass: trying again", "session", session, "in", d, "error", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-h.closing:
			t.Stop()
			return res, err
		}
	}
}

// mayPass reports whether a resume's error may pass if the resume is
// tried again later: the service unavailable (502, 503, 504, or a
// journal's connection lost: Unavailable), rate limited (429), or not
// reached (a network error).
func mayPass(err error) bool {
	var (
		api *oai.Error
		ne  net.Error
	)
	switch errcode.Of(err) {
	case errcode.Unavailable:
		return true
	case errcode.ResourceExhausted:
		return errors.As(err, &api) && api.StatusCode == http.StatusTooManyRequests
	case errcode.Unknown:
		return errors.As(err, &ne)
	}
	return false
}

func (h *WebhookHandler) report(session string, res *core.Result, err error) {
	switch {
	case err == nil:
		h.log.Info("openai: session resumed by webhook", "session", session, "turn", res.Turn, "steps", res.Steps)
	case errors.Is(err, core.ErrAwaitingApproval):
		h.log.Info("openai: session resumed by webhook awaits a decision", "session", session)
	case mayPass(err):
		h.log.Warn("openai: session resumed by webhook failed; its run is left for a Runner.TakeOver sharing the journal, or the session's next event",
			"session", session, "error", err)
	default:
		h.log.Warn("openai: session resumed by webhook failed", "session", session, "error", err)
	}
	if h.opts.OnResult != nil {
		h.opts.OnResult(session, res, err)
	}
}

// Shutdown stops the handler: deliveries that would start a resume are
// answered 503 from now on (the service delivers them again, to another
// process or later), a resume waiting to be tried again is not (its run
// is left for a [core.Runner.TakeOver]: see Resumes), and it waits for the
// resumes in flight to end (a session whose action arrived during its
// resume is resumed once more: that delivery was answered 200), or for
// ctx to end. Then it stops the resumes still running (their runs stop as
// a canceled context stops them: their turns wait on the service) and
// returns an error whose code is the context's, naming the sessions whose
// resume was cut short, for a [core.Runner.Resume] elsewhere. It returns
// nil if every resume ended. Call it before closing the runner.
func (h *WebhookHandler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		h.stop()
		return nil
	case <-ctx.Done():
	}
	h.stop()
	<-done
	h.mu.Lock()
	cut := slices.Clone(h.cut)
	h.mu.Unlock()
	if len(cut) == 0 {
		return nil
	}
	slices.Sort(cut)
	return &errcode.Error{Code: errcode.Of(context.Cause(ctx)), Op: "openai: webhooks: shutdown",
		Err: fmt.Errorf("the resumes of %d session(s) were cut short, their turns waiting: %s: %w", len(cut), strings.Join(cut, ", "), context.Cause(ctx))}
}
