package temporal

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// queryClient is a Temporal client whose queries fail with errs, one a
// query, then answer page.
type queryClient struct {
	client.Client
	errs    []error
	page    eventsPage
	queries int
}

func (c *queryClient) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	c.queries++
	if len(c.errs) > 0 {
		err := c.errs[0]
		c.errs = c.errs[1:]
		return nil, err
	}
	b, err := json.Marshal(c.page)
	return jsonValue(b), err
}

// jsonValue is an encoded value holding JSON.
type jsonValue []byte

func (v jsonValue) HasValue() bool    { return len(v) > 0 }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal(v, ptr) }

// TestStreamPageUnanswered: a stream's reader asks again for the turn's
// events when no worker answered its query in time (the query's own
// deadline passed, or the workflow's task is failing: its worker died
// and another is taking it over) or the server canceled it, however many
// times, instead of ending the stream; another
// error ends it at once, as does the reader's context.
func TestStreamPageUnanswered(t *testing.T) {
	page := eventsPage{Turn: 1, Events: []event{{Kind: core.EventTextDelta, Text: "hello"}}}
	deadline := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	notReady := serviceerror.NewWorkflowNotReady("Unable to query workflow due to Workflow Task in failed state.")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		errs    []error
		want    *eventsPage
		code    errcode.Code // of the error, if any
		queries int
	}{
		{"answered", context.Background(), nil, &page, 0, 1},
		{"deadline, then answered", context.Background(), []error{deadline, deadline}, &page, 0, 3},
		{"task failing, then answered", context.Background(), []error{notReady}, &page, 0, 2},
		{"context deadline, then answered", context.Background(), []error{context.DeadlineExceeded}, &page, 0, 2},
		{"canceled by the server, then answered", context.Background(), []error{serviceerror.NewCanceled("context canceled"), serviceerror.NewCanceled("context canceled")}, &page, 0, 3},
		{"unanswered past the Runner's bound, then answered", context.Background(), slices.Repeat([]error{deadline}, maxQueries+2), &page, 0, maxQueries + 3},
		{"not found", context.Background(), []error{serviceerror.NewNotFound("no such workflow")}, nil, errcode.NotFound, 1},
		{"the reader's context ended", canceled, []error{deadline}, nil, errcode.Canceled, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			qc := &queryClient{errs: c.errs, page: page}
			f := &follower{r: NewRunner(qc, nil), ctx: c.ctx, thread: "thread"}
			got, err := f.page("thread", 1, 0)
			if c.code != 0 {
				if errcode.Of(err) != c.code || got != nil {
					t.Errorf("page = %+v, %v (code %v); want an error, code %v", got, err, errcode.Of(err), c.code)
				}
			} else if err != nil {
				t.Fatalf("page: %v", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
			if qc.queries != c.queries {
				t.Errorf("%d queries, want %d", qc.queries, c.queries)
			}
		})
	}
}
