// Package redact removes the secrets from connection strings and URLs
// before an error or a log line names them. It is the one place every
// package of the module redacts: journal URLs, PostgreSQL connection
// strings, project endpoints and base URLs.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask replaces every secret [ConnString] removes; it is net/url's own
// (url.URL.Redacted).
const Mask = "xxxxx"

// Unparsable replaces, after the scheme if one can be told, what
// [ConnString] cannot parse safely.
const Unparsable = "(not shown: it does not parse as a URL or as key=value settings)"

// ConnString returns s with every secret it may hold replaced by [Mask],
// for messages. It knows the forms a connection string or endpoint takes:
//
//   - a URL (scheme://user:password@host/path?query, or sqlite:path or
//     file:path): the password of its user info, the value of every query parameter
//     whose name looks secret (password, sslpassword, token, key,
//     secret, sig, auth, credential and the like, in any case) or whose
//     value holds an =, and the fragment are masked; the rest is kept;
//   - libpq key/value settings (host=db password=secret, values quoted
//     with ' or not, spaces around =): the value of every key that looks
//     secret is masked, and every value that holds an = (libpq reads
//     "host= password=secret" as a host "password=secret"); the other
//     settings are kept;
//   - anything else, or a URL or key/value string that does not parse
//     cleanly: only the scheme (if the string starts with one) is kept,
//     followed by [Unparsable]; nothing of the rest is shown.
//
// A secret repeated where no secret is named (a password that is also
// another parameter's value, the user's name, a host, a path) is masked
// there too: every value, name or part that holds one of the string's
// secrets ([Secrets]), as it reads or escaped. What is kept then passes
// [Text], so that a secret the form hides (another connection string in
// a value, a path or a host) is masked too. The empty string is returned
// as it is. ConnString never returns any part of s it could not place in
// one of those forms, so a secret in a malformed string is never echoed.
func ConnString(s string) string {
	if s == "" {
		return ""
	}
	secrets := Secrets(s)
	if scheme := schemeRE.FindString(s); scheme != "" {
		shown := scheme
		if holdsSecret(scheme, secrets) {
			shown = Mask + ":"
		}
		if r, ok := redactURL(s, secrets); ok {
			return Text(shown + Values(strings.TrimPrefix(r, scheme), secrets...))
		}
		return shown + Unparsable
	}
	if r, ok := redactKeyValues(s, secrets); ok {
		return Text(Values(r, secrets...))
	}
	return Unparsable
}

// Secrets returns the secrets connection string s names, as they read
// (unescaped): the password of a URL's user info, and the value of every
// query parameter or key/value setting whose name looks secret
// ([Secret]); and, wherever they are in s, the values [Text] would mask
// (a URL's password, a secret-looking name's value), so that a secret
// named inside another setting's value counts too. Empty values are left
// out; nil if s names none.
func Secrets(s string) []string {
	var out []string
	add := func(v string) {
		for _, v := range []string{v, unescape(v)} {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if !schemeRE.MatchString(s) {
		kvs, _ := parseKeyValues(s)
		for _, kv := range kvs {
			if Secret(kv[0]) {
				add(kv[1])
			}
		}
	} else if u, err := url.Parse(s); err == nil {
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		for _, p := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
			k, v, _ := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); err != nil || Secret(name) {
				add(v)
			}
		}
	}
	for _, m := range userinfoRE.FindAllStringSubmatchIndex(s, -1) {
		add(s[m[3]+1 : m[1]-1]) // between the user's ":" and the "@"
	}
	for _, m := range settingRE.FindAllStringSubmatch(s, -1) {
		v := m[4]
		if len(v) > 0 && (v[0] == '\'' || v[0] == '"') {
			v = strings.TrimSuffix(v[1:], v[:1])
		}
		add(v)
	}
	return out
}

