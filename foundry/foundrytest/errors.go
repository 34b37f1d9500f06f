package foundrytest

import (
	"fmt"
	"net/http"

	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// apiError is an error answer of the fake, in the service's envelope:
// {"error": {"code", "message", "param", "type"}}.
type apiError struct {
	Status  int
	Code    string // "" is sent as null
	Message string
	Param   string // "" is sent as null
	Type    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func (e *apiError) body(requestID string) []byte {
	typ := e.Type
	if typ == "" {
		typ = "invalid_request_error"
	}
	msg := e.Message
	if requestID != "" {
		msg += " [Request ID: " + requestID + "]"
	}
	return fakeapi.Envelope(typ, e.Code, e.Param, msg, map[string]any{"details": []any{}, "additionalInfo": map[string]any{"request_id": requestID}})
}

// The messages of the refusals the fake reproduces, as the service words
// them.
const (
	msgAgentDeprecated  = "The 'agent' property is deprecated. Use 'agent_reference' instead."
	msgNotAllowed       = "Not allowed when agent is specified."
	msgSchema           = "The provided data does not match the expected schema"
	msgBothThreads      = "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'."
	msgNoToolCallFormat = "No tool call found for function call output with call_id %s."
	msgNoToolOutFormat  = "No tool output found for function call %s."
)

func schemaError(param string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_payload", Message: msgSchema, Param: param}
}

func badRequest(code, param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

func unauthorized(msg string) *apiError {
	return &apiError{Status: http.StatusUnauthorized, Code: "PermissionDenied", Message: msg, Type: "authentication_error"}
}

func noToolCall(callID string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(msgNoToolCallFormat, callID), Param: "input"}
}

func noToolOutput(callID string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(msgNoToolOutFormat, callID), Param: "input"}
}

// scriptError reports a problem of the model script (the test's, not the
// client's): the script has no such turn or step, or the input is not the
// one it expects.
func scriptError(err error) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "fake_script_error", Message: "foundrytest: " + err.Error(), Type: "server_error"}
}
