package openai_test

import (
	"fmt"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/openai"
)

// TestTurnErrorCodes checks how a turn's error code maps to a core code.
func TestTurnErrorCodes(t *testing.T) {
	tests := []struct {
		status, code string
		want         core.Code
	}{
		{"failed", "rate_limit_exceeded", core.ResourceExhausted},
		{"failed", "context_length_exceeded", core.ResourceExhausted},
		{"failed", "organization_spend_limit_exceeded", core.ResourceExhausted},
		{"failed", "authentication_error", core.PermissionDenied},
		{"failed", "invalid_request", core.InvalidArgument},
		{"failed", "resource_not_found", core.NotFound},
		{"failed", "billing_not_active", core.FailedPrecondition},
		{"failed", "request_timeout", core.DeadlineExceeded},
		{"failed", "internal_error", core.Internal},
		{"failed", "something_new", core.Unknown},
		{"cancelled", "", core.Canceled},
	}
	var b openai.Backend
	for _, tt := range tests {
		err := fmt.Errorf("run: %w", &openai.TurnError{Session: "s", Turn: "t", Status: tt.status, Code: tt.code})
		if got := b.ErrorCode(err); got != tt.want {
			t.Errorf("ErrorCode(turn %s %q) = %v, want %v", tt.status, tt.code, got, tt.want)
		}
	}
	if got := b.ErrorCode(&openai.UnsupportedActionError{Type: "environment_connection"}); got != core.Unimplemented {
		t.Errorf("ErrorCode(unsupported action) = %v, want Unimplemented", got)
	}
}
