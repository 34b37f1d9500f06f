package foundry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
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
		code   errcode.Code
		check  func(t *testing.T, err error)
	}{
		{
			name:   "rate limited past the retries",
			faults: []foundrytest.Fault{{Status: 429}, {Status: 429}, {Status: 429}},
			code:   errcode.ResourceExhausted,
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
			code:   errcode.Internal,
		},
		{
			name:   "unauthorized",
			faults: []foundrytest.Fault{{Status: 401, Message: "The principal lacks the required data action"}},
			code:   errcode.PermissionDenied,
		},
		{
			name:   "failed response",
			faults: []foundrytest.Fault{{Failed: true, Code: "rate_limit_exceeded", Message: "slow down"}},
			code:   errcode.ResourceExhausted,
			check: func(t *testing.T, err error) {
				var te *driver.TurnError
				if !errors.As(err, &te) || te.Status != "failed" || te.Code != "rate_limit_exceeded" || te.Message != "slow down" || te.Turn == "" || te.Thread == "" || te.Backend != "foundry" {
					t.Errorf("errors.As(*TurnError) = %+v", te)
				}
			},
		},
		{
			name:   "response.failed event",
			stream: true,
			faults: []foundrytest.Fault{{Failed: true, Code: "server_error", Message: "boom"}},
			code:   errcode.Internal,
		},
		{
			name:   "error event",
			stream: true,
			faults: []foundrytest.Fault{{ErrorEvent: true, Code: "server_error", Message: "(PermissionDenied) no access"}},
			code:   errcode.PermissionDenied,
			check: func(t *testing.T, err error) {
				var te *driver.TurnError
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
			if tc.code == errcode.Unknown && tc.check == nil && len(tc.faults) == 2 {
				if err != nil || res.Text != weatherAnswer {
					t.Fatalf("Run = %v, %v; want the answer after retries", res, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Run succeeded")
			}
			if got := errcode.Of(err); got != tc.code {
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
		want errcode.Code
	}{
		{nil, errcode.Unknown},
		{errors.New("x"), errcode.Unknown},
		{context.Canceled, errcode.Canceled},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), errcode.DeadlineExceeded},
		{errcode.Errorf(errcode.FailedPrecondition, "x"), errcode.FailedPrecondition},
		{oai(400), errcode.InvalidArgument},
		{oai(401), errcode.PermissionDenied},
		{oai(403), errcode.PermissionDenied},
		{fmt.Errorf("create a conversation: %w", oai(404)), errcode.NotFound},
		{oai(409), errcode.FailedPrecondition},
		{oai(429), errcode.ResourceExhausted},
		{oai(408), errcode.DeadlineExceeded},
		{oai(422), errcode.InvalidArgument},
		{oai(500), errcode.Internal},
		{oai(501), errcode.Unimplemented},
		{oai(502), errcode.Unavailable},
		{oai(503), errcode.Unavailable},
		{oai(504), errcode.Unavailable},
		{az(400), errcode.InvalidArgument},
		{az(401), errcode.PermissionDenied},
		{az(404), errcode.NotFound},
		{az(http.StatusRequestTimeout), errcode.DeadlineExceeded},
		{az(http.StatusTooManyRequests), errcode.ResourceExhausted},
		{az(http.StatusBadGateway), errcode.Unavailable},
		{az(http.StatusServiceUnavailable), errcode.Unavailable},
		{fmt.Errorf("agent version: %w", az(http.StatusGatewayTimeout)), errcode.Unavailable},
		{az(http.StatusInternalServerError), errcode.Internal},
		{&driver.TurnError{Status: "failed", Code: "rate_limit_exceeded"}, errcode.ResourceExhausted},
		{&driver.TurnError{Status: "failed", Code: "server_error"}, errcode.Internal},
		{&driver.TurnError{Status: "failed", Code: "invalid_prompt"}, errcode.InvalidArgument},
		{&driver.TurnError{Status: "failed", Code: "bio_policy_violation"}, errcode.InvalidArgument},
		{&driver.TurnError{Status: "incomplete", Code: "max_output_tokens"}, errcode.ResourceExhausted},
		{&driver.TurnError{Status: "incomplete", Code: "content_filter"}, errcode.InvalidArgument},
		{&driver.TurnError{Status: "cancelled"}, errcode.Canceled},
		{&driver.TurnError{Status: "error", Code: "server_error", Message: "(PermissionDenied) x"}, errcode.PermissionDenied},
		{&driver.TurnError{Status: "failed", Code: "mystery"}, errcode.Unknown},
	} {
		if got := b.ErrorCode(tc.err); got != tc.want {
			t.Errorf("ErrorCode(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestTurnErrorMessage checks the text of a TurnError.
func TestTurnErrorMessage(t *testing.T) {
	e := &driver.TurnError{Backend: "foundry", Thread: "conv_1", Turn: "resp_1", Status: "failed", Code: "server_error", Message: "boom"}
	if got, want := e.Error(), "foundry: turn resp_1 failed (thread conv_1): server_error: boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
