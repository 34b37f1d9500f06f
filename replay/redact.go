package replay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/toolrelay/toolrelay/internal/redact"
)

// Mask replaces every secret in a cassette.
const Mask = redact.Mask

// secretHeaders are headers that carry credentials whatever their name
// says (the others are masked when [redact.Secret] says their name looks
// secret).
var secretHeaders = map[string]bool{"Cookie": true, "Set-Cookie": true, "Proxy-Authorization": true}

// shapeRE matches secret-shaped values wherever they are: a bearer or
// basic credential, a JWT (three base64url parts, the first two starting
// with eyJ), an OpenAI-style key (sk-…), a SAS signature (sig=…).
//
// A bearer or basic credential runs to the next space, quote, backslash or
// list separator, whatever its characters: a token of other characters
// than base64's (FuzzRedact found "xxxx!000") was masked only up to the
// first of them, its rest left in the cassette.
var shapeRE = regexp.MustCompile(`(?i)(?:\b(?:bearer|basic)[ \t]+[^\s"'\\,;&]+)` +
	`|(?:eyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)` +
	`|(?:\bsk-[A-Za-z0-9_-]{8,})` +
	`|(?:\bsig=[^&\s"']+)`)

// maskShapes masks the secret-shaped values of s.
func maskShapes(s string) string {
	return shapeRE.ReplaceAllStringFunc(s, func(m string) string {
		l := strings.ToLower(m)
		switch {
		case strings.HasPrefix(l, "bearer"), strings.HasPrefix(l, "basic"):
			return m[:strings.IndexAny(m, " \t")+1] + Mask
		case strings.HasPrefix(l, "sig="):
			return m[:4] + Mask
		}
		return Mask
	})
}

// Redact removes the secrets from an interaction, in place: it is what a
// recording does before it writes a cassette, and what replay does to a
// request before it compares it with the recorded ones (so that both are
// compared in the same form). It masks with [Mask] the values of
// credential headers (Authorization, Api-Key, Cookie, Set-Cookie, and any
// header whose name looks secret), of secret-looking query parameters,
// JSON fields and form fields, and every secret-shaped value (a bearer
// token, a JWT, an sk- key, a SAS sig) in the URL, the headers and the
// bodies. Redact of a redacted interaction changes nothing.
func Redact(i *Interaction) {
	i.Request.URL = redactURL(i.Request.URL)
	i.Request.RequestURI = redactURL(i.Request.RequestURI)
	i.Request.Headers = redactHeaders(i.Request.Headers)
	i.Request.Trailer = redactHeaders(i.Request.Trailer)
	i.Request.Form = nil
	i.Request.Body = redactBody(i.Request.Body)
	i.Response.Headers = redactHeaders(i.Response.Headers)
	i.Response.Trailer = redactHeaders(i.Response.Trailer)
	i.Response.Body = redactBody(i.Response.Body)
	i.Response.Status = maskShapes(redact.Text(i.Response.Status))
}

// redactHeaders returns h with its secrets masked.
func redactHeaders(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		secret := secretHeaders[ck] || secretName(ck)
		for _, v := range vs {
			if secret {
				v = Mask
			} else {
				v = maskShapes(redact.Text(v))
			}
			out[ck] = append(out[ck], v)
		}
	}
	return out
}

// redactURL returns the URL (or request URI) u with its secret query
// parameters masked, keeping their order and the rest.
func redactURL(u string) string {
	if u == "" {
		return ""
	}
	base, q, ok := strings.Cut(u, "?")
	base = maskShapes(base)
	if !ok {
		return base
	}
	return base + "?" + redactForm(q)
}

// redactForm masks the secrets of a query or a form body (k=v&k=v),
// keeping the order and encoding of what is kept.
func redactForm(q string) string {
	params := strings.Split(q, "&")
	for i, p := range params {
		k, v, has := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if has && secretName(name) {
			params[i] = k + "=" + Mask
			continue
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			uv = v
		}
		if m := maskShapes(uv); m != uv {
			params[i] = k + "=" + url.QueryEscape(m)
		}
	}
	return strings.Join(params, "&")
}

