package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		{fmt.Errorf("run: %w", context.DeadlineExceeded), "run: context deadline exceeded", errcode.DeadlineExceeded},
		// Joined errors: the first code found, an uncoded one passed over.
		{errors.Join(errors.New("closing"), inner), "closing\nread answer: no data for 1s (DeadlineExceeded)", errcode.DeadlineExceeded},
		{errors.Join(errors.New("a"), errors.New("b")), "a\nb", errcode.Unknown},
		{nil, "", errcode.Unknown},
	}
	for _, tt := range tests {
		if tt.err == nil {
			if got := errcode.Of(nil); got != tt.code {
				t.Errorf("Of(nil) = %v, want %v", got, tt.code)
			}
			continue
		}
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("Error() = %q, want %q", got, tt.text)
		}
		if got := errcode.Of(tt.err); got != tt.code {
			t.Errorf("Of(%q) = %v, want %v", tt.text, got, tt.code)
		}
	}
}

// TestFromHTTPStatus checks the code of every HTTP status the doc names,
// and of the others.
func TestFromHTTPStatus(t *testing.T) {
	want := map[int]errcode.Code{
		400: errcode.InvalidArgument, 422: errcode.InvalidArgument,
		401: errcode.PermissionDenied, 403: errcode.PermissionDenied,
		404: errcode.NotFound, 408: errcode.DeadlineExceeded, 409: errcode.FailedPrecondition,
		429: errcode.ResourceExhausted, 501: errcode.Unimplemented,
		502: errcode.Unavailable, 503: errcode.Unavailable, 504: errcode.Unavailable,
		500: errcode.Internal, 507: errcode.Internal, 599: errcode.Internal,
		200: errcode.Unknown, 302: errcode.Unknown, 410: errcode.Unknown, 418: errcode.Unknown, 600: errcode.Unknown,
	}
	got := map[int]errcode.Code{}
	for status := range want {
		got[status] = errcode.FromHTTPStatus(status)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromHTTPStatus (-want +got):\n%s", diff)
	}
}
