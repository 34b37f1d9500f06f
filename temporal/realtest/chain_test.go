package realtest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/toolrelay/toolrelay/conformance/fakes"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/temporal"
)

// diesAfterSubmit is a backend whose worker dies (a panic, which Temporal
// retries) after its first submit reached the service and the service
// named the response it made: the case of a worker killed within a
// submit.
type diesAfterSubmit struct {
	driver.Backend
	died atomic.Bool
}

func (d *diesAfterSubmit) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	var named string
	moved := req.Moved
	r := *req
	r.Moved = func(t string) {
		named = t
		if moved != nil {
			moved(t)
		}
	}
	step, err := d.Backend.Submit(ctx, &r)
	if named != "" && d.died.CompareAndSwap(false, true) {
		panic("the worker dies after the service named the response")
	}
	return step, err
}

// TestChainSubmitRetried: on the Responses API's chain of responses
// (streaming, on its fake), a submit whose worker dies after the service
// took the results is retried by Temporal without sending them again: the
// retried attempt resumes the response its heartbeat names, the model
// answers the step once, the function runs once, and the turn ends with
// the answer.
func TestChainSubmitRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server's test")
	}
	ctx := t.Context()
	h, err := fakes.Foundry(foundry.Chain, true, true)(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	book, err := core.NewTool("book_table", "Books a table.", func(_ context.Context, in struct {
		Table int `json:"table"`
	}) (string, error) {
		runs.Add(1)
		return "table booked", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := core.NewToolbox(book)
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "book_table", Arguments: []byte(`{"table":7}`)}}},
		{Text: "{{result 0}}"},
	}}}}
	b, err := h.MakeBackend(ctx, script, tools)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	dies := &diesAfterSubmit{Backend: b}
	r := core.NewRunner(dies, tools, &core.Options{Logger: quiet})
	t.Cleanup(func() { r.Close() })
	c := dial(t)
	queue := newQueue(t)
	startWorker(t, c, queue, r)
	tr := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: fastSettings(nil)})
	res, err := tr.Run(ctx, "Book table 7", nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !dies.died.Load() {
		t.Fatal("the worker never died in a submit")
	}
	if res.Text != "table booked" || runs.Load() != 1 {
		t.Errorf("answer %q, the function ran %d times; want %q, once", res.Text, runs.Load(), "table booked")
	}
	taken := map[string]int{}
	for _, d := range h.Received() {
		for _, r := range d.Results {
			taken[r.CallID]++
		}
	}
	if len(taken) != 1 {
		t.Errorf("results taken: %v, want one call's", taken)
	}
	for id, n := range taken {
		if n != 1 {
			t.Errorf("the service took call %s's result %d times: the model answered its step %d times", id, n, n)
		}
	}
}
