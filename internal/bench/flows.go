package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// A Func is a function as the baselines call it: its arguments as JSON in,
// its output as text out.
type Func func(ctx context.Context, args json.RawMessage) (string, error)

// LookupArgs are the arguments of the benchmarks' tool, "lookup".
type LookupArgs struct {
	ID string `json:"id" jsonschema:"The record's ID."`
}

// Record is what "lookup" returns.
type Record struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Score int    `json:"score"`
}

// A Hold is what "lookup" does before it returns: wait for something.
type Hold func(ctx context.Context, id string) error

// Sleep returns a Hold that sleeps d.
func Sleep(d time.Duration) Hold {
	return func(ctx context.Context, _ string) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// record is the record "lookup" returns for id.
func record(id string) Record {
	return Record{ID: id, Name: "record " + id, Score: len(id)}
}

// Lookup returns the tool "lookup", which runs hold (if not nil) and
// returns a record, and the same function as the baselines call it: its
// arguments decoded with encoding/json, its output encoded with it,
// nothing validated. opts (which may be nil) are the tool's options for
// toolrelay: the benchmarks declare it idempotent, or not, to measure
// both kinds of call.
func Lookup(hold Hold, opts *core.ToolOptions) (*core.Toolbox, map[string]Func) {
	fn := func(ctx context.Context, in LookupArgs) (Record, error) {
		if hold != nil {
			if err := hold(ctx, in.ID); err != nil {
				return Record{}, err
			}
		}
		return record(in.ID), nil
	}
	tool, err := core.NewTool("lookup", "Look up a record by ID.", fn, opts)
	if err != nil {
		panic(err) // the tool is fixed: this cannot fail
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		panic(err)
	}
	raw := func(ctx context.Context, args json.RawMessage) (string, error) {
		var in LookupArgs
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(out)
		return string(b), err
	}
	return tools, map[string]Func{"lookup": raw}
}

// Script returns a script of turns turns; in each, the model takes steps
// steps of calls parallel calls of "lookup", then answers with the output
// of the last call. Arguments alternate between the object and the string
// form.
func Script(turns, steps, calls int) *coretest.Script {
	s := &coretest.Script{Turns: make([]coretest.Turn, turns)}
	for t := range s.Turns {
		st := make([]coretest.Step, 0, steps+1)
		for i := range steps {
			cs := make([]coretest.Call, calls)
			for c := range cs {
				cs[c] = coretest.Call{Name: "lookup", Arguments: json.RawMessage(fmt.Sprintf(`{"id":"r-%d-%d"}`, i, c)), AsString: c%2 == 1}
			}
			st = append(st, coretest.Step{Calls: cs})
		}
		st = append(st, coretest.Step{Text: `done: {{output "lookup"}}`})
		s.Turns[t].Steps = st
	}
	return s
}

// Answer is the answer every turn of a [Script] of steps steps and calls
// calls per step ends with.
func Answer(steps, calls int) string {
	b, _ := json.Marshal(record(fmt.Sprintf("r-%d-%d", steps-1, calls-1)))
	return "done: " + string(b)
}

// check returns an error unless text is the expected answer.
func check(text, want string) error {
	if text != want {
		return fmt.Errorf("answer %q, want %q", truncate(text), truncate(want))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
