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
	"github.com/toolrelay/toolrelay/core/driver"
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

// workflowsClient answers the events query of each workflow from its
// events, all there from the start, and counts the queries of each.
type workflowsClient struct {
	client.Client
	events  map[string][]event
	queries map[string]int
}

func (c *workflowsClient) QueryWorkflow(_ context.Context, id, _, _ string, args ...any) (converter.EncodedValue, error) {
	c.queries[id]++
	evs, ok := c.events[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	req := args[0].(eventsRequest)
	b, err := json.Marshal(eventsPage{Turn: 1, Events: evs[min(req.After, len(evs)):]})
	return jsonValue(b), err
}

// doneHandle is the update handle of a turn that ended with res.
type doneHandle struct {
	client.WorkflowUpdateHandle
	res turnResult
}

func (h doneHandle) Get(_ context.Context, ptr any) error {
	*ptr.(*turnResult) = h.res
	return nil
}

// TestStreamChildren: a stream gives the events of an agent call's child
// workflow (named by the call's EventCallStarted) with the call in their
// Path, a grandchild's with both calls, each child's events before its
// call's end, also when all of them are there at the reader's first
// query; a child workflow not found is passed over.
func TestStreamChildren(t *testing.T) {
	call := func(id, name string) *driver.Call { return &driver.Call{ID: id, Name: name} }
	ask, desk, refund, lost := call("c1", "ask"), call("c2", "desk"), call("c3", "refund"), call("c4", "ask")
	qc := &workflowsClient{queries: map[string]int{}, events: map[string][]event{
		"thread": {
			{Kind: core.EventCallStarted, Call: ask, Child: "thread/1/c1"},
			{Kind: core.EventCallStarted, Call: lost, Child: "thread/1/c4"},
			{Kind: core.EventCallFinished, Call: lost},
			{Kind: core.EventCallFinished, Call: ask},
			{Kind: core.EventTextDone, Text: "parent: done"},
			{Kind: core.EventRunFinished},
		},
		"thread/1/c1": {
			{Kind: core.EventStepStarted, Thread: "child"},
			{Kind: core.EventCallStarted, Call: desk, Child: "thread/1/c1/1/c2"},
			{Kind: core.EventCallFinished, Call: desk},
			{Kind: core.EventRunFinished, Thread: "child"},
		},
		"thread/1/c1/1/c2": {
			{Kind: core.EventCallStarted, Call: refund},
			{Kind: core.EventCallFinished, Call: refund},
			{Kind: core.EventRunFinished, Thread: "grandchild"},
		},
	}}
	f := &follower{r: NewRunner(qc, nil), ctx: t.Context(), thread: "thread", held: func() {}}
	var got []string
	res, err := f.follow(doneHandle{res: turnResult{Done: true, Text: "parent: done"}}, false, func(e core.Event, _ error) bool {
		s := ""
		for _, c := range e.Path {
			s += c.Name + ">"
		}
		s += e.Kind.String()
		if e.Call != nil {
			s += " " + e.Call.Name
		}
		got = append(got, s)
		return true
	})
	if err != nil || res.Text != "parent: done" {
		t.Fatalf("follow = %+v, %v", res, err)
	}
	want := []string{
		"call_started ask",
		"call_started ask",
		"call_finished ask", // the call whose child is not there
		"ask>step_started",
		"ask>call_started desk",
		"ask>desk>call_started refund",
		"ask>desk>call_finished refund",
		"ask>desk>run_finished",
		"ask>call_finished desk",
		"ask>run_finished",
		"call_finished ask",
		"text_done",
		"run_finished",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
