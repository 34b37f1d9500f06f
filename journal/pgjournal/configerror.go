package pgjournal

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// parseConfigError returns why pgx could not parse a connection string,
// in words that never quote the string. pgx's *pgconn.ParseConfigError
// shows the string, and hides its passwords only as well as it can (one
// written "password = secret", with spaces, is shown), and some of the
// errors it wraps quote a key or a value: so only pgx's fixed messages are
// kept, the error itself is not.
func parseConfigError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return errors.New("cannot parse the connection string")
	}
	// pe.Error() is "cannot parse `<string>`: <message>[ (<wrapped>)]"; the
	// message follows the last "`: ", as a message has none.
	text := pe.Error()
	if inner := pe.Unwrap(); inner != nil {
		text = strings.TrimSuffix(text, " ("+inner.Error()+")")
	}
	msg := ""
	if i := strings.LastIndex(text, "`: "); i >= 0 {
		msg = text[i+len("`: "):]
	}
	why := "pgx refused it"
	for _, m := range pgxMessages {
		if msg == m {
			why = m
		}
	}
	for prefix, m := range pgxPrefixes {
		if strings.HasPrefix(msg, prefix) {
			why = m
		}
	}
	if detail := pgxDetail(pe.Unwrap()); detail != "" {
		why += " (" + detail + ")"
	}
	return fmt.Errorf("cannot parse the connection string: %s", why)
}

// pgxMessages are the fixed messages of pgx's ParseConfigError, and
// pgxPrefixes the fixed starts of those that go on to quote a key or a
// value.
var pgxMessages = []string{
	"failed to parse as URL", "failed to parse as keyword/value", "failed to read service",
	"invalid sslcertmode", "invalid connect_timeout", "invalid port", "failed to configure TLS",
	"min_protocol_version cannot be greater than max_protocol_version", "invalid require_auth",
	"pool_max_conns too small", "cannot parse pool_max_conns", "cannot parse pool_min_conns",
	"cannot parse pool_min_idle_conns", "cannot parse pool_max_conn_lifetime",
	"cannot parse pool_max_conn_idle_time", "cannot parse pool_health_check_period",
	"cannot parse pool_max_conn_lifetime_jitter", "cannot parse pool_ping_timeout",
}

var pgxPrefixes = map[string]string{
	"could not match ":                    "could not match the port numbers to the hosts",
	"unknown target_session_attrs value:": "unknown target_session_attrs value",
	"invalid min_protocol_version:":       "invalid min_protocol_version",
	"invalid max_protocol_version:":       "invalid max_protocol_version",
	"unknown channel_binding value:":      "unknown channel_binding value",
	"connection string key ":              "a key is not in ConnStringAllowedKeys",
}

// pgxDetails are the fixed texts of the errors a ParseConfigError wraps.
var pgxDetails = []string{
	"unterminated quoted string in connection info string", "invalid keyword/value",
	"forbidden NUL byte in connection string", "invalid percent-encoded token in password",
	"sslmode is invalid", "failed to decode sslkey", "unable to find sslpassword",
	"unable to add CA to cert pool", "negative timeout", "outside range",
}

// pgxDetail returns what can be shown of the error a ParseConfigError
// wraps: one of pgx's fixed texts, a number parser's complaint without the
// text it parsed, or a file that could not be read; "" for anything else.
func pgxDetail(err error) string {
	if err == nil {
		return ""
	}
	var ne *strconv.NumError
	var pe *fs.PathError
	switch {
	case errors.As(err, &ne):
		return fmt.Sprintf("strconv.%s: %v", ne.Func, ne.Err)
	case errors.As(err, &pe):
		return pe.Error()
	}
	for _, d := range pgxDetails {
		if err.Error() == d {
			return d
		}
	}
	return ""
}
