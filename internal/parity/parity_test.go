package parity_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	oai "github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/openai"
)

// TestStatusCodes sweeps every HTTP error status through both backends'
// ErrorCode, for every error type their SDKs return: each gives the code
// of errcode.FromHTTPStatus, so a status means the same on both sides.
func TestStatusCodes(t *testing.T) {
	var ob openai.Backend
	var fb foundry.Backend
	for status := 400; status < 600; status++ {
		want := errcode.FromHTTPStatus(status)
		for _, tc := range []struct {
			name string
			got  errcode.Code
		}{
			{"openai, *openai.Error", ob.ErrorCode(&oai.Error{StatusCode: status})},
			{"foundry, *openai.Error", fb.ErrorCode(&oai.Error{StatusCode: status})},
			{"foundry, *azcore.ResponseError", fb.ErrorCode(&azcore.ResponseError{StatusCode: status})},
		} {
			if tc.got != want {
				t.Errorf("%s: status %d = %v, want %v", tc.name, status, tc.got, want)
			}
		}
	}
	// The statuses the issue tracker found disagreeing or unmapped.
	for status, want := range map[int]errcode.Code{
		http.StatusRequestTimeout:     errcode.DeadlineExceeded,
		http.StatusServiceUnavailable: errcode.Unavailable,
		http.StatusUnauthorized:       errcode.PermissionDenied,
	} {
		if got := errcode.FromHTTPStatus(status); got != want {
			t.Errorf("FromHTTPStatus(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestSameNames checks that the options and methods of both backends
// name the same concepts the same way.
func TestSameNames(t *testing.T) {
	fields := []string{"Agent", "Delivery", "HTTPClient", "RequestOptions", "Keep", "Logger"}
	methods := []string{"Agent", "MissingTools", "Client", "ErrorCode", "Capabilities", "Close"}
	for _, tc := range []struct {
		name    string
		options reflect.Type
		backend reflect.Type
	}{
		{"openai", reflect.TypeFor[openai.Options](), reflect.TypeFor[*openai.Backend]()},
		{"foundry", reflect.TypeFor[foundry.Options](), reflect.TypeFor[*foundry.Backend]()},
	} {
		for _, f := range fields {
			if _, ok := tc.options.FieldByName(f); !ok {
				t.Errorf("%s.Options has no field %s", tc.name, f)
			}
		}
		for _, m := range methods {
			if _, ok := tc.backend.MethodByName(m); !ok {
				t.Errorf("%s.Backend has no method %s", tc.name, m)
			}
		}
	}
	// Streaming is a transport of both; the default of each is the empty
	// value, and the other spellings are refused at Open.
	if openai.Streaming != "streaming" || foundry.Streaming != "streaming" {
		t.Errorf("Streaming = %q (openai), %q (foundry), want \"streaming\" on both", openai.Streaming, foundry.Streaming)
	}
	for _, old := range []string{"AgentID", "AgentName", "Polling", "Stream"} {
		for _, typ := range []reflect.Type{reflect.TypeFor[openai.Options](), reflect.TypeFor[foundry.Options]()} {
			if _, ok := typ.FieldByName(old); ok {
				t.Errorf("%v still has the field %s", typ, old)
			}
		}
	}
}

// TestUnknownDelivery checks that both backends refuse a delivery they
// do not have, before sending anything.
func TestUnknownDelivery(t *testing.T) {
	ctx := t.Context()
	_, oerr := openai.Open(ctx, nil, &openai.Options{APIKey: "k", BaseURL: "https://openai.invalid/v1", Delivery: "blocking"})
	_, ferr := foundry.Open(ctx, nil, &foundry.Options{Endpoint: "https://foundry.invalid/api/projects/p", Token: "t", Agent: "a", Delivery: "polling"})
	for name, err := range map[string]error{"openai": oerr, "foundry": ferr} {
		if errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("%s: Open with an unknown delivery = %v, want InvalidArgument", name, err)
		}
	}
}
