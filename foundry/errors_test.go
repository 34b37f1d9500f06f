package foundry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// TestRunErrors injects service failures into the request that sends the
// first results, and checks the run's error: its code, that the SDK's
// error or the service's code and message stay reachable, and that the
// thread can be resumed.
func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		faults []foundrytest.Fault
		code   core.Code
		check  func(t *testing.T, err error)
	}{
		{
			name:   "rate limited past the retries",
			faults: []foundrytest.Fault{{Status: 429}, {Status: 429}, {Status: 429}},
			code:   core.ResourceExhausted,
			check: func(t *testing.T, err error) {
				var oe *openai.Error
				if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "rate_limit_exceeded" {
					t.Errorf("errors.As(*openai.Error) = %v", oe)
				}
			},
		},
		{
			name:   "rate limited, then served",
			faults: []foundrytest.Fault{{Status: 429}, {Status: 500}},
		},
		{
			name:   "server errors past the retries",
			faults: []foundrytest.Fault{{Status: 503, NoRetryAfter: true}, {Status: 500}, {Status: 500}},
			code:   core.Unknown,
		},
		{
			name:   "unauthorized",
			faults: []foundrytest.Fault{{Status: 401, Message: "The principal lacks the required data action"}},
			code:   core.PermissionDenied,
		},
		{
			name:   "failed response",
			faults: []foundrytest.Fault{{Failed: true, Code: "rate_limit_exceeded", Message: "slow down"}},
			code:   core.ResourceExhausted,
			check: func(t *testing.T, err error) {
				var te *foundry.TurnError
				if !errors.As(err, &te) || te.Status != "failed" || te.Code != "rate_limit_exceeded" || te.Message != "slow down" || te.ResponseID == "" {
					t.Errorf("errors.As(*TurnError) = %+v", te)
				}
			},
		},
		{
			name:   "response.failed event",
			stream: true,
			faults: []foundrytest.Fault{{Failed: true, Code: "server_error", Message: "boom"}},
			code:   core.Internal,
		},
		{
			name:   "error event",
			stream: true,
			faults: []foundrytest.Fault{{ErrorEvent: true, Code: "server_error", Message: "(PermissionDenied) no access"}},
			code:   core.PermissionDenied,
			check: func(t *testing.T, err error) {
				var te *foundry.TurnError
				if !errors.As(err, &te) || te.Status != "error" || te.Code != "server_error" {
					t.Errorf("errors.As(*TurnError) = %+v", te)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			srv.InjectFault(foundrytest.OpCreateResponse, append([]foundrytest.Fault{{}}, tc.faults...)...)
			var c counter
			tools := toolbox(t, &c)
			b := open(t, tools, options(srv, foundry.Conversation, tc.stream))
			res, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil)
			if tc.code == core.Unknown && tc.check == nil && len(tc.faults) == 2 {
				if err != nil || res.Text != weatherAnswer {
					t.Fatalf("Run = %v, %v; want the answer after retries", res, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Run succeeded")
			}
			if got := core.CodeOf(err); got != tc.code {
				t.Errorf("code = %v, want %v (%v)", got, tc.code, err)
			}
			if res == nil || res.Thread == "" {
				t.Errorf("no thread to resume: %+v", res)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

// TestErrorCode checks the classification of errors.
func TestErrorCode(t *testing.T) {
	var b foundry.Backend
	oai := func(status int) error { return &openai.Error{StatusCode: status} }
	az := func(status int) error { return &azcore.ResponseError{StatusCode: status} }
	for _, tc := range []struct {
		err  error
		want core.Code
	}{
		{nil, core.Unknown},
		{errors.New("x"), core.Unknown},
		{context.Canceled, core.Canceled},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), core.DeadlineExceeded},
		{core.Errorf(core.FailedPrecondition, "x"), core.FailedPrecondition},
		{oai(400), core.InvalidArgument},
		{oai(401), core.PermissionDenied},
		{oai(403), core.PermissionDenied},
		{fmt.Errorf("create a conversation: %w", oai(404)), core.NotFound},
		{oai(409), core.FailedPrecondition},
		{oai(429), core.ResourceExhausted},
		{oai(408), core.DeadlineExceeded},
		{oai(422), core.InvalidArgument},
		{oai(500), core.Unknown},
		{oai(501), core.Unknown},
		{oai(502), core.Unavailable},
		{oai(503), core.Unavailable},
		{oai(504), core.Unavailable},
		{az(400), core.InvalidArgument},
		{az(401), core.PermissionDenied},
		{az(404), core.NotFound},
		{az(http.StatusRequestTimeout), core.DeadlineExceeded},
		{az(http.StatusTooManyRequests), core.ResourceExhausted},
		{az(http.StatusBadGateway), core.Unavailable},
		{az(http.StatusServiceUnavailable), core.Unavailable},
		{fmt.Errorf("agent version: %w", az(http.StatusGatewayTimeout)), core.Unavailable},
		{az(http.StatusInternalServerError), core.Unknown},
		{&foundry.TurnError{Status: "failed", Code: "rate_limit_exceeded"}, core.ResourceExhausted},
		{&foundry.TurnError{Status: "failed", Code: "server_error"}, core.Internal},
		{&foundry.TurnError{Status: "failed", Code: "invalid_prompt"}, core.InvalidArgument},
		{&foundry.TurnError{Status: "failed", Code: "bio_policy_violation"}, core.InvalidArgument},
		{&foundry.TurnError{Status: "incomplete", Code: "max_output_tokens"}, core.ResourceExhausted},
		{&foundry.TurnError{Status: "incomplete", Code: "content_filter"}, core.InvalidArgument},
		{&foundry.TurnError{Status: "cancelled"}, core.Canceled},
		{&foundry.TurnError{Status: "error", Code: "server_error", Message: "(PermissionDenied) x"}, core.PermissionDenied},
		{&foundry.TurnError{Status: "failed", Code: "mystery"}, core.Unknown},
	} {
		if got := b.ErrorCode(tc.err); got != tc.want {
			t.Errorf("ErrorCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestTurnErrorMessage checks the text of a TurnError.
func TestTurnErrorMessage(t *testing.T) {
	e := &foundry.TurnError{ResponseID: "resp_1", Status: "failed", Code: "server_error", Message: "boom"}
	if got, want := e.Error(), "response resp_1 failed: server_error: boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
