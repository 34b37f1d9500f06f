package pgjournal

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/redact"
)

// A password may be repeated where nothing names it as one: as another
// parameter's value (target_session_attrs=<password>), the user's or the
// database's name, a host, a certificate's file. pgx, and the journal's
// own messages, show those, so every error the journal returns is read
// for the passwords of its connection string and configuration first.

// secretsOf returns the secrets of connString (redact.Secrets) and the
// password of cfg, if not nil, which pgx may have read from PGPASSWORD or
// the passfile.
func secretsOf(connString string, cfg *pgconn.Config) []string {
	secrets := redact.Secrets(connString)
	if cfg != nil && cfg.Password != "" {
		secrets = append(secrets, cfg.Password)
	}
	return secrets
}

// hide returns err, unless it shows one of secrets (in its text, or in
// the text of an error of its chain): then an error of the same code and
// operation whose text is err's with every secret masked (redact.Values),
// and which wraps nothing of what showed one, so that neither printing
// it nor unwrapping it shows a secret.
func hide(err error, secrets []string) error {
	if err == nil || !shows(err, secrets) {
		return err
	}
	if e, ok := err.(*errcode.Error); ok {
		return &errcode.Error{Code: e.Code, Op: redact.Values(e.Op, secrets...), Err: hide(e.Err, secrets)}
	}
	return errors.New(redact.Values(err.Error(), secrets...))
}

// shows reports whether err or an error of its chain shows one of
// secrets.
func shows(err error, secrets []string) bool {
	if err == nil {
		return false
	}
	if s := fmt.Sprintf("%v %+v", err, err); redact.Values(s, secrets...) != s {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return shows(u.Unwrap(), secrets)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if shows(e, secrets) {
				return true
			}
		}
	}
	return false
}
