// Package wirelimit bounds what a backend reads from a service: the size
// of a response body and of each server-sent event, how long a request or
// a stream may go without a byte, and how long a stream may go without a
// real event (keep-alive comments do not count). Both backends wrap every
// HTTP exchange with [Limits.Do]; a limit reached ends the exchange with
// an *errcode.Error: ResourceExhausted for a size ([ErrTooLarge]),
// DeadlineExceeded for a wait ([ErrIdle], [ErrSilent]).
package wirelimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
)

// The defaults of [Limits].
const (
	// DefaultMaxResponseBytes bounds a response body that is not an event
	// stream.
	DefaultMaxResponseBytes = 64 << 20
	// DefaultMaxEventBytes bounds one server-sent event.
	DefaultMaxEventBytes = 16 << 20
	// DefaultIdleTimeout bounds a wait for the next byte of an answer,
	// headers included (the default request timeout of the services' own
	// SDKs).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxSilence bounds a wait for the next event of a stream.
	DefaultMaxSilence = 10 * time.Minute
)

// The causes of the errors a limit gives, for errors.Is.
var (
	ErrTooLarge = errors.New("too large")
	ErrIdle     = errors.New("no data")
	ErrSilent   = errors.New("no event")
)

// Limits bound one HTTP exchange. A zero field means its default; a
// negative one, no limit.
type Limits struct {
	// MaxResponseBytes bounds a response body that is not an event
	// stream.
	MaxResponseBytes int64
	// MaxEventBytes bounds the bytes of one event of an event stream
	// (its fields, not the keep-alive comments between events), and of
	// one comment line: one of MaxEventBytes bytes or more is refused.
	// (Refusing it before it fills a buffer of that size keeps the SSE
	// decoder from doubling its buffer past the limit.)
	MaxEventBytes int64
	// IdleTimeout bounds the wait for the response's headers; then, for a
	// body that is not an event stream, the wait for the whole body (a
	// body dripped a byte at a time is idle: no progress toward a
	// complete response), and for a stream, the wait for its next bytes.
	IdleTimeout time.Duration
	// MaxSilence bounds the wait for the next complete event of an event
	// stream: one with data, which the decoder hands on. Keep-alive
	// comments, fields without data (event:, id:, retry:) and an event's
	// bytes before its end do not reset it.
	MaxSilence time.Duration
}

// New returns the limits of a backend's options, which hold the sizes as
// ints: maxResponseBytes, maxEventBytes, idleTimeout and maxSilence are
// the fields of the same names.
func New(maxResponseBytes, maxEventBytes int, idleTimeout, maxSilence time.Duration) Limits {
	return Limits{MaxResponseBytes: int64(maxResponseBytes), MaxEventBytes: int64(maxEventBytes), IdleTimeout: idleTimeout, MaxSilence: maxSilence}
}

