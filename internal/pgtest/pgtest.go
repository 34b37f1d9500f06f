// Package pgtest helps tests that use a PostgreSQL journal.
package pgtest

import (
	"crypto/rand"
	"strings"
)

// FreshTable returns the journal URL u with toolrelay_table set to a new
// name starting with prefix, so that a test gets a journal of its own in a
// shared database.
func FreshTable(u, prefix string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "toolrelay_table=" + prefix + "_" + strings.ToLower(rand.Text()[:10])
}
