// Package record holds what the durable journals share: how a result and a
// state are written to a database column and read back.
package record

import (
	"encoding/json"
	"fmt"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// result is a driver.Result as the durable journals store it, as JSON
// text. Unlike driver.Result's own encoding, it keeps an empty content
// array apart from no content array (Parts has no omitempty), so a result
// reads back exactly as it was written.
type result struct {
	Text    string         `json:"text,omitempty"`
	Parts   []driver.Part  `json:"parts"`
	Null    bool           `json:"null,omitempty"`
	Failed  bool           `json:"failed,omitempty"`
	Error   string         `json:"error,omitempty"`
	Outcome driver.Outcome `json:"outcome"`
}

// EncodeResult returns r as the JSON text the journals store.
func EncodeResult(r *journaldriver.Result) (string, error) {
	if !known(r.Outcome) {
		return "", fmt.Errorf("encode result: unknown outcome %d", int(r.Outcome))
	}
	b, err := json.Marshal(result{Text: r.Output.Text, Parts: r.Output.Parts, Null: r.Output.Null, Failed: r.Failed, Error: r.Error, Outcome: r.Outcome})
	if err != nil {
		return "", fmt.Errorf("encode result: %w", err)
	}
	return string(b), nil
}

// DecodeResult reads a result written by EncodeResult.
func DecodeResult(s string) (*journaldriver.Result, error) {
	var r result
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	if !known(r.Outcome) { // a number decodes into an Outcome unchecked
		return nil, fmt.Errorf("decode result: unknown outcome %d", int(r.Outcome))
	}
	return &journaldriver.Result{Output: driver.Output{Text: r.Text, Parts: r.Parts, Null: r.Null}, Failed: r.Failed, Error: r.Error, Outcome: r.Outcome}, nil
}

// EntryResult reads the result column (nil for NULL) of the entry of key
// in state: nil for a Started entry; for a finished one its result, or,
// when the column is empty or cannot be read, an error whose code is
// DataLoss (a damaged row: the call must not be run again, nor its
// result guessed).
func EntryResult(key journaldriver.Key, state journaldriver.State, column *string) (*journaldriver.Result, error) {
	switch {
	case column != nil:
		r, err := DecodeResult(*column)
		if err != nil {
			return nil, &errcode.Error{Code: errcode.DataLoss, Op: fmt.Sprintf("journal: the %s entry of call %q (thread %q)", state, key.Call, key.Thread), Err: err}
		}
		return r, nil
	case state.Finished():
		return nil, errcode.Errorf(errcode.DataLoss, "journal: the entry of call %q (thread %q) is %s but holds no result: the row is damaged", key.Call, key.Thread, state)
	}
	return nil, nil
}

// known reports whether o is one of the outcomes driver defines: one whose
// name parses back to it.
func known(o driver.Outcome) bool {
	var back driver.Outcome
	return back.UnmarshalText([]byte(o.String())) == nil && back == o
}

// States are stored by name (driver.State.String): "started",
// "succeeded", "failed" or "submitted".

// ParseState returns the state a stored name names.
func ParseState(name string) (journaldriver.State, error) {
	for _, s := range []journaldriver.State{journaldriver.Started, journaldriver.Succeeded, journaldriver.Failed, journaldriver.Submitted} {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown journal state %q", name)
}

// FinishedState returns the state Finish moves an entry to for r.
func FinishedState(r *journaldriver.Result) string {
	if r.Failed {
		return journaldriver.Failed.String()
	}
	return journaldriver.Succeeded.String()
}
