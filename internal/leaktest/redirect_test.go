package leaktest

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// answer is a script whose one turn answers at once.
func answer() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "hello"}}}}}
}

// clientCase is one HTTP client the backends build: how to reach it
// through a proxy whose matching requests are redirected, and the secret
// it sends.
type clientCase struct {
	name   string
	secret string
	// upstream starts the real server behind the proxy and returns its
	// URL, a transport that reaches it, and whether the proxy is https.
	upstream func(t *testing.T) (u string, rt http.RoundTripper, tls bool)
	// match selects the requests the proxy redirects.
	match func(path string) bool
	// call makes the client send a matching request through the proxy at
	// base, with hc as the caller's HTTP client; it returns the error of
	// the call.
	call func(ctx context.Context, t *testing.T, base string, hc *http.Client) error
}

func openaiUpstream(t *testing.T) (string, http.RoundTripper, bool) {
	srv := openaitest.NewServer(answer(), nil)
	t.Cleanup(srv.Close)
	return strings.TrimSuffix(srv.URL, "/v1"), srv.Client().Transport, false
}

// foundryUpstream starts a fake project that knows the agent "existing"
// and serves the plain Responses API too.
func foundryUpstream(t *testing.T) (string, http.RoundTripper, bool) {
	srv := foundrytest.NewServer(answer(), &foundrytest.Options{Plain: true})
	t.Cleanup(srv.Close)
	srv.AddAgent("existing", "gpt-4.1-mini")
	return srv.URL, srv.Client().Transport, true
}

const project = "/api/projects/test-project"

// run opens nothing: it runs one turn on b, closing b after.
func run(ctx context.Context, b driver.Backend, err error) error {
	if err != nil {
		return err
	}
	defer b.Close()
	tools, _ := core.NewToolbox()
	_, err = core.NewRunner(b, tools, &core.Options{Logger: discard}).Run(ctx, "hi", nil)
	return err
}

// openFoundry opens the foundry backend on the project behind base, with
// the existing agent.
func openFoundry(ctx context.Context, base string, hc *http.Client, edit func(*foundry.Options)) (*foundry.Backend, error) {
	o := &foundry.Options{
		Endpoint:       base + project,
		Agent:          "existing",
		HTTPClient:     hc,
		RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
		Logger:         discard,
	}
	edit(o)
	return foundry.Open(ctx, nil, o)
}

var clientCases = []clientCase{{
	name:     "openai sessions (openai-go)",
	secret:   "sk-openai-SECRET-1",
	upstream: openaiUpstream,
	match:    func(p string) bool { return p == "/v1/agents" },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		tools, _ := core.NewToolbox()
		b, err := openai.Open(ctx, tools, &openai.Options{
			APIKey:         "sk-openai-SECRET-1",
			BaseURL:        base + "/v1",
			HTTPClient:     hc,
			RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
			Logger:         discard,
		})
		return run(ctx, b, err)
	},
}, {
	name:     "foundry agents pipeline, api key",
	secret:   "foundry-key-SECRET-2",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/agents") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := openFoundry(ctx, base, hc, func(o *foundry.Options) { o.APIKey = "foundry-key-SECRET-2" })
		if err == nil {
			b.Close()
		}
		return err
	},
}, {
	name:     "foundry agents pipeline, bearer token",
	secret:   "foundry-token-SECRET-3",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/agents") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := openFoundry(ctx, base, hc, func(o *foundry.Options) { o.Token = "foundry-token-SECRET-3" })
		if err == nil {
			b.Close()
		}
		return err
	},
}, {
	name:     "foundry agents pipeline, created version",
	secret:   "foundry-key-SECRET-4",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/agents") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := openFoundry(ctx, base, hc, func(o *foundry.Options) {
			o.APIKey, o.Agent, o.Definition = "foundry-key-SECRET-4", "", &foundry.AgentDefinition{Name: "made", Model: "gpt-4.1-mini"}
		})
		if err == nil {
			b.Close()
		}
		return err
	},
}, {
	name:     "foundry responses and conversations (openai-go), api key",
	secret:   "foundry-key-SECRET-5",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/openai/") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := openFoundry(ctx, base, hc, func(o *foundry.Options) { o.APIKey = "foundry-key-SECRET-5" })
		return run(ctx, b, err)
	},
}, {
	name:     "foundry responses chain (openai-go), bearer token",
	secret:   "foundry-token-SECRET-6",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/openai/") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := openFoundry(ctx, base, hc, func(o *foundry.Options) { o.Token, o.Mode = "foundry-token-SECRET-6", foundry.Chain })
		return run(ctx, b, err)
	},
}, {
	name:     "responses backend (openai-go)",
	secret:   "sk-responses-SECRET-7",
	upstream: foundryUpstream,
	match:    func(p string) bool { return strings.Contains(p, "/responses") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		b, err := trresponses.Open(ctx, nil, &trresponses.Options{
			BaseURL:        base + project + "/openai/v1/",
			APIKey:         "sk-responses-SECRET-7",
			Model:          "gpt-4.1-mini",
			HTTPClient:     hc,
			RequestOptions: []option.RequestOption{option.WithMaxRetries(0)},
			Logger:         discard,
		})
		return run(ctx, b, err)
	},
}, {
	// The token requests of the DefaultAzureCredential Open builds: the
	// test cannot build one (its managed-identity probe leaves the
	// machine), so it gives the same client options to the credential
	// DefaultAzureCredential would pick from AZURE_CLIENT_SECRET.
	name:   "token fetch (azidentity, foundry.CredentialOptions)",
	secret: "client-SECRET-8",
	upstream: func(t *testing.T) (string, http.RoundTripper, bool) {
		a := newAuthority(t, "client-SECRET-8", "token-from-authority")
		return a.URL, a.Client().Transport, true
	},
	match: func(p string) bool { return strings.HasSuffix(p, "/token") },
	call: func(ctx context.Context, t *testing.T, base string, hc *http.Client) error {
		co := foundry.CredentialOptions(hc)
		co.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: base + "/"}
		co.Retry.MaxRetries = -1
		cred, err := azidentity.NewClientSecretCredential(tenant, "client-id", "client-SECRET-8", &azidentity.ClientSecretCredentialOptions{
			ClientOptions:            co,
			DisableInstanceDiscovery: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{foundry.Scope}})
		if err == nil && tok.Token != "token-from-authority" {
			t.Errorf("token %q, want the authority's", tok.Token)
		}
		if err != nil {
			// The code the foundry backend gives a credential's error.
			var fb foundry.Backend
			err = &errcode.Error{Code: fb.ErrorCode(err), Op: "get token", Err: err}
		}
		return err
	},
}}

