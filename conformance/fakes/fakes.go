// Package fakes holds the conformance harnesses of the built-in backends,
// each on a fresh fake of its service per scenario: the backends' own tests
// run the suite with them, and so does a runner of the loop of its own
// (module toolrelay/temporal) over every backend.
package fakes

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3/option"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// fast makes the SDK clients' retries quick.
var fast = []option.RequestOption{option.WithMaxRetryDelay(time.Millisecond)}

// wrapped returns c (nil: openai-go's default) with its transport wrapped
// by wrap, or c when wrap is nil.
func wrapped(c *http.Client, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	if wrap == nil {
		return c
	}
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	t := out.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	out.Transport = wrap(t)
	return out
}
