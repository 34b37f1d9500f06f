package openai_test

import (
	"fmt"
	"net/http"
	"testing"

	oai "github.com/openai/openai-go/v3"

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

// TestStatusCodes checks how the HTTP status of the service's answer maps
// to a core code: unavailability (502, 503, 504) is Unavailable, which a
// caller may retry later; a 408 is DeadlineExceeded.
func TestStatusCodes(t *testing.T) {
	tests := []struct {
		status int
		want   core.Code
	}{
		{http.StatusBadRequest, core.InvalidArgument},
		{http.StatusUnauthorized, core.PermissionDenied},
		{http.StatusForbidden, core.PermissionDenied},
		{http.StatusNotFound, core.NotFound},
		{http.StatusRequestTimeout, core.DeadlineExceeded},
		{http.StatusConflict, core.FailedPrecondition},
		{http.StatusUnprocessableEntity, core.InvalidArgument},
		{http.StatusTooManyRequests, core.ResourceExhausted},
		{http.StatusInternalServerError, core.Unknown},
		{http.StatusNotImplemented, core.Unknown},
		{http.StatusBadGateway, core.Unavailable},
		{http.StatusServiceUnavailable, core.Unavailable},
		{http.StatusGatewayTimeout, core.Unavailable},
	}
	var b openai.Backend
	for _, tt := range tests {
		err := fmt.Errorf("openai: submit: %w", &oai.Error{StatusCode: tt.status})
		if got := b.ErrorCode(err); got != tt.want {
			t.Errorf("ErrorCode(HTTP %d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}
