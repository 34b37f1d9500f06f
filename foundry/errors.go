package foundry

import (
	"errors"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/errcode"
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

// ErrorCode implements [driver.Backend]. It classifies, in this order: a
// *[errcode.Error] by its code; context errors; a *[TurnError] by the
// service's code; an *[openai.Error] or *[azcore.ResponseError] by its
// HTTP status: 400 and 422 InvalidArgument, 401 and 403 PermissionDenied,
// 404 NotFound, 408 DeadlineExceeded, 409 FailedPrecondition, 429
// ResourceExhausted, 502, 503 and 504 Unavailable (retrying later may
// succeed), any other status Unknown. Anything else is Unknown.
func (b *Backend) ErrorCode(err error) errcode.Code { return errorCode(err) }

func errorCode(err error) errcode.Code {
	var (
		te *TurnError
		oe *openai.Error
		ae *azcore.ResponseError
	)
	switch {
	case err == nil:
		return errcode.Unknown
	case errcode.Of(err) != errcode.Unknown: // a code of ours, or a context error
		return errcode.Of(err)
	case errors.As(err, &te):
		return turnCode(te)
	case errors.As(err, &oe):
		return statusCode(oe.StatusCode)
	case errors.As(err, &ae):
		return statusCode(ae.StatusCode)
	}
	return errcode.Unknown
}

func statusCode(status int) errcode.Code {
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return errcode.InvalidArgument
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return errcode.PermissionDenied
	case status == http.StatusNotFound:
		return errcode.NotFound
	case status == http.StatusConflict:
		return errcode.FailedPrecondition
	case status == http.StatusTooManyRequests:
		return errcode.ResourceExhausted
	case status == http.StatusRequestTimeout:
		return errcode.DeadlineExceeded
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// turnCode classifies a failed response by the service's code.
func turnCode(e *TurnError) errcode.Code {
	code := strings.ToLower(e.Code)
	switch {
	case code == "rate_limit_exceeded" || code == "ratelimitreached" || code == "max_output_tokens" || code == "insufficient_quota":
		return errcode.ResourceExhausted
	case code == "permissiondenied" || code == "unauthorized" || strings.Contains(e.Message, "(PermissionDenied)"):
		return errcode.PermissionDenied
	case code == "not_found":
		return errcode.NotFound
	case code == "content_filter" || strings.HasPrefix(code, "invalid_") || strings.HasSuffix(code, "_policy_violation"):
		return errcode.InvalidArgument
	case code == "server_error":
		return errcode.Internal
	case e.Status == "cancelled":
		return errcode.Canceled
	}
	return errcode.Unknown
}