// unescape returns v as a URL's query (percent escapes, + for a space)
// or a key/value setting (a backslash before each escaped character)
// would read it; v if it is neither.
func unescape(v string) string {
	if u, err := url.QueryUnescape(v); err == nil && u != v {
		return u
	}
	if strings.Contains(v, `\`) {
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) {
				i++
			}
			b.WriteByte(v[i])
		}
		return b.String()
	}
	return v
}

// Values returns text with every occurrence of each of secrets replaced
// by [Mask]: as it reads, and as a URL's path, query or user info, or a
// quoted key/value setting, would escape it. Empty secrets are ignored.
// It is for the text of errors that may repeat a secret of a connection
// string where nothing names it as one (the user's name, a host, a file,
// another setting's value).
func Values(text string, secrets ...string) string {
	var forms []string
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		forms = append(forms, sec, url.QueryEscape(sec), url.PathEscape(sec), strings.TrimSuffix(url.UserPassword("", sec).String(), "@")[1:],
			strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(sec))
	}
	// The longest first, so that a form holding another is masked whole.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range forms {
		if f != "" {
			text = strings.ReplaceAll(text, f, Mask)
		}
	}
	return text
}

// holdsSecret reports whether v holds one of secrets.
func holdsSecret(v string, secrets []string) bool {
	for _, sec := range secrets {
		if strings.Contains(v, sec) {
			return true
		}
	}
	return false
}

// schemeRE matches a URL's scheme and its colon (RFC 3986, section 3.1).
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Secret reports whether a setting or query parameter named name (in any
// case, with any separators) may hold a secret.
func Secret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// secretWords are the parts of the names of settings that hold secrets:
// password, passwd, sslpassword, pwd, secret, client_secret, token,
// access_token, key, api-key, apikey, sslkey, sig (a SAS signature),
// signature, auth, authorization, credential, passphrase.
var secretWords = []string{"pass", "pwd", "secret", "token", "key", "sig", "auth", "credential"}

// pathSchemes are the schemes whose opaque form (scheme:relative/path)
// holds a file name, shown as it is.
var pathSchemes = map[string]bool{"sqlite": true, "file": true}

// redactURL redacts a URL, masking also what holds one of secrets; ok
// is false when s does not parse as one.
func redactURL(s string, secrets []string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", false
	}
	if u.Opaque != "" && !pathSchemes[strings.ToLower(u.Scheme)] {
		// host:port/path or the like, read as scheme:opaque: the opaque
		// part has no structure that says where a secret would be.
		return "", false
	}
	if strings.Contains(u.Host+u.Path+u.Opaque, "=") || u.User != nil && strings.Contains(u.User.Username(), "=") {
		// A setting where a name goes: a secret, perhaps.
		return "", false
	}
	if u.User != nil {
		name := u.User.Username()
		_, has := u.User.Password()
		if holdsSecret(name, secrets) {
			name = Mask
			u.User = url.User(name)
		}
		if has {
			u.User = url.UserPassword(name, Mask)
		}
	}
	if holdsSecret(u.Host, secrets) {
		u.Host = Mask
	}
	if holdsSecret(u.Path, secrets) || holdsSecret(u.RawPath, secrets) {
		u.Path, u.RawPath = "/"+Mask, ""
	}
	if o, _ := url.PathUnescape(u.Opaque); holdsSecret(o, secrets) || holdsSecret(u.Opaque, secrets) {
		u.Opaque = Mask
	}
	if u.RawQuery != "" {
		q, ok := redactQuery(u.RawQuery, secrets)
		if !ok {
			return "", false
		}
		u.RawQuery = q
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Mask, ""
	}
	return u.String(), true
}

// redactQuery masks the values of the secret parameters of a raw query,
// and the names and values that hold one of secrets, keeping the order
// and encoding of the others; ok is false if a parameter's name is not
// validly escaped.
func redactQuery(raw string, secrets []string) (string, bool) {
	params := strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range params {
		k, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return "", false
		}
		_, v, _ := strings.Cut(p, "=")
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		switch {
		case holdsSecret(name, secrets):
			params[i] = Mask + "=" + Mask
		case Secret(name) || holdsSetting(v) || holdsSecret(v, secrets):
			params[i] = k + "=" + Mask
		}
	}
	return strings.Join(params, "&"), true
}

// redactKeyValues redacts libpq key/value settings, masking also the
// values that hold one of secrets; ok is false when s does not parse as
// at least one key=value pair.
func redactKeyValues(s string, secrets []string) (string, bool) {
	kvs, ok := parseKeyValues(s)
	if !ok || len(kvs) == 0 {
		return "", false
	}
	var b strings.Builder
	for i, kv := range kvs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[0])
		b.WriteByte('=')
		if Secret(kv[0]) || holdsSetting(kv[1]) || holdsSecret(kv[1], secrets) {
			b.WriteString(Mask)
		} else {
			b.WriteString(quoteValue(kv[1]))
		}
	}
	return b.String(), true
}

// holdsSetting reports whether a setting's value holds a setting (an =):
// libpq and pgx read "host= password=S" as a host "password=S", so such a
// value is masked, whatever its name.
func holdsSetting(v string) bool { return strings.Contains(v, "=") }

// keyRE matches the keys of libpq key/value settings.
var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// parseKeyValues splits libpq key/value settings as libpq does: pairs
// separated by spaces, key = value with optional spaces around the =,
// values unquoted (a backslash escapes the next character) or in single
// quotes (where \' and \\ are escapes). ok is false if s is not such a
// string: a key that is not a word, a key without =, an unterminated
// quote, a trailing backslash.
func parseKeyValues(s string) (kvs [][2]string, ok bool) {
	i := 0
	skip := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i == len(s) {
			return kvs, true
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		skip()
		if i == len(s) || s[i] != '=' || !keyRE.MatchString(key) {
			return nil, false
		}
		i++
		skip()
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i == len(s) {
					return nil, false
				}
				c := s[i]
				i++
				if c == '\'' {
					break
				}
				if c == '\\' {
					if i == len(s) {
						return nil, false
					}
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
			if i < len(s) && !isSpace(s[i]) {
				return nil, false
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				c := s[i]
				i++
				if c == '\\' {
					if i == len(s) {
						return nil, false
					}
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
		}
		kvs = append(kvs, [2]string{key, v.String()})
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// quoteValue writes a key/value setting's value back as libpq reads it.
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\f\v'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}
