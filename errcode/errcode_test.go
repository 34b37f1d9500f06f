package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/errcode"
)

// TestErrorText checks the text of coded errors, a code said once however
// deep the wrapping, and the code Of finds.
func TestErrorText(t *testing.T) {
	inner := &errcode.Error{Code: errcode.DeadlineExceeded, Op: "read answer", Err: errors.New("no data for 1s")}
	tests := []struct {
		err  error
		text string
		code errcode.Code
	}{
		{errcode.NotFound, "NotFound", errcode.NotFound},
		{&errcode.Error{Code: errcode.Internal, Op: "core: step"}, "core: step (Internal)", errcode.Internal},
		{&errcode.Error{Code: errcode.Internal, Err: errors.New("boom")}, "boom (Internal)", errcode.Internal},
		{inner, "read answer: no data for 1s (DeadlineExceeded)", errcode.DeadlineExceeded},
		{&errcode.Error{Code: errcode.DeadlineExceeded, Op: "openai: start", Err: fmt.Errorf("stream: %w", inner)},
			"openai: start: stream: read answer: no data for 1s (DeadlineExceeded)", errcode.DeadlineExceeded},
		{&errcode.Error{Code: errcode.DeadlineExceeded, Err: inner}, "read answer: no data for 1s (DeadlineExceeded)", errcode.DeadlineExceeded},
		{&errcode.Error{Code: errcode.Unavailable, Op: "retry", Err: inner}, "retry: read answer: no data for 1s (DeadlineExceeded) (Unavailable)", errcode.Unavailable},
		{fmt.Errorf("run: %w", context.Canceled), "run: context canceled", errcode.Canceled},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("Error() = %q, want %q", got, tt.text)
		}
		if got := errcode.Of(tt.err); got != tt.code {
			t.Errorf("Of(%q) = %v, want %v", tt.text, got, tt.code)
		}
	}
}
