package mcptools

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolrelay/toolrelay/internal/origin"
)

// originCheck refuses (403) the requests of browser pages whose origin is
// not trusted, before next sees them: MCP's streamable HTTP transport asks
// servers to validate the Origin header of every request, against DNS
// rebinding. A request without an Origin header (not a browser's, or a
// browser's own navigation) passes. A request with one passes when the
// origin is one of trusted, or when it is the origin the request was made
// to (its Host) and that host is loopback; every other origin is refused:
// another site's, "null" (a sandboxed frame, a file), one that is not an
// http or https origin, and several Origin headers.
//
// The Host is not trusted otherwise, nor Sec-Fetch-Site: a page whose
// name an attacker rebinds to this server's address makes its requests
// "same-origin" in the browser's eyes, its Origin and Host alike, which
// is why http.CrossOriginProtection (which trusts both) does not serve
// here. On loopback the SDK's handler refuses a Host that is not
// loopback, so a loopback Host is this machine's.
type originCheck struct {
	trusted []*url.URL
	next    http.Handler
}

// newOriginCheck returns the check trusting the origins of trusted
// ("https://app.example.com"), its next handler to set. It panics on an
// entry that is not an http or https origin (scheme and host, no path).
func newOriginCheck(trusted []string) *originCheck {
	c := &originCheck{}
	for _, s := range trusted {
		u, err := parseOrigin(s)
		if err != nil {
			panic(fmt.Sprintf("mcptools: ServeOptions.TrustedOrigins: %q: %v", s, err))
		}
		c.trusted = append(c.trusted, u)
	}
	return c
}

// parseOrigin parses s, a web origin: scheme (http or https) and host
// (with a port or not), nothing else.
func parseOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("not an origin")
	case !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https"):
		return nil, fmt.Errorf("not an http or https origin")
	case u.Host == "" || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("not an origin: only a scheme and a host (and port)")
	}
	return u, nil
}

func (c *originCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.allowed(r) {
		http.Error(w, "Forbidden: a request from a page of an untrusted origin (see mcptools.ServeOptions.TrustedOrigins)", http.StatusForbidden)
		return
	}
	c.next.ServeHTTP(w, r)
}

// allowed reports whether r may be served: see [originCheck].
func (c *originCheck) allowed(r *http.Request) bool {
	values := r.Header.Values("Origin")
	switch len(values) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	o, err := parseOrigin(values[0])
	if err != nil {
		return false
	}
	for _, t := range c.trusted {
		if origin.Same(o, t) {
			return true
		}
	}
	served := &url.URL{Scheme: "http", Host: r.Host}
	if r.TLS != nil {
		served.Scheme = "https"
	}
	return origin.Loopback(o.Hostname()) && origin.Same(o, served)
}
