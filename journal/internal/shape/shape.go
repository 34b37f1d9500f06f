// Package shape checks, when a journal store opens, that the tables it
// will read and write are there with the columns it uses, so that a
// dropped table or one of another shape is refused at open, naming the
// table, rather than failing (or passing unnoticed) at the first write.
package shape

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolrelay/toolrelay/errcode"
)

// A Table is a table a store uses: its name for messages, its name as SQL
// writes it (quoted, qualified), and the columns the store reads and
// writes.
type Table struct {
	Name, SQL string
	Columns   []string
}

// Check reads, with query (which runs a statement and returns its error,
// classified by the store), the columns of each table and no row. The
// first that fails gives an *errcode.Error naming the table: of the code
// query gave (PermissionDenied when the store's user may not read it),
// or FailedPrecondition (the table is missing or lacks a column).
func Check(ctx context.Context, query func(ctx context.Context, stmt string) error, schemaVersion int, tables ...Table) error {
	for _, t := range tables {
		err := query(ctx, "SELECT "+strings.Join(t.Columns, ", ")+" FROM "+t.SQL+" LIMIT 0")
		if err == nil {
			continue
		}
		code := errcode.Of(err)
		if code == errcode.Unknown {
			code = errcode.FailedPrecondition
		}
		return &errcode.Error{Code: code, Op: "table " + t.Name, Err: fmt.Errorf(
			"the journal's table %s cannot be read as schema version %d has it (was it dropped, or made by another program?): %w", t.Name, schemaVersion, err)}
	}
	return nil
}