// redactBody returns a body with its secrets masked: a JSON document's
// secret fields, each data line of a server-sent event stream, a form's
// secret fields, or any other text's secret-shaped values.
func redactBody(b string) string {
	if b == "" {
		return ""
	}
	t := strings.TrimSpace(b)
	switch {
	case strings.HasPrefix(t, "{") || strings.HasPrefix(t, "["):
		if r, ok := redactJSON(b); ok {
			return r
		}
	case strings.HasPrefix(t, "data:") || strings.HasPrefix(t, "event:") || strings.HasPrefix(t, "id:") || strings.HasPrefix(t, ":"):
		lines := strings.Split(b, "\n")
		for i, l := range lines {
			if d, ok := strings.CutPrefix(l, "data:"); ok {
				sp := ""
				if strings.HasPrefix(d, " ") {
					sp, d = " ", d[1:]
				}
				if r, ok := redactJSON(d); ok {
					lines[i] = "data:" + sp + r
					continue
				}
			}
			lines[i] = maskShapes(redact.Text(l))
		}
		return strings.Join(lines, "\n")
	case !strings.ContainsAny(t, " \n\t{}\"") && strings.Contains(t, "="):
		return redactForm(b)
	}
	return maskShapes(redact.Text(b))
}

// redactJSON masks the secrets of a JSON document; it returns the
// document as it was when it holds none, and ok false when b is not JSON.
func redactJSON(b string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return "", false
	}
	v, changed := redactValue(v)
	if !changed {
		return b, true
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(buf.String(), "\n"), true
}

// redactValue masks a decoded JSON value's secrets: the string value of a
// field whose name looks secret, and the secret-shaped parts of every
// string.
func redactValue(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		changed := false
		for k, e := range x {
			if s, ok := e.(string); ok && s != Mask && secretField(k) {
				x[k], changed = Mask, true
				continue
			}
			if r, c := redactValue(e); c {
				x[k], changed = r, true
			}
		}
		return x, changed
	case []any:
		changed := false
		for i, e := range x {
			if r, c := redactValue(e); c {
				x[i], changed = r, true
			}
		}
		return x, changed
	case string:
		if m := maskShapes(x); m != x {
			return m, true
		}
	}
	return v, false
}

// secretName reports whether a header, query parameter or form field
// named name holds a secret: its name looks secret
// ([redact.Secret]), or is one of OAuth's (code, assertion,
// client_assertion), and it is neither volatile nor known not to be.
func secretName(name string) bool {
	n := strings.ToLower(name)
	return (redact.Secret(n) || oauthSecret[n]) && !IsVolatile(n) && !notSecret[n]
}

// secretField reports whether a JSON field named name holds a credential.
// It is narrower than the names of headers, queries and forms: a JSON
// body carries the model's data too (a tool's arguments {"key": "a"}, an
// error's "code"), which replay must keep as recorded; so only names
// that say credential are masked (api_key, access_token, refresh_token,
// id_token, client_secret, client_assertion, password, secret, signature,
// authorization, credential, private_key, sas_token), and a bearer token
// or a JWT anywhere is masked by its shape.
func secretField(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	for _, w := range fieldWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

var fieldWords = []string{"api_key", "apikey", "access_token", "refresh_token", "id_token", "secret", "client_assertion",
	"password", "passwd", "signature", "authorization", "credential", "private_key", "sas_token", "subscription_key"}

// oauthSecret are the OAuth fields that hold secrets although their
// names do not look secret.
var oauthSecret = map[string]bool{"code": true, "assertion": true, "client_assertion": true}

// notSecret are names that look secret but whose values are
// not: kept so that the replayed run sees them.
var notSecret = map[string]bool{"token_type": true, "author": true}
