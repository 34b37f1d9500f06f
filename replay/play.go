package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
)

// player is the transport of a replaying cassette.
type player struct{ c *Cassette }

func (t *player) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req, t.c.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	i := &Interaction{Request: requestOf(req, body)}
	Redact(i)
	sent := canonOf(&i.Request)
	rec, err := t.c.take(sent, i.Request.Body)
	if err != nil {
		return nil, t.c.firstMiss(err)
	}
	return respond(req, rec)
}

// take returns the recorded interaction that answers sent, marking it
// played, or the error of a request that is not recorded or out of order.
func (c *Cassette) take(sent *canon, sentBody string) (*Interaction, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op := "replay: cassette " + c.file
	var unplayed []int
	for j, p := range c.played {
		if p {
			continue
		}
		unplayed = append(unplayed, j)
		if !equal(c.canon[j], sent) {
			continue
		}
		for _, k := range unplayed[:len(unplayed)-1] {
			if c.canon[k].thread() == sent.thread() {
				return nil, &errcode.Error{Code: errcode.FailedPrecondition, Op: op, Err: fmt.Errorf(
					"%s %s sent out of order: it was recorded as #%d, after #%d (the same method and path), which is not replayed yet; #%d (-recorded +sent):\n%s",
					sent.Method, sent.Path, j, k, k, diff(c.canon[k], sent))}
			}
		}
		c.played[j] = true
		c.rename(c.c.Interactions[j].Request.Body, sentBody)
		return c.c.Interactions[j], nil
	}
	if len(unplayed) == 0 {
		return nil, &errcode.Error{Code: errcode.FailedPrecondition, Op: op, Err: fmt.Errorf(
			"%s %s is not recorded: all %d recorded requests were replayed already", sent.Method, sent.Path, len(c.canon))}
	}
	n := nearest(c.canon, unplayed, sent)
	return nil, &errcode.Error{Code: errcode.FailedPrecondition, Op: op, Err: fmt.Errorf(
		"%s %s is not recorded; the nearest recorded request not replayed yet is #%d %s %s (-recorded +sent):\n%s",
		sent.Method, sent.Path, n, c.canon[n].Method, c.canon[n].Path, diff(c.canon[n], sent))}
}

// statelessRE finds the id a stateless thread made up for itself.
var statelessRE = regexp.MustCompile(`"toolrelay_thread":\s*"(stateless_[^"]*)"`)

// rename remembers the id the replayed run made up for a stateless
// thread, against the recorded one; c.mu is held.
func (c *Cassette) rename(recorded, sent string) {
	r, s := statelessRE.FindStringSubmatch(recorded), statelessRE.FindStringSubmatch(sent)
	if r == nil || s == nil {
		return
	}
	if c.renamed == nil {
		c.renamed = map[string]string{}
	}
	c.renamed[r[1]] = s[1]
}

// Renamed returns the id the replayed run gave the thread recorded as
// id: a stateless thread makes up its id (a volatile field), the only id
// a replay does not keep; any other id is returned as it is.
func (c *Cassette) Renamed(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.renamed[id]; ok {
		return n
	}
	return id
}

// firstMiss returns err, the error of a request that did not replay,
// saying also what the first one was when it was another: a program that
// recovers from a failed request (reading the state back, retrying)
// sends requests the recording never saw, and the error it ends with is
// not the one that says what changed.
func (c *Cassette) firstMiss(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.miss == nil {
		c.miss = err
		return err
	}
	return &errcode.Error{Code: errcode.FailedPrecondition, Op: "replay", Err: fmt.Errorf("%w\nafter the first request that did not replay: %s", err, c.miss.Error())}
}

// Miss returns the error of the first request that did not replay, nil
// if none.
func (c *Cassette) Miss() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.miss
}

// respond returns the recorded answer to req.
func respond(req *http.Request, i *Interaction) (*http.Response, error) {
	r := i.Response
	if r.Code == 0 {
		end := r.Headers.Get(endHeader)
		if end == endCanceled {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return nil, fmt.Errorf("replay: %s %s: the recorded request failed in transport: %s", req.Method, req.URL.Path, end)
	}
	status := r.Status
	if status == "" {
		status = strconv.Itoa(r.Code) + " " + http.StatusText(r.Code)
	}
	h := r.Headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		Status: status, StatusCode: r.Code, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		TransferEncoding: r.TransferEncoding, ContentLength: r.ContentLength, Uncompressed: r.Uncompressed,
		Header: h, Request: req,
		Body: &replayBody{r: strings.NewReader(r.Body), end: r.Trailer.Get(endHeader), ctx: req.Context(), closed: make(chan struct{})},
	}, nil
}

// replayBody serves a recorded body, then ends it as it ended when
// recorded: at its end; waiting for the client to close it or for its
// context to end (a stream the client closed, or cancelled, while the
// service was still sending); or with the error that broke it.
type replayBody struct {
	r      *strings.Reader
	end    string
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

var errClosed = errors.New("replay: read of a closed body")

func (b *replayBody) Read(p []byte) (int, error) {
	if b.r.Len() > 0 {
		return b.r.Read(p)
	}
	switch b.end {
	case "":
		return 0, io.EOF
	case endOpen, endCanceled:
		select {
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		case <-b.closed:
			return 0, errClosed
		}
	}
	return 0, fmt.Errorf("replay: the recorded stream broke: %s: %w", b.end, io.ErrUnexpectedEOF)
}

func (b *replayBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}
