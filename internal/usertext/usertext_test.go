package usertext_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/usertext"
)

// TestOf: each code has its sentence, a busy thread its own, and no
// error's text reaches it.
func TestOf(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:5432: password=hunter2")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&errcode.Error{Code: errcode.DeadlineExceeded, Err: secret}, "The answer took too long. (DeadlineExceeded)"},
		{&errcode.Error{Code: errcode.ResourceExhausted, Err: secret}, "The agent reached a limit before it could answer. (ResourceExhausted)"},
		{&errcode.Error{Code: errcode.Unavailable, Err: secret}, "The agent's service is unavailable. Try again later. (Unavailable)"},
		{&errcode.Error{Code: errcode.Canceled, Err: secret}, "The answer was stopped. (Canceled)"},
		{&errcode.Error{Code: errcode.PermissionDenied, Err: secret}, "The agent's service refused the request. (PermissionDenied)"},
		{&errcode.Error{Code: errcode.InvalidArgument, Err: secret}, "The agent's service could not take the message. (InvalidArgument)"},
		{&errcode.Error{Code: errcode.FailedPrecondition, Err: fmt.Errorf("thread t: %w", core.ErrThreadBusy)}, "The agent is busy with this conversation. Try again later. (FailedPrecondition)"},
		{&errcode.Error{Code: errcode.FailedPrecondition, Err: secret}, "The agent could not answer. (FailedPrecondition)"},
		{secret, "The agent could not answer. (Unknown)"},
	} {
		if got := usertext.Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
