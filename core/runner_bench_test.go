package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// stepper is a backend without a service: every step asks for calls calls
// of "lookup" until steps steps were taken, then answers. It measures what
// the runner itself costs per step.
type stepper struct {
	steps, calls int
	taken        int
	// usage, if set, is reported with every step, made by the model
	// "bench-model".
	usage core.Usage
	// turn, if set, ends a turn (the model answers) after every turn
	// steps, so that a run's totals stay short.
	turn, inTurn int
}

func (s *stepper) Name() string { return "stepper" }

func (s *stepper) next() *driver.Step {
	st := &driver.Step{Thread: "thread", Turn: "turn"}
	if s.usage != (core.Usage{}) {
		st.Usage, st.Model = s.usage, "bench-model"
	}
	if s.taken == s.steps || s.turn > 0 && s.inTurn == s.turn {
		s.inTurn = 0
		st.Text = "done"
		return st
	}
	s.taken++
	s.inTurn++
	st.Calls = make([]core.Call, s.calls)
	for i := range st.Calls {
		id := "call-" + strconv.Itoa(s.taken) + "-" + strconv.Itoa(i)
		st.Calls[i] = core.Call{Thread: "thread", Turn: "turn", ID: id, Name: "lookup", Arguments: json.RawMessage(`{"id":"` + id + `"}`)}
	}
	return st
}

func (s *stepper) Start(context.Context, *driver.StartRequest) (*driver.Step, error) {
	return s.next(), nil
}
func (s *stepper) Submit(context.Context, *driver.SubmitRequest) (*driver.Step, error) {
	return s.next(), nil
}
func (s *stepper) Resume(context.Context, string) (*driver.Step, error) { return s.next(), nil }
func (s *stepper) ErrorCode(error) errcode.Code                         { return errcode.Unknown }
func (s *stepper) Close() error                                         { return nil }

// BenchmarkRunnerStep measures the runner's own cost per step, with no
// service behind it: one op is one step of calls calls of an instant typed
// tool (look up the tool, parse and validate the arguments, journal the
// call in memory, run the handler, encode its output, emit the events).
func BenchmarkRunnerStep(b *testing.B) {
	type args struct {
		ID string `json:"id" jsonschema:"The record's ID."`
	}
	type record struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	tool, err := core.NewTool("lookup", "Look up a record.", func(ctx context.Context, in args) (record, error) {
		return record{ID: in.ID, Name: "record " + in.ID}, nil
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		b.Fatal(err)
	}
	for _, calls := range []int{1, 8} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			r := core.NewRunner(&stepper{steps: b.N, calls: calls}, tools, &core.Options{MaxSteps: b.N + 1})
			b.ReportAllocs()
			b.ResetTimer()
			res, err := r.Run(context.Background(), "go", nil)
			if err != nil {
				b.Fatal(err)
			}
			if res.Steps != b.N || len(res.Calls) != b.N*calls {
				b.Fatalf("Run took %d steps and %d calls, want %d and %d", res.Steps, len(res.Calls), b.N, b.N*calls)
			}
		})
	}
}