func pick[T int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// resolved returns l with its defaults in place and "none" as zero.
func (l Limits) resolved() Limits {
	return Limits{
		MaxResponseBytes: pick(l.MaxResponseBytes, DefaultMaxResponseBytes),
		MaxEventBytes:    pick(l.MaxEventBytes, DefaultMaxEventBytes),
		IdleTimeout:      pick(l.IdleTimeout, DefaultIdleTimeout),
		MaxSilence:       pick(l.MaxSilence, DefaultMaxSilence),
	}
}

// Do sends req with next under the limits, in the shape of an openai-go
// middleware. The response's body is replaced by one that enforces them;
// closing it releases the exchange. An error of a limit replaces the
// transport's error it caused.
func (l Limits) Do(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	l = l.resolved()
	ctx, cancel := context.WithCancelCause(req.Context())
	g := &guard{l: l, ctx: ctx, cancel: cancel}
	if l.IdleTimeout > 0 {
		g.idle = time.AfterFunc(l.IdleTimeout, func() {
			g.fail(&errcode.Error{Code: errcode.DeadlineExceeded, Op: "read answer", Err: fmt.Errorf("%w for %v", ErrIdle, l.IdleTimeout)})
		})
	}
	res, err := next(req.WithContext(ctx))
	if err != nil {
		err = g.cause(err)
		g.release()
		return nil, err
	}
	g.sse = isEventStream(res.Header.Get("Content-Type"))
	if g.sse && l.MaxSilence > 0 {
		g.silence = time.AfterFunc(l.MaxSilence, func() {
			g.fail(&errcode.Error{Code: errcode.DeadlineExceeded, Op: "read event stream", Err: fmt.Errorf("%w for %v (keep-alives do not count)", ErrSilent, l.MaxSilence)})
		})
	}
	g.touch()
	g.rc = res.Body
	res.Body = g
	if !g.sse && l.MaxResponseBytes > 0 && res.ContentLength > l.MaxResponseBytes {
		g.fail(g.tooLarge("response body", l.MaxResponseBytes))
	}
	return res, nil
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// guard is a response body under limits.
type guard struct {
	l      Limits
	ctx    context.Context
	cancel context.CancelCauseFunc
	rc     io.ReadCloser

	idle, silence *time.Timer

	mu  sync.Mutex
	err error // the limit reached, once one is

	// Read by one goroutine at a time, as a body is.
	sse     bool
	total   int64 // bytes of a body that is not a stream
	event   int64 // bytes of the current event's fields
	line    int64 // bytes of the current line
	comment bool  // the current line is a comment (":")
	skipLF  bool  // the last byte was a CR: a LF next ends no line
	head    [5]byte
	headN   int  // the first bytes of the current line, up to 5
	data    bool // the current event has a data field: its blank line dispatches it
}

// fail records err as the limit reached (the first one wins) and cancels
// the exchange, which ends a read in progress.
func (g *guard) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cancel(err)
}

func (g *guard) limitErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// cause returns the limit's error in place of an error it caused.
func (g *guard) cause(err error) error {
	if lerr := g.limitErr(); lerr != nil {
		return lerr
	}
	return err
}

func (g *guard) touch() {
	if g.idle != nil {
		g.idle.Reset(g.l.IdleTimeout)
	}
}

func (g *guard) tooLarge(what string, limit int64) error {
	return &errcode.Error{Code: errcode.ResourceExhausted, Op: "read answer", Err: fmt.Errorf("%w: %s past the limit of %d bytes", ErrTooLarge, what, limit)}
}

// Read implements io.Reader.
func (g *guard) Read(p []byte) (int, error) {
	if err := g.limitErr(); err != nil {
		return 0, err
	}
	n, err := g.rc.Read(p)
	if n > 0 {
		if g.sse {
			// A stream's bytes show the connection alive; its events,
			// that the service is (MaxSilence). A body that is not a
			// stream must be complete within IdleTimeout of its headers.
			g.touch()
		}
		if ok, lerr := g.count(p[:n]); lerr != nil {
			// Hand over the bytes before the limit (the events that
			// ended there); the next read gives the error.
			g.fail(lerr)
			if ok > 0 {
				return ok, nil
			}
			return 0, lerr
		}
	}
	if err == io.EOF && !g.sse && g.idle != nil {
		g.idle.Stop() // the body is complete
	}
	if err != nil {
		// A body cut by a limit may end in io.EOF: the limit is why.
		err = g.cause(err)
	}
	return n, err
}

// count accounts for p. When p passes a size limit it returns the error,
// and how many bytes of p came before the line that passed it.
func (g *guard) count(p []byte) (int, error) {
	if !g.sse {
		g.total += int64(len(p))
		if g.l.MaxResponseBytes > 0 && g.total > g.l.MaxResponseBytes {
			return 0, g.tooLarge("response body", g.l.MaxResponseBytes)
		}
		return 0, nil
	}
	all, lineStart := len(p), 0
	// Follow the stream's lines (ended by LF, CR or CRLF) to find where
	// each event ends (a blank line), and which lines are comments.
	for len(p) > 0 {
		if g.skipLF {
			g.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				lineStart++
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if len(seg) > 0 {
			if g.line == 0 {
				g.comment = seg[0] == ':'
			}
			g.headN += copy(g.head[g.headN:], seg)
			g.line += int64(len(seg))
			if g.comment && g.l.MaxEventBytes > 0 && g.line >= g.l.MaxEventBytes {
				return lineStart, g.tooLarge("a comment line", g.l.MaxEventBytes)
			}
			if !g.comment {
				g.event += int64(len(seg))
				if g.l.MaxEventBytes > 0 && g.event >= g.l.MaxEventBytes {
					return lineStart, g.tooLarge("an event", g.l.MaxEventBytes)
				}
			}
		}
		if i < 0 {
			return 0, nil
		}
		g.skipLF = p[i] == '\r'
		switch h := string(g.head[:g.headN]); {
		case g.line == 0: // a blank line ends an event
			// An event is dispatched (the decoder hands it on) when it
			// has data; fields alone (event:, id:, retry:) are silence.
			if g.data && g.silence != nil {
				g.silence.Reset(g.l.MaxSilence)
			}
			g.event, g.data = 0, false
		case h == "data:", h == "data" && g.line == 4:
			g.data = true
		}
		g.line, g.headN = 0, 0
		p = p[i+1:]
		lineStart = all - len(p)
	}
	return 0, nil
}

// Close implements io.Closer: it closes the body and ends the exchange.
func (g *guard) Close() error {
	err := g.rc.Close()
	g.release()
	return err
}

func (g *guard) release() {
	if g.idle != nil {
		g.idle.Stop()
	}
	if g.silence != nil {
		g.silence.Stop()
	}
	g.cancel(nil)
}
