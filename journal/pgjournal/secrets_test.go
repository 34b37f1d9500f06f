package pgjournal_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/journal/pgjournal"
)

// TestOpenRepeatedPassword checks that no error of Open shows the
// password where the connection string repeats it as another parameter's
// value (an invalid one, which pgx quotes or which the journal's message
// shows; a valid one, such as the user's or the database's name, which
// the connection's error shows; a file pgx cannot read), whether the
// password is in the URL's user info, in its password parameter, or in
// key/value settings; nor escaped as a URL would escape it.
func TestOpenRepeatedPassword(t *testing.T) {
	params := []string{
		"target_session_attrs", "sslmode", "port", "connect_timeout", "pool_max_conns", "pool_min_conns",
		"pool_max_conn_lifetime", "pool_health_check_period", "statement_cache_capacity", "default_query_exec_mode",
		"min_protocol_version", "max_protocol_version", "channel_binding", "sslcertmode", "sslrootcert", "sslcert",
		"service", "application_name", "options", "search_path", "user", "dbname", "database", "host",
	}
	for _, pw := range []string{"Pl4ntedS3cret", "S3c r@t/x"} {
		q := url.QueryEscape(pw)
		for _, p := range params {
			for _, conn := range []string{
				"postgres://" + url.UserPassword("u", pw).String() + "@127.0.0.1:1/db?" + p + "=" + q,
				"postgres://u@127.0.0.1:1/db?password=" + q + "&" + p + "=" + q,
				"host=127.0.0.1 port=1 user=u password='" + pw + "' " + p + "='" + pw + "'",
			} {
				t.Run(conn, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					defer cancel()
					j, err := pgjournal.Open(ctx, conn, &pgjournal.Options{ConnectTimeout: 2 * time.Second})
					if err == nil {
						j.Close()
						t.Fatal("Open succeeded")
					}
					if e := showing(err, pw, q, url.PathEscape(pw)); e != nil {
						t.Errorf("Open: an error of the chain, %T, shows the password: %v", e, e)
					}
				})
			}
		}
	}
}

// showing returns the error of err's chain whose text shows one of
// secrets, or nil.
func showing(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	s := fmt.Sprintf("%v %+v", err, err)
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			return err
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return showing(u.Unwrap(), secrets...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e := showing(e, secrets...); e != nil {
				return e
			}
		}
	}
	return nil
}
