package redact

import (
	"regexp"
	"strings"
)

// Text returns s, a free text such as an error's message, with the
// secrets it may name replaced by [Mask], for logs. It knows the forms
// secrets take in messages:
//
//   - a URL's password (scheme://user:password@host);
//   - the value of a setting, a query parameter, a header or a JSON field
//     whose name looks secret ([Secret]): name=value, name = value,
//     name: value, "name": "value", a value quoted with ' or " or not,
//     an authentication scheme before it (Authorization: Bearer value);
//   - a bearer token anywhere (Bearer value).
//
// Text cannot know a secret that nothing names as one: a program keeps
// those out of its errors, or out of the logs (see package core's
// Options.LogCallErrors).
func Text(s string) string {
	if s == "" {
		return ""
	}
	s = userinfoRE.ReplaceAllString(s, "${1}:"+Mask+"@")
	s = settingRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := settingRE.FindStringSubmatch(m)
		return sub[1] + sub[2] + sub[3] + Mask
	})
	return bearerRE.ReplaceAllString(s, "${1}"+Mask)
}

var (
	// userinfoRE matches scheme://user:password@, the password up to the
	// last @ before the host's end.
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*):[^\s/?#]*@`)
	// settingRE matches a secret-looking name, its separator (= or :,
	// after a closing quote, with spaces), an authentication scheme, and
	// the value: quoted, or unquoted up to a space, quote or separator
	// (a backslash escapes the next character, as libpq reads it).
	settingRE = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*(?:` + strings.Join(secretWords, "|") + `)[A-Za-z0-9_.-]*)` +
		`(["']?[ \t]*[=:][ \t]*)` +
		`((?:bearer|basic|token|sharedaccesssignature)[ \t]+)?` +
		`("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|(?:\\.|[^\s"'&;,\\])*\\?)`)
	// bearerRE matches a bearer token named as one.
	bearerRE = regexp.MustCompile(`(?i)(bearer[ \t]+)[^\s"'&;,]+`)
)
