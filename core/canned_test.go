package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// canned is a backend without a model: Start returns its first step, and
// each Submit the next one (a nil entry is returned as no step and no
// error). It records the results submitted and the turns canceled. A test
// controls each step exactly: a call without an id, no step at all,
// arguments built before the run.
type canned struct {
	mu      sync.Mutex
	steps   []*driver.Step
	next    int
	submits [][]driver.ToolResult
	cancels []string
}

var _ driver.Canceler = (*canned)(nil)

func (c *canned) Name() string { return "canned" }

func (c *canned) step() (*driver.Step, error) {
	if c.next >= len(c.steps) {
		return nil, errors.New("canned: no more steps")
	}
	c.next++
	return c.steps[c.next-1], nil
}

func (c *canned) Start(context.Context, *driver.StartRequest) (*driver.Step, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step()
}

func (c *canned) Submit(_ context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.submits = append(c.submits, req.Results)
	return c.step()
}

func (c *canned) Resume(context.Context, string) (*driver.Step, error) {
	return nil, errcode.Errorf(errcode.Unimplemented, "canned: no resume")
}

func (c *canned) Cancel(_ context.Context, thread string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancels = append(c.cancels, thread)
	return nil
}

func (c *canned) ErrorCode(error) errcode.Code { return errcode.Unknown }
func (c *canned) Close() error                 { return nil }

// received returns the submissions and the canceled threads so far.
func (c *canned) received() ([][]driver.ToolResult, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.submits), slices.Clone(c.cancels)
}
