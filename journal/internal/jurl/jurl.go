// Package jurl holds what package journal and the journal drivers share to
// read journal URLs: errors that name a URL without showing its secrets.
package jurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/redact"
)

// ParseError says why url.Parse refused a URL without quoting any of it:
// a *url.Error quotes the whole URL, password included, and some of the
// errors it wraps quote a part of it.
func ParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	for _, why := range []string{"invalid port", "invalid URL escape", "invalid character", "missing protocol scheme", "first path segment in URL cannot contain colon", "net/url: invalid userinfo", "net/url: invalid control character in URL", "missing ']' in host"} {
		if strings.HasPrefix(msg, why) {
			return why
		}
	}
	return "it does not parse as a URL"
}

// Bad returns an InvalidArgument error for rawURL, which it names
// redacted (redact.ConnString).
func Bad(rawURL, format string, args ...any) error {
	return &errcode.Error{Code: errcode.InvalidArgument, Op: "journal: open " + redact.ConnString(rawURL), Err: fmt.Errorf(format, args...)}
}
