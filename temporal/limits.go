package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// The server refuses an event whose payload passes its blob limit (2 MiB
// by default), failing the workflow task, again and again: a payload the
// loop makes is measured before it goes into the history.

// fitResults keeps one step's results, as the submit activity's input,
// within max bytes: the largest outputs are replaced, one by one, by a
// failed result saying the output was too large for the history (outcome
// TooLarge), as core refuses an output past its own limit. The model is
// told; the run goes on.
func fitResults(results []driver.ToolResult, max int) {
	for size(results) > max {
		big, n := -1, 0
		for i := range results {
			if m := outputSize(&results[i]); m > n {
				big, n = i, m
			}
		}
		if big < 0 {
			return // nothing left to drop
		}
		r := &results[big]
		r.Output, r.Failed, r.Outcome = driver.Output{}, true, core.TooLarge
		r.Error = fmt.Sprintf("output too large for the workflow's history (%d bytes; the limit is %d)", n, max)
	}
}

func outputSize(r *driver.ToolResult) int {
	n := len(r.Output.Text)
	for _, p := range r.Output.Parts {
		n += len(p.Text) + len(p.URL) + len(p.Data)
	}
	return n
}

// fitResult keeps a turn's outcome within max bytes: past it, the calls'
// results are left out (CallsOmitted), then the text.
func fitResult(res *turnResult, max int) {
	if size(res) <= max {
		return
	}
	res.Calls, res.CallsOmitted = nil, true
	if size(res) > max {
		res.Err = errorInfo(errcode.Errorf(errcode.ResourceExhausted, "temporal: the answer (%d bytes) passes the limit of what the history keeps (%d bytes)", len(res.Text), max))
		res.Text = ""
	}
}

func size(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// errorInfo is err as the history keeps it.
func errorInfo(err error) *historyError {
	e := &historyError{Code: errcode.Of(err).String(), Message: err.Error()}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			e.Is = append(e.Is, s.name)
		}
	}
	return e
}

// sentinels are the errors an ErrorInfo remembers matching.
var sentinels = []struct {
	name string
	err  error
}{
	{"max_steps", core.ErrMaxSteps},
	{"budget_exceeded", core.ErrBudgetExceeded},
	{"deadline", context.DeadlineExceeded},
	{"canceled", context.Canceled},
	{"awaiting_approval", core.ErrAwaitingApproval},
	{"thread_busy", core.ErrThreadBusy},
}

// Err returns the error e describes: its code and text, matching what it
// matched.
func (e *historyError) Err() error {
	if e == nil {
		return nil
	}
	var errs []error
	for _, name := range e.Is {
		for _, s := range sentinels {
			if s.name == name {
				errs = append(errs, s.err)
			}
		}
	}
	inner := errors.New(e.Message)
	if len(errs) > 0 {
		inner = &matching{msg: e.Message, errs: errs}
	}
	return &errcode.Error{Code: parseCode(e.Code), Err: inner}
}

// matching is an error's text that matches errs.
type matching struct {
	msg  string
	errs []error
}

func (m *matching) Error() string   { return m.msg }
func (m *matching) Unwrap() []error { return m.errs }

// parseCode returns the code named s (Unknown for none).
func parseCode(s string) errcode.Code {
	for c := errcode.Unknown; c <= errcode.Unavailable; c++ {
		if c.String() == s {
			return c
		}
	}
	return errcode.Unknown
}
