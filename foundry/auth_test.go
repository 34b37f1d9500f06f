package foundry_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// TestTokenFetchedOnce checks that one token serves every request of both
// clients (agents, conversations, responses), asked for with the Foundry
// scope.
func TestTokenFetchedOnce(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			cred := &countingCredential{}
			var c counter
			tools := toolbox(t, &c)
			opts := options(srv, mode, false)
			opts.Credential = cred
			b, err := foundry.Open(context.Background(), tools, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := newRunner(b, tools, nil)
			for range 3 {
				if _, err := r.Run(context.Background(), "weather?", nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) < 14 {
				t.Fatalf("%d requests, want at least 14", len(reqs))
			}
			if n := cred.n.Load(); n != 1 {
				t.Errorf("GetToken called %d times for %d requests, want 1", n, len(reqs))
			}
			if diff := cmp.Diff([]string{"https://ai.azure.com/.default"}, cred.scopes); diff != "" {
				t.Errorf("scopes mismatch (-want +got):\n%s", diff)
			}
			for _, q := range reqs {
				if got := q.Header.Get("Authorization"); got != "Bearer test-token" {
					t.Errorf("%s %s: Authorization = %q", q.Method, q.Path, got)
				}
			}
		})
	}
}

// TestHTTPRefused checks that credentials are never sent to an http
// endpoint: Open refuses it with a clear error, before any request.
func TestHTTPRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts foundry.Options
	}{
		{"credential", foundry.Options{Credential: &countingCredential{}}},
		{"token", foundry.Options{Token: "secret-token"}},
		{"api key", foundry.Options{APIKey: "secret-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Endpoint = "http://127.0.0.1:1/api/projects/p"
			o.Agent = "a"
			_, err := foundry.Open(context.Background(), nil, &o)
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "needs an https endpoint") {
				t.Fatalf("Open = %v, want InvalidArgument about https", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the credential", err)
			}
			if c, ok := tc.opts.Credential.(*countingCredential); ok && c.n.Load() != 0 {
				t.Errorf("GetToken called %d times", c.n.Load())
			}
		})
	}
}

// TestAgentToken runs with a static bearer token, as AGENT_TOKEN gives
// one; a wrong token is refused with PermissionDenied.
func TestAgentToken(t *testing.T) {
	srv := newFake(t, weatherScript(), &foundrytest.Options{Token: "agent-token-123"})
	var c counter
	tools := toolbox(t, &c)
	opts := options(srv, foundry.Conversation, false)
	opts.Credential, opts.Token = nil, "agent-token-123"
	b := open(t, tools, opts)
	res, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "70f") {
		t.Errorf("answer = %q", res.Text)
	}
	for _, q := range srv.Requests() {
		if got := q.Header.Get("Authorization"); got != "Bearer agent-token-123" {
			t.Errorf("%s %s: Authorization = %q", q.Method, q.Path, got)
		}
	}

	opts.Token = "wrong"
	_, err = foundry.Open(context.Background(), tools, opts)
	var re *azcore.ResponseError
	if errcode.Of(err) != errcode.PermissionDenied || !errors.As(err, &re) || re.StatusCode != 401 {
		t.Fatalf("Open with a wrong token = %v, want PermissionDenied reaching a 401 *azcore.ResponseError", err)
	}
	if got := (&foundry.Backend{}).ErrorCode(err); got != errcode.PermissionDenied {
		t.Errorf("ErrorCode = %v, want PermissionDenied", got)
	}
}

// TestAPIKey authenticates with the api-key header instead of a token.
func TestAPIKey(t *testing.T) {
	srv := newFake(t, weatherScript(), &foundrytest.Options{APIKey: "key-1"})
	var c counter
	tools := toolbox(t, &c)
	opts := options(srv, foundry.Chain, false)
	opts.Credential, opts.APIKey = nil, "key-1"
	b := open(t, tools, opts)
	if _, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range srv.Requests() {
		if q.Header.Get("api-key") != "key-1" || q.Header.Get("Authorization") != "" {
			t.Errorf("%s %s: api-key = %q, Authorization = %q", q.Method, q.Path, q.Header.Get("api-key"), q.Header.Get("Authorization"))
		}
	}
}

