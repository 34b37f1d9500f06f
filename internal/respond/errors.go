package respond

import (
	"errors"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// ErrorCode classifies an error of the loop, for the backends' ErrorCode,
// in this order: a *[errcode.Error] by its code; context errors; a
// *[driver.TurnError] by the service's code; an *[openai.Error] by its
// HTTP status, with [errcode.FromHTTPStatus] (502, 503 and 504 are
// Unavailable: retrying later may succeed). Anything else is Unknown.
func ErrorCode(err error) errcode.Code {
	var (
		te *driver.TurnError
		oe *openai.Error
	)
	switch {
	case err == nil:
		return errcode.Unknown
	case errcode.Of(err) != errcode.Unknown: // a code of ours, or a context error
		return errcode.Of(err)
	case errors.As(err, &te):
		return turnCode(te)
	case errors.As(err, &oe):
		return errcode.FromHTTPStatus(oe.StatusCode)
	}
	return errcode.Unknown
}

// turnCode classifies a failed response by the service's code.
func turnCode(e *driver.TurnError) errcode.Code {
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
