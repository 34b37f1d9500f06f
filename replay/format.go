package replay

import (
	"net/http"
	"net/url"
	"time"
)

// FormatVersion is the version of go-vcr's cassette format (v4's
// cassette.CassetteFormatVersion) that cassettes are written in.
const FormatVersion = 2

// cassetteFile is a cassette file: go-vcr's cassette.Cassette as it is written.
type cassetteFile struct {
	Version      int            `yaml:"version"`
	Interactions []*Interaction `yaml:"interactions"`
}

// An Interaction is one request and its answer, as a cassette holds it:
// go-vcr's cassette.Interaction, field for field.
type Interaction struct {
	ID       int      `yaml:"id"`
	Request  Request  `yaml:"request"`
	Response Response `yaml:"response"`
}

// Request is a recorded request: go-vcr's cassette.Request.
type Request struct {
	Proto            string      `yaml:"proto"`
	ProtoMajor       int         `yaml:"proto_major"`
	ProtoMinor       int         `yaml:"proto_minor"`
	ContentLength    int64       `yaml:"content_length"`
	TransferEncoding []string    `yaml:"transfer_encoding,omitempty"`
	Trailer          http.Header `yaml:"trailer,omitempty"`
	Host             string      `yaml:"host"`
	RemoteAddr       string      `yaml:"remote_addr,omitempty"`
	RequestURI       string      `yaml:"request_uri,omitempty"`
	Body             string      `yaml:"body,omitempty"`
	Form             url.Values  `yaml:"form,omitempty"`
	Headers          http.Header `yaml:"headers,omitempty"`
	URL              string      `yaml:"url"`
	Method           string      `yaml:"method"`
}

// Response is a recorded response: go-vcr's cassette.Response. A Code of 0
// is a request that failed in transport.
type Response struct {
	Proto            string        `yaml:"proto"`
	ProtoMajor       int           `yaml:"proto_major"`
	ProtoMinor       int           `yaml:"proto_minor"`
	TransferEncoding []string      `yaml:"transfer_encoding,omitempty"`
	Trailer          http.Header   `yaml:"trailer,omitempty"`
	ContentLength    int64         `yaml:"content_length"`
	Uncompressed     bool          `yaml:"uncompressed,omitempty"`
	Body             string        `yaml:"body"`
	Headers          http.Header   `yaml:"headers"`
	Status           string        `yaml:"status"`
	Code             int           `yaml:"code"`
	Duration         time.Duration `yaml:"duration"`
}

// Cut reports whether the recorded body did not end at its end: the
// client closed it while the service was still sending, or its context
// ended, or an error broke it (the trailer X-Toolrelay-Replay-End says
// which).
func (r *Response) Cut() bool { return r.Trailer.Get(endHeader) != "" }
