package leaktest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// recorded is a request a test server received.
type recorded struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// recorder is a test server that records every request and answers 200
// with an empty JSON object.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t *testing.T, tls bool) *recorder {
	t.Helper()
	r := &recorder{}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Clone(), string(body)})
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	})
	if tls {
		r.Server = httptest.NewTLSServer(h)
	} else {
		r.Server = httptest.NewServer(h)
	}
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// proxy is a server in front of an upstream: a request whose path match
// selects is answered 307 to redirect + its path and query; a request
// under /fwd/ is forwarded with that prefix removed (the target of a
// same-origin redirect); any other is forwarded as it is.
type proxy struct {
	*httptest.Server
	redirect string
	// redirected and forwarded count the requests redirected, and those
	// that came back under /fwd/.
	redirected, forwarded atomic.Int32
}

func newProxy(t *testing.T, tls bool, upstream string, rt http.RoundTripper, match func(path string) bool) *proxy {
	t.Helper()
	up, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	fwd := httputil.NewSingleHostReverseProxy(up)
	fwd.Transport = rt
	p := &proxy{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/fwd/"); ok {
			p.forwarded.Add(1)
			r.URL.Path = "/" + rest
			r.URL.RawPath = ""
			fwd.ServeHTTP(w, r)
			return
		}
		if match(r.URL.Path) {
			p.redirected.Add(1)
			target := p.redirect + r.URL.Path
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", target)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		fwd.ServeHTTP(w, r)
	})
	if tls {
		p.Server = httptest.NewTLSServer(h)
	} else {
		p.Server = httptest.NewServer(h)
	}
	t.Cleanup(p.Close)
	return p
}

// trustingClient returns an HTTP client that trusts httptest's
// certificate and the PEM certificates given, and whose CheckRedirect
// follows every redirect: a caller's client must not reopen what the
// backends close.
func trustingClient(t *testing.T, pems ...[]byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	probe := httptest.NewTLSServer(http.NotFoundHandler())
	pool.AddCert(probe.Certificate())
	probe.Close()
	for _, p := range pems {
		b, _ := pem.Decode(p)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		pool.AddCert(c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
}

// newAuthority starts a fake Microsoft Entra ID authority, enough for
// azidentity's ClientSecretCredential: the tenant's OpenID configuration,
// and a token endpoint that gives token for the client secret secret.
func newAuthority(t *testing.T, secret, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "https://" + r.Host + "/" + tenant
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
			fmt.Fprintf(w, `{"token_endpoint":%q,"authorization_endpoint":%q,"issuer":%q}`,
				base+"/oauth2/v2.0/token", base+"/oauth2/v2.0/authorize", base+"/v2.0")
		case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
			if err := r.ParseForm(); err != nil || r.PostForm.Get("client_secret") != secret {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}`)
				return
			}
			fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":3600,"access_token":%q}`, token)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tenant is the tenant of the fake authority.
const tenant = "00000000-0000-0000-0000-000000000001"

// discard is a logger that writes nothing.
var discard = slog.New(slog.DiscardHandler)
