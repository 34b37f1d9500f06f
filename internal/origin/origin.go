// Package origin keeps credentials on the origin they were configured for.
// The HTTP clients the backends build refuse a redirect to another origin
// (scheme, host and port: a move from https to http is one) before they
// send anything there, and credentials go over plain http only to a
// loopback host, where the embedded fakes run.
package origin

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/redact"
)

// Same reports whether a and b have the same origin: scheme and host (in
// any case) and port (the scheme's default when none is written).
func Same(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// Of returns u's origin, "scheme://host[:port]", for messages: no user
// information, path, query or fragment.
func Of(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + u.Host
}

// Loopback reports whether host (a URL's Hostname) names this machine:
// "localhost", or an address in 127.0.0.0/8 or ::1.
func Loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RedirectError is a redirect refused because it leads to another origin
// than the one the request was made for. From and To are the two origins
// (see [Of]).
type RedirectError struct {
	From, To string
}

// Error says which redirect was refused, and why.
func (e *RedirectError) Error() string {
	return fmt.Sprintf("refused a redirect from %s to %s: credentials are sent only to the origin they were configured for", e.From, e.To)
}

// NonRetriable tells azcore's retry policy not to send the request again:
// it would be redirected again.
func (e *RedirectError) NonRetriable() {}

// Unwrap returns errcode.PermissionDenied, so that errcode.Of and the
// backends' ErrorCode classify the error as PermissionDenied: the request
// could not be sent with its credentials.
func (e *RedirectError) Unwrap() error { return errcode.PermissionDenied }

// maxRedirects is net/http's own limit, which a CheckRedirect of its own
// replaces.
const maxRedirects = 10

// CheckRedirect returns an http.Client CheckRedirect function that refuses
// a redirect whose target is not of the origin of the first request, with
// a *[RedirectError] (code PermissionDenied), and otherwise defers to next (nil: net/http's default, at most 10
// redirects). The refused request is never sent.
func CheckRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; !Same(req.URL, first) {
			return &RedirectError{From: Of(first), To: Of(req.URL)}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

// Client returns a copy of c (nil means http.DefaultClient) whose
// redirects are checked by [CheckRedirect] before c's own CheckRedirect
// sees them. c is not modified; the copy shares its Transport and Jar.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	g := *c
	g.CheckRedirect = CheckRedirect(c.CheckRedirect)
	return &g
}

// CheckBaseURL checks a service's base URL (what names it, such as
// "openai: base URL", prefixes the error): it must be an absolute http or
// https URL without user information, and, when the requests will carry a credential (withKey), an
// https one unless its host is loopback. It returns a *[errcode.Error] of code
// InvalidArgument that names the URL redacted ([redact.ConnString]).
func CheckBaseURL(what, rawURL string, withKey bool) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (!strings.EqualFold(u.Scheme, "https") && !strings.EqualFold(u.Scheme, "http")) {
		return errcode.Errorf(errcode.InvalidArgument, "%s %q is not an http or https URL", what, redact.ConnString(rawURL))
	}
	if u.User != nil {
		return errcode.Errorf(errcode.InvalidArgument, "%s %q has user information: credentials go in the API key setting, not in the URL", what, redact.ConnString(rawURL))
	}
	if withKey && !strings.EqualFold(u.Scheme, "https") && !Loopback(u.Hostname()) {
		return errcode.Errorf(errcode.InvalidArgument, "%s %q is plain http to a host that is not loopback: an API key is sent only over https (or to 127.0.0.1, ::1 or localhost)", what, redact.ConnString(rawURL))
	}
	return nil
}

// CheckOpenAIBaseURL checks, with [CheckBaseURL], the base URL an openai-go
// client will use: baseURL, or OPENAI_BASE_URL when it is empty (neither
// means openai-go's https default, which needs no check), with a key when
// apiKey or OPENAI_API_KEY is set.
func CheckOpenAIBaseURL(what, baseURL, apiKey string) error {
	baseURL = cmp.Or(baseURL, os.Getenv("OPENAI_BASE_URL"))
	if baseURL == "" {
		return nil
	}
	return CheckBaseURL(what, baseURL, cmp.Or(apiKey, os.Getenv("OPENAI_API_KEY")) != "")
}

// OpenAIHost is the host of openai-go's default base URL: the OpenAI API.
const OpenAIHost = "api.openai.com"

// ErrNoKey is matched (errors.Is) by the error of a client that would send
// a request to the OpenAI API without a key.
var ErrNoKey = errors.New("no API key: set OPENAI_API_KEY (or the backend's APIKey option)")

// RequireOpenAIKey returns a *[errcode.Error] of code FailedPrecondition,
// wrapping [ErrNoKey] (which names OPENAI_API_KEY), when an openai-go
// client would send its requests to the OpenAI API (no base URL: neither
// baseURL nor OPENAI_BASE_URL) without a key (neither apiKey nor
// OPENAI_API_KEY) and no request options (optioned) that may set one.
// [Middleware] refuses such a request when request options hid it here.
func RequireOpenAIKey(what, baseURL, apiKey string, optioned bool) error {
	if optioned || cmp.Or(baseURL, os.Getenv("OPENAI_BASE_URL"), apiKey, os.Getenv("OPENAI_API_KEY")) != "" {
		return nil
	}
	return &errcode.Error{Code: errcode.FailedPrecondition, Op: what, Err: ErrNoKey}
}

// ErrPlainHTTP is matched (errors.Is) by the error of [Middleware] for a
// request it refused to send.
var ErrPlainHTTP = errors.New("credentials are sent over plain http only to a loopback host")

// Middleware is an openai-go middleware (option.WithMiddleware takes it)
// that refuses to send a request that carries a credential (an
// Authorization or api-key header) over plain http to a host that is not
// loopback (a *[errcode.Error] of code InvalidArgument wrapping
// [ErrPlainHTTP]), and one to the OpenAI API that carries none (code
// FailedPrecondition, wrapping [ErrNoKey]). It guards what
// [CheckBaseURL] and [RequireOpenAIKey] cannot see at Open: a base URL or
// key set by request options.
func Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	keyed := req.Header.Get("Authorization") != "" || req.Header.Get("api-key") != ""
	var err error
	switch {
	case !strings.EqualFold(req.URL.Scheme, "https") && !Loopback(req.URL.Hostname()) && keyed:
		err = &errcode.Error{Code: errcode.InvalidArgument, Err: fmt.Errorf("%w: refused to send a request to %s", ErrPlainHTTP, Of(req.URL))}
	case strings.EqualFold(req.URL.Hostname(), OpenAIHost) && !keyed:
		err = &errcode.Error{Code: errcode.FailedPrecondition, Err: fmt.Errorf("%w: refused to send a request to %s", ErrNoKey, Of(req.URL))}
	default:
		return next(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, err
}