// TestOpenErrors checks the errors of bad options and of an unknown
// agent.
func TestOpenErrors(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	base := foundry.Options{Endpoint: srv.ProjectEndpoint(), Credential: &countingCredential{}, HTTPClient: srv.Client(), Logger: discard}
	for _, tc := range []struct {
		name string
		edit func(*foundry.Options)
		code errcode.Code
		msg  string
	}{
		{"no endpoint", func(o *foundry.Options) { o.Endpoint, o.Agent = "", "a" }, errcode.InvalidArgument, "no project endpoint"},
		{"bad endpoint", func(o *foundry.Options) { o.Endpoint, o.Agent = "ftp://x", "a" }, errcode.InvalidArgument, "invalid project endpoint"},
		{"no agent", func(o *foundry.Options) {}, errcode.InvalidArgument, "no agent"},
		{"name too long", func(o *foundry.Options) { o.Agent = strings.Repeat("a", 64) }, errcode.InvalidArgument, "invalid agent name"},
		{"name with a space", func(o *foundry.Options) { o.Agent = "my agent" }, errcode.InvalidArgument, "invalid agent name"},
		{"definition without model", func(o *foundry.Options) { o.Definition = &foundry.AgentDefinition{} }, errcode.InvalidArgument, "no model"},
		{"two credentials", func(o *foundry.Options) { o.Agent, o.Token = "a", "t" }, errcode.InvalidArgument, "only one of"},
		{"bad mode", func(o *foundry.Options) { o.Agent, o.Mode = "a", "threads" }, errcode.InvalidArgument, "unknown mode"},
		{"unknown agent", func(o *foundry.Options) { o.Agent = "nobody" }, errcode.NotFound, "404"},
		{"unknown version", func(o *foundry.Options) { o.Agent, o.AgentVersion = "nobody", "3" }, errcode.NotFound, "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			_, err := foundry.Open(context.Background(), nil, &o)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			code := errcode.Of(err)
			if code == errcode.Unknown {
				code = (&foundry.Backend{}).ErrorCode(err)
			}
			if code != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Open = %v (%v), want %v containing %q", err, code, tc.code, tc.msg)
			}
			if tc.code == errcode.NotFound {
				var re *azcore.ResponseError
				if !errors.As(err, &re) {
					t.Errorf("errors.As(*azcore.ResponseError) failed on %v", err)
				}
			}
		})
	}
}

// failingCredential fails every GetToken after the first ok ones; the
// tokens it gives expire at once, so every request asks again.
type failingCredential struct {
	ok atomic.Int32
}

func (c *failingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if c.ok.Add(-1) >= 0 {
		return azcore.AccessToken{Token: "short-lived", ExpiresOn: time.Now()}, nil
	}
	return azcore.AccessToken{}, errors.New("DefaultAzureCredential: failed to acquire a token: no credential in the environment")
}

// TestCredentialFailure checks that a credential that cannot give a token
// fails opening and running with PermissionDenied, keeping the
// credential's error in the chain.
func TestCredentialFailure(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	tools := toolbox(t, &counter{})
	for _, tc := range []struct {
		name string
		ok   int32 // tokens given before the failures
		edit func(*foundry.Options)
	}{
		{"open, existing agent", 0, func(o *foundry.Options) { o.Definition, o.Agent = nil, "test-agent" }},
		{"open, created version", 0, func(o *foundry.Options) {}},
		{"run", 1, func(o *foundry.Options) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(srv, foundry.Conversation, false)
			cred := &failingCredential{}
			cred.ok.Store(tc.ok)
			o.Credential, o.RequestOptions = cred, noRetries
			tc.edit(o)
			var err error
			b, err := foundry.Open(context.Background(), tools, o)
			if err == nil {
				defer b.Close()
				_, err = newRunner(b, tools, nil).Run(context.Background(), "city?", nil)
			}
			if err == nil {
				t.Fatal("no error")
			}
			code := errcode.Of(err)
			if code == errcode.Unknown && b != nil {
				code = b.ErrorCode(err)
			}
			if code != errcode.PermissionDenied || !strings.Contains(err.Error(), "no credential in the environment") {
				t.Errorf("err = %v (%v), want PermissionDenied with the credential's message", err, code)
			}
		})
	}
}