// TestRedirects checks every HTTP client the backends build against a
// service that redirects its requests: to plain http on another origin,
// to https on another origin, and to the same origin. A redirect to
// another origin must fail the call with an error that says so, and the
// other origin must receive nothing (so no Authorization or api-key
// header, no client secret); a redirect within the origin is followed.
// The caller's HTTP client follows every redirect, and must not reopen
// what the backends close. The error's code is PermissionDenied on every
// client (openai-go's and azcore's alike).
func TestRedirects(t *testing.T) {
	for _, cc := range clientCases {
		for _, target := range []string{"http other origin", "https other origin", "same origin"} {
			t.Run(cc.name+"/"+target, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				up, rt, tls := cc.upstream(t)
				p := newProxy(t, tls, up, rt, cc.match)
				var other *recorder
				switch target {
				case "http other origin":
					other = newRecorder(t, false)
					u, _ := url.Parse(other.URL)
					p.redirect = "http://localhost:" + u.Port()
				case "https other origin":
					other = newRecorder(t, true)
					p.redirect = other.URL
				default:
					p.redirect = p.URL + "/fwd"
				}
				hc := trustingClient(t, foundryCertificate(t))
				err := cc.call(ctx, t, p.URL, hc)
				if p.redirected.Load() == 0 {
					t.Fatalf("call = %v, and the proxy redirected no request", err)
				}
				if other == nil {
					if err != nil || p.forwarded.Load() == 0 {
						t.Fatalf("a redirect within the origin: call = %v, %d requests followed it; want success", err, p.forwarded.Load())
					}
					return
				}
				t.Logf("error: %v", err)
				if n := p.redirected.Load(); n != 1 {
					t.Errorf("the proxy redirected %d requests, want 1: a refused redirect is not retried", n)
				}
				if err == nil || !strings.Contains(err.Error(), "origin") {
					t.Errorf("call = %v, want an error saying the redirect leaves the origin", err)
				}
				if code := errcode.Of(err); code != errcode.PermissionDenied {
					t.Errorf("call = %v, of code %v; want PermissionDenied, on every client", err, code)
				}
				if err != nil && strings.Contains(err.Error(), cc.secret) {
					t.Errorf("the error shows the secret: %v", err)
				}
				for _, r := range other.requests() {
					t.Errorf("the other origin received %s %s (Authorization %q, api-key %q, body with the secret: %v)",
						r.Method, r.Path, r.Header.Get("Authorization"), r.Header.Get("api-key"), strings.Contains(r.Body, cc.secret))
				}
			})
		}
	}
}

// foundryCertificate returns the fake project's certificate (the same for
// every fake project).
func foundryCertificate(t *testing.T) []byte {
	t.Helper()
	srv := foundrytest.NewServer(answer(), nil)
	defer srv.Close()
	return srv.CertificatePEM()
}
