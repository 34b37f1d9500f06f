package openai_test

import (
	"fmt"
	"net/http"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
)

// TestTurnErrorCodes checks how a turn's error code maps to a core code.
func TestTurnErrorCodes(t *testing.T) {
	tests := []struct {
		status, code string
		want         errcode.Code
	}{
		{"failed", "rate_limit_exceeded", errcode.ResourceExhausted},
		{"failed", "context_length_exceeded", errcode.ResourceExhausted},
		{"failed", "organization_spend_limit_exceeded", errcode.ResourceExhausted},
		{"failed", "authentication_error", errcode.PermissionDenied},
		{"failed", "invalid_request", errcode.InvalidArgument},
		{"failed", "resource_not_found", errcode.NotFound},
		{"failed", "billing_not_active", errcode.FailedPrecondition},
		{"failed", "request_timeout", errcode.DeadlineExceeded},
		{"failed", "internal_error", errcode.Internal},
		{"failed", "something_new", errcode.Unknown},
		{"cancelled", "", errcode.Canceled},
	}
	var b openai.Backend
	for _, tt := range tests {
		err := fmt.Errorf("run: %w", &driver.TurnError{Backend: "openai", Thread: "s", Turn: "t", Status: tt.status, Code: tt.code})
		if got := b.ErrorCode(err); got != tt.want {
			t.Errorf("ErrorCode(turn %s %q) = %v, want %v", tt.status, tt.code, got, tt.want)
		}
	}
	if got := b.ErrorCode(&openai.UnsupportedActionError{Type: "environment_connection"}); got != errcode.Unimplemented {
		t.Errorf("ErrorCode(unsupported action) = %v, want Unimplemented", got)
	}
}

// TestStatusCodes checks how the HTTP status of the service's answer maps
// to a core code: unavailability (502, 503, 504) is Unavailable, which a
// caller may retry later; a 408 is DeadlineExceeded.
func TestStatusCodes(t *testing.T) {
	tests := []struct {
		status int
		want   errcode.Code
	}{
		{http.StatusBadRequest, errcode.InvalidArgument},
		{http.StatusUnauthorized, errcode.PermissionDenied},
		{http.StatusForbidden, errcode.PermissionDenied},
		{http.StatusNotFound, errcode.NotFound},
		{http.StatusRequestTimeout, errcode.DeadlineExceeded},
		{http.StatusConflict, errcode.FailedPrecondition},
		{http.StatusUnprocessableEntity, errcode.InvalidArgument},
		{http.StatusTooManyRequests, errcode.ResourceExhausted},
		{http.StatusInternalServerError, errcode.Internal},
		{http.StatusNotImplemented, errcode.Unimplemented},
		{http.StatusBadGateway, errcode.Unavailable},
		{http.StatusServiceUnavailable, errcode.Unavailable},
		{http.StatusGatewayTimeout, errcode.Unavailable},
	}
	var b openai.Backend
	for _, tt := range tests {
		err := fmt.Errorf("openai: submit: %w", &oai.Error{StatusCode: tt.status})
		if got := b.ErrorCode(err); got != tt.want {
			t.Errorf("ErrorCode(HTTP %d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}
