package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/apierr"
)

// SessionError reports a session the service marked failed
// (agent.session.failed, or status "failed").
type SessionError struct {
	// Session is the session's id.
	Session string
	// Message is the session's error, as the service gave it.
	Message string
}

// Error returns "openai: session <id> failed: <message>".
func (e *SessionError) Error() string {
	if e.Message == "" {
		return "openai: session " + e.Session + " failed"
	}
	return "openai: session " + e.Session + " failed: " + e.Message
}

// UnsupportedActionError reports a required action toolrelay cannot
// perform: function calls, MCP approval requests and requests for a
// browser's access to an origin are answered; a computer-use request to
// sign in (browser_authentication, which asks for credentials, never kept
// by toolrelay) and an environment connection (environment_connection: the
// session waits for its self-hosted environment's executor to connect,
// which no input event answers) need the program's own handling. The turn
// is left waiting; the program answers it (with the SDK, see
// [Backend.Client], or by connecting the environment) or cancels it, and
// a resume (core.Runner.Resume) then goes on. Its Error says which, and
// how.
type UnsupportedActionError struct {
	// Session and Turn locate the action (an environment connection
	// names no turn).
	Session, Turn string
	// Type is the action's type, such as "computer_use_approval_request"
	// or "environment_connection".
	Type string
	// Request is the type of a computer-use request, such as
	// "browser_authentication", or "".
	Request string
	// Origin is the origin a sign-in request is for (its
	// credential_origin), or "".
	Origin string
	// Environment is the id of the environment an environment_connection
	// waits for, or "".
	Environment string
}

// Error describes the action, and what the program does about it.
func (e *UnsupportedActionError) Error() string {
	switch {
	case e.Type == "environment_connection":
		return fmt.Sprintf("openai: unsupported action environment_connection in session %s: the session waits for its environment %s to connect, "+
			"which toolrelay cannot do: start or reconnect the environment's executor (with the session's environment id and an environment key; "+
			"a webhook handler's OnEvent gets agent.session.action_required for it), then resume the run (Runner.Resume); "+
			"the session's state: Backend.Client().Beta.Agents.Sessions.Get", e.Session, e.Environment)
	case e.Request == "browser_authentication":
		return fmt.Sprintf("openai: unsupported action computer_use_approval_request (browser_authentication) in session %s: the browser asks to sign in to %s, "+
			"with credentials toolrelay never holds: answer it with the SDK (Backend.Client().Beta.Agents.Sessions.Events.New, "+
			"an agent.session.input.computer_use_approval_request_result whose response is browser_authentication submit or cancel) "+
			"or cancel the turn, then resume the run (Runner.Resume)", e.Session, e.Origin)
	}
	what := e.Type
	if e.Request != "" {
		what += " (" + e.Request + ")"
	}
	return fmt.Sprintf("openai: unsupported action %s in session %s: toolrelay answers function calls and approvals; "+
		"answer it with the SDK (Backend.Client().Beta.Agents.Sessions.Events.New) or cancel the turn, then resume the run (Runner.Resume)", what, e.Session)
}

// errStreamDropped is wrapped by the error a run returns when the event
// stream dropped more often than Options.MaxReconnects allows.
var errStreamDropped = errors.New("openai: the event stream dropped")

// ErrorCode implements [driver.Backend]. It maps the service's HTTP status
// (from *openai.Error of the SDK), a turn's error code, and this package's
// errors to core codes; see the package documentation.
func (b *Backend) ErrorCode(err error) errcode.Code {
	var (
		api *oai.Error
		te  *driver.TurnError
		se  *SessionError
		ue  *UnsupportedActionError
	)
	switch {
	case errors.As(err, &te):
		return turnCode(te)
	case errors.As(err, &ue):
		return errcode.Unimplemented
	case errors.As(err, &se):
		return errcode.Internal
	case errors.As(err, &api):
		return errcode.FromHTTPStatus(api.StatusCode)
	}
	return errcode.Of(err) // this package's coded errors; else Unknown
}

func turnCode(e *driver.TurnError) errcode.Code {
	switch e.Code {
	case "rate_limit_exceeded", "usage_limit_exceeded", "session_budget_exceeded",
		"project_spend_limit_exceeded", "organization_spend_limit_exceeded",
		"organization_usage_limit_exceeded", "credit_balance_exhausted",
		"context_length_exceeded", "max_output_tokens", "flex_unavailable", "server_overloaded":
		return errcode.ResourceExhausted
	case "authentication_error", "cyber_policy", "misalignment_policy_violation":
		return errcode.PermissionDenied
	case "invalid_request":
		return errcode.InvalidArgument
	case "resource_not_found":
		return errcode.NotFound
	case "budget_reached":
		return errcode.ResourceExhausted
	case "billing_not_active", "active_turn_not_steerable", "executor_version_incompatible":
		return errcode.FailedPrecondition
	case "request_timeout":
		return errcode.DeadlineExceeded
	case "server_error", "internal_error", "sandbox_error", "connection_failed":
		return errcode.Internal
	}
	if e.Status == "cancelled" {
		return errcode.Canceled
	}
	return errcode.Unknown
}

// apiError adds what was being done, and for a refused request what the
// service said, to an SDK error, which stays reachable with errors.As.
func apiError(op string, err error) error {
	if err == nil {
		return nil
	}
	var api *oai.Error
	if !errors.As(err, &api) {
		return fmt.Errorf("openai: %s: %w", op, err)
	}
	switch api.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("openai: %s: authentication failed: the service refused the API key (set OPENAI_API_KEY or Options.APIKey): %w", op, err)
	}
	return fmt.Errorf("openai: %s: %w", op, apierr.WithRefusal(err))
}

// unknownPendingCall reports whether err is the service's refusal of a tool
// result for a call that is not pending, and the call's id.
func unknownPendingCall(err error) (string, bool) {
	var api *oai.Error
	if !errors.As(err, &api) || api.StatusCode != http.StatusBadRequest || api.Code != "invalid_request_error" {
		return "", false
	}
	return strings.CutPrefix(api.Message, "Unknown pending tool call: ")
}

// definitive reports whether err is a refusal that proves the request was
// not applied: a 4xx answer other than those the transport retries.
func definitive(err error) bool {
	var api *oai.Error
	if !errors.As(err, &api) {
		return false
	}
	switch api.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return api.StatusCode >= 400 && api.StatusCode < 500
}

func isNotFound(err error) bool {
	var api *oai.Error
	return errors.As(err, &api) && api.StatusCode == http.StatusNotFound
}
