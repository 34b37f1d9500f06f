package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/redact"
	"github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/pgjournal"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
)

// A Store is a journal that holds resources (a file, connections):
// Close releases them.
type Store interface {
	driver.Journal
	io.Closer
}

// Open opens the journal that rawURL names (see the package doc for the
// forms it takes): the memory journal, an SQLite file or a PostgreSQL
// database. It fails with a *[errcode.Error] of code InvalidArgument if
// rawURL is malformed, and otherwise as the store's own Open does. The
// caller must Close the store.
func Open(ctx context.Context, rawURL string) (Store, error) {
	if rawURL == "" || rawURL == "memory" || rawURL == "memory:" {
		return memory{driver.NewMemory()}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, badURL(rawURL, "%s (want %s)", parseError(err), forms)
	}
	switch u.Scheme {
	case "sqlite":
		return openSQLite(ctx, rawURL, u)
	case "postgres", "postgresql":
		return openPostgres(ctx, rawURL, u)
	case "":
		if strings.Contains(rawURL, "=") {
			return nil, badURL(rawURL, "no scheme: PostgreSQL key=value settings are not a journal URL; write them as postgres://user@host:5432/db?… (want %s)", forms)
		}
		return nil, badURL(rawURL, "no scheme (want %s)", forms)
	}
	return nil, badURL(rawURL, "unknown scheme %q (want %s)", u.Scheme, forms)
}

// parseError says why url.Parse refused a URL without quoting any of it:
// a *url.Error quotes the whole URL, password included, and some of the
// errors it wraps quote a part of it.
func parseError(err error) string {
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

// badURL returns an InvalidArgument error for rawURL, which it names
// redacted (redact.ConnString).
func badURL(rawURL, format string, args ...any) error {
	return &errcode.Error{Code: errcode.InvalidArgument, Op: "journal: open " + redact.ConnString(rawURL), Err: fmt.Errorf(format, args...)}
}

const forms = "memory, sqlite:///absolute/path.db, sqlite:relative/path.db, postgres://… or postgresql://…"

func openSQLite(ctx context.Context, rawURL string, u *url.URL) (Store, error) {
	path := u.Opaque // sqlite:relative/path.db
	if path == "" {
		if u.Host != "" {
			return nil, badURL(rawURL, "sqlite://%s names a host, %q: write sqlite:///absolute/path.db (three slashes) or sqlite:relative/path.db", u.Host+u.Path, u.Host)
		}
		path = u.Path
	} else if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if path == "" {
		return nil, badURL(rawURL, "no file name (want sqlite:///absolute/path.db or sqlite:relative/path.db)")
	}
	var o sqlitejournal.Options
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, badURL(rawURL, "busy_timeout=%q: want a positive Go duration, such as 5s", v)
			}
			o.BusyTimeout = d
		case "synchronous":
			o.Synchronous = sqlitejournal.Synchronous(strings.ToLower(v))
		case "check":
			switch strings.ToLower(v) {
			case "on", "true", "1":
			case "off", "false", "0":
				o.SkipCheck = true
			default:
				return nil, badURL(rawURL, "check=%q: want on or off", v)
			}
		default:
			return nil, badURL(rawURL, "unknown parameter %q (known: busy_timeout, synchronous, check)", k)
		}
	}
	j, err := sqlitejournal.Open(ctx, path, &o)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// The parameters of a postgres URL that are the journal's, not pgx's.
const (
	schemaParam = "toolrelay_schema"
	tableParam  = "toolrelay_table"
	syncParam   = "toolrelay_synchronous"
)

func openPostgres(ctx context.Context, rawURL string, u *url.URL) (Store, error) {
	q := u.Query()
	o := pgjournal.Options{Schema: q.Get(schemaParam), Table: q.Get(tableParam), Synchronous: pgjournal.Synchronous(strings.ToLower(q.Get(syncParam)))}
	for _, p := range []string{schemaParam, tableParam, syncParam} {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	j, err := pgjournal.Open(ctx, u.String(), &o)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// memory is the memory journal as a Store.
type memory struct{ *driver.Memory }

func (memory) Close() error { return nil }
