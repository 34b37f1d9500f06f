package pgjournal

import (
	"context"
	"net/url"
	"strings"

	"github.com/toolrelay/toolrelay/journal"
)

// init registers the postgres: and postgresql: URL schemes with package
// journal (see its doc for the URL's forms and parameters).
func init() {
	journal.Register("postgres", openURL)
	journal.Register("postgresql", openURL)
}

// The parameters of a postgres URL that are the journal's, not pgx's.
const (
	schemaParam = "toolrelay_schema"
	tableParam  = "toolrelay_table"
	syncParam   = "toolrelay_synchronous"
)

// openURL opens the journal of a postgres: URL: pgx reads the URL, less
// the journal's own parameters.
func openURL(ctx context.Context, u *url.URL, rawURL string) (journal.Store, error) {
	q := u.Query()
	o := Options{Schema: q.Get(schemaParam), Table: q.Get(tableParam), Synchronous: Synchronous(strings.ToLower(q.Get(syncParam)))}
	for _, p := range []string{schemaParam, tableParam, syncParam} {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	j, err := Open(ctx, u.String(), &o)
	if err != nil {
		return nil, err
	}
	return j, nil
}
