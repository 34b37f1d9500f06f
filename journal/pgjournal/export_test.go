package pgjournal

import "context"

// ExecForTest makes stmt as the journal's writes are made (batched).
func ExecForTest(ctx context.Context, j *Journal, stmt string) error {
	_, err := j.exec(ctx, false, "", stmt)
	return err
}
