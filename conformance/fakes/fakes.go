// Package fakes holds the conformance harnesses of the built-in backends,
// each on a fresh fake of its service per scenario: the backends' own tests
// run the suite with them, and so does a runner of the loop of its own
// (module toolrelay/temporal) over every backend.
package fakes

import (
	"io"
	"log/slog"
	"time"

	"github.com/openai/openai-go/v3/option"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// fast makes the SDK clients' retries quick.
var fast = []option.RequestOption{option.WithMaxRetryDelay(time.Millisecond)}
