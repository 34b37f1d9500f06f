package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// chain is a backend whose thread is a chain of responses, each naming
// the next as soon as it exists (driver.SubmitRequest.Moved), as the
// Responses API's stream does. Its first submits can be lost after the
// service took them: the worker dies (a panic, retried by Temporal) or
// the request fails.
type chain struct {
	mu      sync.Mutex
	steps   map[string]*driver.Step
	taken   map[string]int // submits the service took, by the response answered
	n       int
	lose    int  // submits lost after the service named their response
	crash   bool // lost by a crash (retried), else by an error (the turn ends)
	crashed bool
}

func (c *chain) Name() string { return "chain" }

func (c *chain) next(step driver.Step) *driver.Step {
	c.n++
	id := fmt.Sprintf("resp_%d", c.n)
	step.Thread, step.Turn = id, id
	for i := range step.Calls {
		step.Calls[i].Thread = id
	}
	c.steps[id] = &step
	return &step
}

func (c *chain) Start(_ context.Context, req *driver.StartRequest) (*driver.Step, error) {
	c.mu.Lock()
	step := c.next(driver.Step{Calls: []driver.Call{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}})
	c.mu.Unlock()
	if req.Created != nil {
		req.Created(step.Thread)
	}
	return step, nil
}

func (c *chain) Submit(_ context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	c.mu.Lock()
	c.taken[req.Step.Thread]++
	step := c.next(driver.Step{Text: "answered " + req.Results[0].Output.Text})
	lose := c.lose > 0
	if lose {
		c.lose--
	}
	c.mu.Unlock()
	if req.Moved != nil {
		req.Moved(step.Thread)
	}
	if lose && c.crash {
		c.crashed = true
		panic("the worker dies after the service named its response")
	}
	if lose {
		return nil, &errcode.Error{Code: errcode.Unavailable, Op: "chain: submit", Err: fmt.Errorf("the stream broke")}
	}
	return step, nil
}

func (c *chain) Resume(_ context.Context, thread string) (*driver.Step, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.steps[thread]
	if !ok {
		return nil, &errcode.Error{Code: errcode.NotFound, Op: "chain: resume", Err: fmt.Errorf("no response %s", thread)}
	}
	cp := *s
	return &cp, nil
}

func (c *chain) ErrorCode(err error) errcode.Code { return errcode.Of(err) }
func (c *chain) Close() error                     { return nil }

// TestChainSubmitLost: on a chain of responses, a submit lost after the
// service named the response it made is not sent again. A retried attempt
// (the worker died) resumes the response its heartbeat carries: the model
// answers the step once and the turn ends with that answer. A submit that
// fails ends the turn on that response, which a resume continues from.
func TestChainSubmitLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		crash    bool
		wantText string
		wantErr  bool
	}{
		{"WorkerDies", true, "answered sunny in Paris", false},
		{"RequestFails", false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &chain{steps: map[string]*driver.Step{}, taken: map[string]int{}, lose: 1, crash: tc.crash}
			var s testsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(quiet))
			te := s.NewTestWorkflowEnvironment()
			te.SetTestTimeout(30 * time.Second)
			weather := must(core.NewTool("get_weather", "weather of a city", func(_ context.Context, in cityArgs) (string, error) {
				return "sunny in " + in.City, nil
			}, &core.ToolOptions{ReadOnly: true}))
			r := core.NewRunner(b, must(core.NewToolbox(weather)), &core.Options{Logger: quiet})
			Register(te, r)
			e := &env{t: t, te: te, start: State{Settings: LoopOptions{Idle: time.Hour}}}
			var o outcome
			e.update(time.Second, UpdateRun, &o, runRequest{Input: "weather?"})
			e.run()
			if o.err != nil {
				t.Fatalf("run: %v", o.err)
			}
			if tc.crash && !b.crashed {
				t.Fatal("the submit never crashed")
			}
			if o.res.Text != tc.wantText || (o.res.Err != nil) != tc.wantErr {
				t.Errorf("turn = text %q, error %v; want text %q, error %v", o.res.Text, o.res.Err, tc.wantText, tc.wantErr)
			}
			if o.res.Thread != "resp_2" {
				t.Errorf("the turn's thread is %q, want the response the submit made, resp_2", o.res.Thread)
			}
			if n := b.taken["resp_1"]; n != 1 {
				t.Errorf("the service took the step's results %d times: the model answered it %d times, want once", n, n)
			}
		})
	}
}
