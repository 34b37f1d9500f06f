package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// A faultSpec is one fault of a -faults file: the fields of the Go fakes'
// Fault types (openaitest.Fault, foundrytest.Fault), in JSON, and which
// requests get it.
type faultSpec struct {
	// On names the requests: "METHOD path" with * for one path segment
	// ("POST agents/sessions/*/events", "POST openai/v1/responses"), a
	// Foundry operation name ("responses.create"), or "*" for any.
	On string `json:"on"`
	// Nth is the first matching request that gets the fault (from 1;
	// default 1), Times how many matching requests get it from there
	// (default 1).
	Nth   int `json:"nth"`
	Times int `json:"times"`

	Status       int    `json:"status"`         // answer with this status, not serving the request
	Code         string `json:"code"`           // the error's code (Foundry)
	Message      string `json:"message"`        // the error's message
	RetryAfterMS int    `json:"retry_after_ms"` // the retry delay a 429 or 5xx asks for
	Drop         bool   `json:"drop"`           // serve the request, then drop the answer
	CloseAfter   int    `json:"close_after"`    // close an event stream after that many events (sessions)
	CutText      int    `json:"cut_text"`       // drop a stream after that many text deltas
	Duplicate    bool   `json:"duplicate"`      // write a stream's events twice
	DelayMS      int    `json:"delay_ms"`       // hold the request first

	mu   sync.Mutex
	seen int // matching requests so far
}

// loadFaults reads a -faults file: a JSON array of faultSpec. An entry
// that could never fire, or not as written, is refused, naming it: a
// pattern that does not parse, an operation the fake does not have, a
// negative count or duration, a status that is not one, an nth and times
// whose last request overflows.
func loadFaults(file string) ([]*faultSpec, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("-faults %s: want a JSON array of faults: %v", file, err)
	}
	specs := make([]*faultSpec, len(entries))
	for i, e := range entries {
		f := &faultSpec{}
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.DisallowUnknownFields()
		err := dec.Decode(f)
		if err == nil {
			err = f.check()
		}
		if err != nil {
			return nil, fmt.Errorf("-faults %s: fault %d (from 0): %v", file, i, err)
		}
		specs[i] = f
	}
	return specs, nil
}

// check fills in f's defaults and returns why f could never fire as
// written, if it could not.
func (f *faultSpec) check() error {
	switch m, pattern, ok := strings.Cut(f.On, " "); {
	case f.On == "":
		return errors.New(`"on" is required`)
	case f.On == "*":
	case ok:
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, "/*") {
			return fmt.Errorf(`"on" %q: want "METHOD path", an operation or "*"`, f.On)
		}
		if _, err := path.Match(strings.Trim(pattern, "/"), ""); err != nil {
			return fmt.Errorf(`"on" %q: the path pattern does not parse: %v`, f.On, err)
		}
	case !slices.Contains(foundrytest.Ops(), foundrytest.Op(f.On)):
		return fmt.Errorf(`"on" %q is no operation of the Foundry fake, nor "METHOD path"`, f.On)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"nth", f.Nth}, {"times", f.Times}, {"retry_after_ms", f.RetryAfterMS}, {"cut_text", f.CutText}, {"delay_ms", f.DelayMS}} {
		if n.v < 0 {
			return fmt.Errorf("%q is negative (%d)", n.name, n.v)
		}
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		return fmt.Errorf(`"status" %d is not an HTTP status`, f.Status)
	}
	f.Nth, f.Times = max(f.Nth, 1), max(f.Times, 1)
	if f.Times > math.MaxInt-f.Nth {
		return fmt.Errorf(`"nth" %d and "times" %d overflow: the fault would never fire`, f.Nth, f.Times)
	}
	return nil
}

// take reports whether the request (method, path, and op, "" when the
// fake has none) gets f, counting it if it matches.
func (f *faultSpec) take(method, p, op string) bool {
	if !f.matches(method, p, op) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	return f.seen >= f.Nth && f.seen < f.Nth+f.Times
}

func (f *faultSpec) matches(method, p, op string) bool {
	if f.On == "*" || op != "" && f.On == op {
		return true
	}
	m, pattern, ok := strings.Cut(f.On, " ")
	if !ok || !strings.EqualFold(m, method) {
		return false
	}
	ok, _ = path.Match(strings.Trim(pattern, "/"), strings.Trim(p, "/"))
	return ok
}

// first returns the first spec the request gets, or nil.
func first(specs []*faultSpec, method, p, op string) *faultSpec {
	for _, f := range specs {
		if f.take(method, p, op) {
			return f
		}
	}
	return nil
}

// openaiFaults returns the sessions fake's Fault function for specs.
func openaiFaults(specs []*faultSpec) func(*openaitest.Request) *openaitest.Fault {
	if len(specs) == 0 {
		return nil
	}
	return func(r *openaitest.Request) *openaitest.Fault {
		f := first(specs, r.Method, r.Path, "")
		if f == nil {
			return nil
		}
		body := ""
		if f.Message != "" {
			body = fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":%q}}`, f.Message, f.Code)
		}
		return &openaitest.Fault{Status: f.Status, Body: body, RetryAfter: ms(f.RetryAfterMS), Drop: f.Drop,
			CloseAfter: f.CloseAfter, CutText: f.CutText, Delay: ms(f.DelayMS)}
	}
}

// foundryFaults returns the Foundry fake's Fault function for specs.
func foundryFaults(specs []*faultSpec) func(*foundrytest.Request) *foundrytest.Fault {
	if len(specs) == 0 {
		return nil
	}
	return func(r *foundrytest.Request) *foundrytest.Fault {
		f := first(specs, r.Method, r.Path, string(r.Op))
		if f == nil {
			return nil
		}
		return &foundrytest.Fault{Status: f.Status, Code: f.Code, Message: f.Message, RetryAfter: ms(f.RetryAfterMS), Drop: f.Drop,
			CutText: f.CutText, Duplicate: f.Duplicate, Delay: ms(f.DelayMS)}
	}
}

// duplicates reports whether a spec asks for duplicate events: the
// sessions fake duplicates every stream's events (it has no per-request
// form).
func duplicates(specs []*faultSpec) bool {
	for _, f := range specs {
		if f.Duplicate {
			return true
		}
	}
	return false
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }
