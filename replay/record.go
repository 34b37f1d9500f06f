package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/toolrelay/toolrelay/errcode"
)

// endHeader is the response trailer a cassette keeps to say how a body
// ended, when it did not end at its end: endOpen (the client closed it
// while the service was still sending), endCanceled (the client's context
// ended), or the text of the error that broke it. A response of code 0 is
// a request that failed in transport, and endHeader says how.
const endHeader = "X-Toolrelay-Replay-End"

const (
	endOpen     = "open"
	endCanceled = "canceled"
)

// recorder is the transport of a recording cassette.
type recorder struct {
	c    *Cassette
	next http.RoundTripper
}

// recording is one request being recorded, and its answer.
type recording struct {
	i   *Interaction
	max int64

	mu   sync.Mutex
	body bytes.Buffer
	done bool
	err  error // a bound was passed: the recording fails
}

func (t *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req, t.c.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out.ContentLength = int64(len(body))
	}
	rec := &recording{max: t.c.opts.MaxBodyBytes, i: &Interaction{Request: requestOf(req, body)}}
	t.c.mu.Lock()
	if !t.c.closed {
		t.c.recs = append(t.c.recs, rec)
	}
	t.c.mu.Unlock()

	resp, err := t.next.RoundTrip(out)
	if err != nil {
		end := err.Error()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			end = endCanceled
		}
		rec.mu.Lock()
		rec.i.Response = Response{Status: "transport error", Headers: http.Header{endHeader: {end}}}
		rec.done = true
		rec.mu.Unlock()
		return nil, err
	}
	rec.i.Response = Response{
		Status: resp.Status, Code: resp.StatusCode, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		TransferEncoding: resp.TransferEncoding, ContentLength: resp.ContentLength, Uncompressed: resp.Uncompressed,
		Headers: resp.Header.Clone(),
	}
	resp.Body = &teeBody{rc: resp.Body, rec: rec, length: resp.ContentLength}
	return resp, nil
}

// readBody reads a request's body, at most max bytes (an error with code
// ResourceExhausted past it), and closes it.
func readBody(req *http.Request, max int64) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := limitedRead(req.Body, max)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.ResourceExhausted, Op: "replay: " + req.Method + " " + req.URL.Path, Err: err}
	}
	return b, nil
}

// requestOf returns the cassette's form of req, whose body is body.
func requestOf(req *http.Request, body []byte) Request {
	return Request{
		Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor,
		ContentLength: int64(len(body)), Host: req.URL.Host, URL: req.URL.String(), Method: req.Method,
		Headers: req.Header.Clone(), Body: string(body),
	}
}

// teeBody keeps what the client reads of a response body.
type teeBody struct {
	rc     io.ReadCloser
	rec    *recording
	length int64 // the response's ContentLength: -1 if unknown
	read   int64
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read += int64(n)
	b.rec.write(p[:n])
	switch {
	case err == io.EOF:
		b.rec.finish(nil)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		b.rec.finish(errors.New(endCanceled))
	case err != nil:
		b.rec.finish(err)
	}
	return n, err
}

func (b *teeBody) Close() error {
	if b.length >= 0 && b.read >= b.length {
		b.rec.finish(nil) // all of it was read (a 204's nothing too)
	}
	b.rec.finish(errors.New(endOpen))
	return b.rc.Close()
}

// write keeps p, unless the body passed its bound.
func (r *recording) write(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || r.err != nil || len(p) == 0 {
		return
	}
	if int64(r.body.Len()+len(p)) > r.max {
		r.err = fmt.Errorf("%s %s: a response body larger than the limit of %d bytes (Options.MaxBodyBytes)", r.i.Request.Method, r.i.Request.URL, r.max)
		return
	}
	r.body.Write(p)
}

// finish ends the recording of the body: at its end (end nil), or as end
// says (see endHeader). A finished recording does not change.
func (r *recording) finish(end error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	r.i.Response.Body = r.body.String()
	if end != nil {
		r.i.Response.Trailer = http.Header{endHeader: {end.Error()}}
	}
}
