package sqlitejournal

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/internal/jurl"
)

// init registers the sqlite: URL scheme with package journal (see its doc
// for the URL's forms and parameters).
func init() { journal.Register("sqlite", openURL) }

// openURL opens the journal of an sqlite: URL.
func openURL(ctx context.Context, u *url.URL, rawURL string) (journal.Store, error) {
	path := u.Opaque // sqlite:relative/path.db
	if path == "" {
		if u.Host != "" {
			return nil, jurl.Bad(rawURL, "sqlite://%s names a host, %q: write sqlite:///absolute/path.db (three slashes) or sqlite:relative/path.db", u.Host+u.Path, u.Host)
		}
		path = u.Path
	} else if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if path == "" {
		return nil, jurl.Bad(rawURL, "no file name (want sqlite:///absolute/path.db or sqlite:relative/path.db)")
	}
	var o Options
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, jurl.Bad(rawURL, "busy_timeout=%q: want a positive Go duration, such as 5s", v)
			}
			o.BusyTimeout = d
		case "synchronous":
			o.Synchronous = Synchronous(strings.ToLower(v))
		case "check":
			switch strings.ToLower(v) {
			case "on", "true", "1":
			case "off", "false", "0":
				o.SkipCheck = true
			default:
				return nil, jurl.Bad(rawURL, "check=%q: want on or off", v)
			}
		default:
			return nil, jurl.Bad(rawURL, "unknown parameter %q (known: busy_timeout, synchronous, check)", k)
		}
	}
	j, err := Open(ctx, path, &o)
	if err != nil {
		return nil, err
	}
	return j, nil
}
