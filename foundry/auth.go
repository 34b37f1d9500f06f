package foundry

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/redact"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
)

const (
	module  = "toolrelay/foundry"
	version = "v0"
)

// staticToken is a TokenCredential that returns one bearer token.
type staticToken string

// GetToken returns the token. Its expiry is unknown, so it is said to
// last an hour; the bearer-token policy then asks again and gets the same
// token.
func (t staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(t), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// authPolicy returns the policy that authenticates every request, on both
// clients: a bearer-token policy (which caches the token and refuses
// plain http) or the api-key header. It refuses an http endpoint for
// token authentication.
func authPolicy(o *Options, endpoint *url.URL) (policy.Policy, error) {
	n := 0
	for _, set := range []bool{o.Credential != nil, o.Token != "", o.APIKey != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: set only one of Credential, Token and APIKey")
	}
	if !strings.EqualFold(endpoint.Scheme, "https") {
		what := "token"
		if o.APIKey != "" {
			what = "API key"
		}
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: %s authentication needs an https endpoint, not %q: credentials are never sent over plain http", what, redact.ConnString(endpoint.String()))
	}
	if o.APIKey != "" {
		return runtime.NewKeyCredentialPolicy(azcore.NewKeyCredential(o.APIKey), "api-key", nil), nil
	}
	cred := o.Credential
	switch {
	case o.Token != "":
		cred = staticToken(o.Token)
	case cred == nil:
		c, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: CredentialOptions(o.HTTPClient)})
		if err != nil {
			return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "foundry: default Azure credential", Err: err}
		}
		cred = c
	}
	return runtime.NewBearerTokenPolicy(codedCredential{cred}, []string{Scope}, nil), nil
}

// codedCredential gives the failures of a credential (no credential in
// the environment, a refused client secret, an expired login) the code
// PermissionDenied, which they would otherwise lack: a request that cannot
// be authenticated is refused as one the service refused would be.
type codedCredential struct{ c azcore.TokenCredential }

// GetToken implements azcore.TokenCredential.
func (c codedCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.c.GetToken(ctx, o)
	if err != nil && errcode.Of(err) == errcode.Unknown && ctx.Err() == nil {
		err = &errcode.Error{Code: errcode.PermissionDenied, Op: "foundry: get token", Err: err}
	}
	return tok, err
}

// CredentialOptions returns the azcore client options [Open] gives the
// DefaultAzureCredential it builds (when Options sets no Credential, Token
// or APIKey): its token requests are sent with hc (nil means
// http.DefaultClient), whose redirects to another origin (another scheme,
// host or port: https to http is one) are refused before anything is sent
// there. hc is not modified. Give them to an azidentity credential of your
// own (Options.Credential) for the same guard on its token requests.
func CredentialOptions(hc *http.Client) azcore.ClientOptions {
	return azcore.ClientOptions{Transport: origin.Client(hc)}
}

// newPipeline returns an azcore pipeline that authenticates with auth and
// sends with client. The agents pipeline sends with a copy of client
// whose redirects are checked (see [origin.Client]): net/http would follow
// a redirect to another host, or to http, and send the api-key header
// there. The pipeline for openai-go's requests (forOpenAI) has neither
// retries nor the telemetry (User-Agent) policy, as openai-go retries and
// labels its requests itself, and hands them to client's transport:
// openai-go's own http.Client (redirects, timeouts) already carries them,
// and another http.Client would do that work twice; openai-go refuses
// every request, redirects included, to another origin than its base URL,
// before the pipeline authenticates it.
func newPipeline(auth policy.Policy, client *http.Client, lim wirelimit.Limits, forOpenAI bool) runtime.Pipeline {
	if client == nil {
		client = http.DefaultClient
	}
	co := &policy.ClientOptions{Transport: sender{c: origin.Client(client), lim: lim}}
	if forOpenAI {
		co.Retry.MaxRetries = -1
		co.Telemetry.Disabled = true
		co.Transport = sender{rt: cmp.Or[http.RoundTripper](client.Transport, http.DefaultTransport), lim: lim}
	}
	var perRetry []policy.Policy
	if auth != nil {
		perRetry = append(perRetry, auth)
	}
	return runtime.NewPipeline(module, version, runtime.PipelineOptions{PerRetry: perRetry}, co)
}

// sender is a pipeline's transport: it sends with an http.Client (or, when
// rt is set, with that RoundTripper) under the limits of lim (see
// [wirelimit.Limits.Do]), handing net/http a request's body as
// an in-memory reader. net/http writes the headers of a request whose body
// is of another type (as azcore's are) in a write of their own before the
// body; this way a request goes out in one write, and the server reads it
// in one.
type sender struct {
	c   *http.Client
	rt  http.RoundTripper
	lim wirelimit.Limits
}

// maxInMemoryBody bounds the bodies sender reads into memory first.
const maxInMemoryBody = 1 << 20

// Do implements policy.Transporter.
func (s sender) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength > 0 && r.ContentLength <= maxInMemoryBody {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return s.lim.Do(r, s.send)
}

func (s sender) send(r *http.Request) (*http.Response, error) {
	if s.rt != nil {
		return s.rt.RoundTrip(r)
	}
	return s.c.Do(r)
}

// pipelineTransport is an http.RoundTripper that sends openai-go's
// requests through an azcore pipeline, so that they are authenticated by
// the same policy as the agents requests.
type pipelineTransport struct {
	pl runtime.Pipeline
}

// RoundTrip implements http.RoundTripper.
func (t pipelineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	req, err := runtime.NewRequestFromRequest(r)
	if err != nil {
		return nil, err
	}
	runtime.SkipBodyDownload(req)
	return t.pl.Do(req)
}

// parseEndpoint checks and normalises a project endpoint. Its errors name
// the endpoint redacted.
func parseEndpoint(endpoint string) (*url.URL, error) {
	if endpoint == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: no project endpoint (set AZURE_AI_PROJECT_ENDPOINT to https://<resource>.services.ai.azure.com/api/projects/<project>)")
	}
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: invalid project endpoint %q: want https://<resource>.services.ai.azure.com/api/projects/<project>", redact.ConnString(endpoint))
	}
	if u.RawQuery != "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: project endpoint %q has a query", redact.ConnString(endpoint))
	}
	if u.User != nil {
		return nil, errcode.Errorf(errcode.InvalidArgument, "foundry: project endpoint %q has user information: set Credential, Token or APIKey instead", redact.ConnString(endpoint))
	}
	return u, nil
}
