// Package pgtest helps tests that use a PostgreSQL journal.
package pgtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FreshTable returns the journal URL u with toolrelay_table set to a new
// name starting with prefix, so that a test gets a journal of its own in a
// shared database. When the test ends (after the cleanups registered
// later, such as the journal's Close), the journal's tables are dropped.
func FreshTable(tb testing.TB, u, prefix string) string {
	tb.Helper()
	table := prefix + "_" + strings.ToLower(rand.Text()[:10])
	tb.Cleanup(func() { dropTables(tb, u, table) })
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "toolrelay_table=" + table
}

// dropTables drops the tables of the journal named table (see
// pgjournal.Options.Table) in the database of u, logging a failure.
func dropTables(tb testing.TB, u, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(u) // the URL may set the pool's size

	if err != nil {
		tb.Logf("pgtest: drop %s: %v", table, err)
		return
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		tb.Logf("pgtest: drop %s: %v", table, err)
		return
	}
	defer conn.Close(ctx)
	var names []string
	for _, suffix := range []string{"", "_version", "_approvals", "_notes", "_runs"} {
		names = append(names, pgx.Identifier{table + suffix}.Sanitize())
	}
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
		tb.Logf("pgtest: drop %s: %v", table, err)
	}
}
