package foundry

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core"
)

// TurnError reports a response the service ended without an answer: its
// status was failed, incomplete or cancelled, or the stream carried an
// error event. Code and Message are the service's.
type TurnError struct {
	// ResponseID is the response's id ("" for an error event before one
	// was made).
	ResponseID string
	// Status is the response's status: "failed", "incomplete",
	// "cancelled", or "error" for an error event.
	Status string
	// Code is the service's error code (for an incomplete response, the
	// reason, such as "max_output_tokens").
	Code string
	// Message is the service's error message.
	Message string
}

// Error returns "response <id> <status>: <code>: <message>".
func (e *TurnError) Error() string {
	var b strings.Builder
	b.WriteString("response ")
	if e.ResponseID != "" {
		b.WriteString(e.ResponseID + " ")
	}
	b.WriteString(e.Status)
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// ErrorCode implements [core.Backend]. It classifies, in this order: a
// *[core.Error] by its code; context errors; a *[TurnError] by the
// service's code; an *[openai.Error] or *[azcore.ResponseError] by its
// HTTP status: 400 and 422 InvalidArgument, 401 and 403 PermissionDenied,
// 404 NotFound, 408 DeadlineExceeded, 409 FailedPrecondition, 429
// ResourceExhausted, 502, 503 and 504 Unavailable (retrying later may
// succeed), any other status Unknown. Anything else is Unknown.
func (b *Backend) ErrorCode(err error) core.Code { return errorCode(err) }

func errorCode(err error) core.Code {
	var (
		ce *core.Error
		te *TurnError
		oe *openai.Error
		ae *azcore.ResponseError
	)
	switch {
	case err == nil:
		return core.Unknown
	case errors.As(err, &ce):
		return ce.Code
	case errors.Is(err, context.Canceled):
		return core.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return core.DeadlineExceeded
	case errors.As(err, &te):
		return turnCode(te)
	case errors.As(err, &oe):
		return statusCode(oe.StatusCode)
	case errors.As(err, &ae):
		return statusCode(ae.StatusCode)
	}
	return core.Unknown
}

func statusCode(status int) core.Code {
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return core.InvalidArgument
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return core.PermissionDenied
	case status == http.StatusNotFound:
		return core.NotFound
	case status == http.StatusConflict:
		return core.FailedPrecondition
	case status == http.StatusTooManyRequests:
		return core.ResourceExhausted
	case status == http.StatusRequestTimeout:
		return core.DeadlineExceeded
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return core.Unavailable
	}
	return core.Unknown
}

// turnCode classifies a failed response by the service's code.
func turnCode(e *TurnError) core.Code {
	code := strings.ToLower(e.Code)
	switch {
	case code == "rate_limit_exceeded" || code == "ratelimitreached" || code == "max_output_tokens" || code == "insufficient_quota":
		return core.ResourceExhausted
	case code == "permissiondenied" || code == "unauthorized" || strings.Contains(e.Message, "(PermissionDenied)"):
		return core.PermissionDenied
	case code == "not_found":
		return core.NotFound
	case code == "content_filter" || strings.HasPrefix(code, "invalid_") || strings.HasSuffix(code, "_policy_violation"):
		return core.InvalidArgument
	case code == "server_error":
		return core.Internal
	case e.Status == "cancelled":
		return core.Canceled
	}
	return core.Unknown
}
