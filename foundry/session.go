package foundry

import (
	"context"
	"log/slog"
	"regexp"
	"sync"

	"github.com/toolrelay/toolrelay/core/driver"
)

// Hosted agent sessions. A hosted agent's turns run in a session: a
// sandbox whose $HOME and /files last across turns (up to 30 days, Learn
// "Manage hosted agent sessions"). A request names its session in
// agent_session_id; the service answers with the session the turn ran in
// in the x-agent-session-id header, "either the caller-provided value, the
// auto-derived value, or an auto-generated UUID" (Azure.AI.AgentServer
// CreateResponse and ResponseObject.AgentSessionId; agent-framework-go
// provider/foundryprovider/hostedsession.go sends and reads the same).
//
// The backend keeps each thread's session with the thread: in the
// runner's journal, as a note of the thread (driver.ThreadNotes), and in
// memory. The journal is what survives a process restart and reaches a
// takeover in another process: a thread's id (a conversation id, or in
// Chain mode the latest response id) says nothing of its session, and
// the run that picks the thread up reads the journal before anything else.
// Notes are kept under the thread the step moved to, so a chain's session
// follows it from response to response. A runner whose journal keeps no
// notes gives the backend none: the session then lasts as long as the
// backend (and the service may derive one from the conversation or the
// previous response).

// sessionHeader is the response header that names a hosted agent's
// session.
const sessionHeader = "x-agent-session-id"

// sessionNote is the name of the thread note that keeps its session.
const sessionNote = "foundry.agent_session"

// sessionID is what a session id must be (the Microsoft Foundry skill's
// session-management reference: 8 to 128 letters, digits, '-' or '_'): a
// header or note that is not one is ignored.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{8,128}$`)

// maxSessions bounds the threads whose sessions a backend holds in
// memory: past it, the one noted longest ago is forgotten (the journal
// still has it).
const maxSessions = 4096

// sessions are the sessions of a hosted agent's threads, as a backend
// holds them in memory.
type sessions struct {
	logger   *slog.Logger
	mu       sync.Mutex
	byThread map[string]string
	order    []string // threads, oldest first, for eviction
}

func newSessions(logger *slog.Logger) *sessions {
	return &sessions{logger: logger, byThread: map[string]string{}}
}

// sessionBox is the session of one Start, Submit or Resume: the one its
// thread had, then the one the service answered with.
type sessionBox struct {
	mu  sync.Mutex
	sid string
}

// id returns the box's session, "" for none (or a nil box).
func (x *sessionBox) id() string {
	if x == nil {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sid
}

type boxKey struct{}

// boxFrom returns the session box ctx carries, or nil.
func boxFrom(ctx context.Context) *sessionBox {
	x, _ := ctx.Value(boxKey{}).(*sessionBox)
	return x
}

// bind returns ctx carrying a box with thread's session: the one held in
// memory, else the one noted in the journal, else none (a new thread, or
// one whose first turn has not answered yet).
func (s *sessions) bind(ctx context.Context, thread string) (context.Context, *sessionBox) {
	x := &sessionBox{sid: s.lookup(ctx, thread)}
	return context.WithValue(ctx, boxKey{}, x), x
}

func (s *sessions) lookup(ctx context.Context, thread string) string {
	if thread == "" {
		return ""
	}
	s.mu.Lock()
	id, ok := s.byThread[thread]
	s.mu.Unlock()
	if ok {
		return id
	}
	n := driver.ThreadNotesFrom(ctx)
	if n == nil {
		return ""
	}
	id, ok, err := n.Note(ctx, thread, sessionNote)
	switch {
	case err != nil:
		s.logger.WarnContext(ctx, "foundry: could not read the thread's hosted agent session from the journal; its turn may run in a new sandbox", "thread", thread, "error", err)
		return ""
	case !ok:
		return ""
	case !sessionID.MatchString(id):
		s.logger.WarnContext(ctx, "foundry: the journal's note of the thread's hosted agent session is not a session id; ignored", "thread", thread)
		return ""
	}
	s.hold(thread, id)
	return id
}

// observe takes the session the service answered a request of box with:
// the turn ran in it, and the thread's later turns go there too.
func (s *sessions) observe(x *sessionBox, header string) {
	if x == nil || header == "" {
		return
	}
	if !sessionID.MatchString(header) {
		s.logger.Warn("foundry: the service named a hosted agent session that is not a session id; ignored", "header", sessionHeader, "length", len(header))
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sid != "" && x.sid != header {
		s.logger.Warn("foundry: the hosted agent answered in another session than the thread's: the sandbox of its earlier turns ($HOME, /files) is not this one", "session", x.sid, "answered", header)
	}
	x.sid = header
}

// settle keeps the session of box for the thread step moved to (the same
// thread, or a chain's next response): in memory, and, when it changed,
// in the journal.
func (s *sessions) settle(ctx context.Context, x *sessionBox, step *driver.Step) {
	if step != nil {
		s.keep(ctx, step.Thread, x.id())
	}
}

// moved returns the callback of a request whose thread moves as soon as
// the service names its next response (a chain's Created and Moved; see
// driver.SubmitRequest.Moved): it keeps the session for that response,
// whose answer's header has named it, before it calls f (if any), so that
// a run that stops before the step completes resumes there in the
// session.
func (s *sessions) moved(ctx context.Context, x *sessionBox, f func(string)) func(string) {
	return func(thread string) {
		s.keep(ctx, thread, x.id())
		if f != nil {
			f(thread)
		}
	}
}

// keep keeps id as thread's session: in memory, and, when it changed, in
// the journal.
func (s *sessions) keep(ctx context.Context, thread, id string) {
	if thread == "" || id == "" {
		return
	}
	s.mu.Lock()
	known, ok := s.byThread[thread]
	s.mu.Unlock()
	if ok && known == id {
		return
	}
	s.hold(thread, id)
	if n := driver.ThreadNotesFrom(ctx); n != nil {
		// Noted even when the run is being canceled: the turn ran there.
		if err := n.SetNote(context.WithoutCancel(ctx), thread, sessionNote, id); err != nil {
			s.logger.WarnContext(ctx, "foundry: could not note the thread's hosted agent session in the journal; a resume in another process may run in a new sandbox", "thread", thread, "error", err)
		}
	}
}

// hold keeps thread's session in memory.
func (s *sessions) hold(thread, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byThread[thread]; !ok {
		if len(s.order) >= maxSessions {
			delete(s.byThread, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, thread)
	}
	s.byThread[thread] = id
}
