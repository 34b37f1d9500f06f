package coretest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// Backend is an in-memory [driver.Backend] that plays a Script: the fake
// model runs inside it, with no service and no network. Every thread plays
// the script from its first turn. It records what it receives (see
// [Backend.Received]) and can inject faults (see [BackendOptions]).
type Backend struct {
	script *Script
	opts   BackendOptions

	mu       sync.Mutex
	threads  map[string]*thread
	nthread  int
	ncall    int
	ops      int
	received []Received
}

type thread struct {
	model      *Model
	turn       string
	nturn      int
	pending    []core.Call
	text       string // last answer
	reasoning  string // the reasoning of the last step played
	commentary string // the commentary of the last step played
	streamed   int    // steps streamed, which name their commentary's items
}

// BackendOptions configure a Backend. nil is usable.
type BackendOptions struct {
	// Name is the backend's name; empty means "coretest".
	Name string
	// Tools, if set, tells the model which tools exist (as they are at
	// each start and submission), for deferred
	// loading: a deferred tool can be called only after a search found it.
	Tools *core.Toolbox
	// Fault, if set, is called before each operation (op is "start",
	// "submit" or "resume"; n counts operations from 1). A non-nil error is
	// returned by the operation, which then does nothing else.
	Fault func(op string, n int) error
	// Lose, if set, is called after each operation that succeeded; when it
	// returns true the operation's effect stays but its answer is lost: the
	// operation returns ErrLostResponse.
	Lose func(op string, n int) bool
	// DeltaSize, for a call whose context carries a [driver.Observer],
	// streams the model's answer (and its commentary, marked as such) to
	// it in pieces of at most that many runes, then whole; zero streams it
	// in one piece.
	DeltaSize int
}

// Received is what a fake service received, in neutral terms: a user input,
// a submission of results, or a cancellation.
type Received struct {
	// Kind is "input", "results" or "cancel".
	Kind string `json:"kind"`
	// Thread is the thread it arrived on.
	Thread string `json:"thread,omitempty"`
	// Input is the user's input (Kind "input").
	Input string `json:"input,omitempty"`
	// Parts are the image and file parts sent with the input, in order.
	Parts []driver.Part `json:"parts,omitempty"`
	// Format names the response format the request asked for, if any
	// (on a wire whose formats have no name, such as the sessions API's,
	// its type: "json_schema").
	Format string `json:"format,omitempty"`
	// Results are the results, in the order received (Kind "results").
	Results []Delivered `json:"results,omitempty"`
}

// ErrLostResponse is returned by an operation whose answer a
// BackendOptions.Lose hook dropped.
var ErrLostResponse = errors.New("coretest: response lost")

// ErrUnknownThread is returned for a thread the backend does not have.
var ErrUnknownThread = errors.New("coretest: unknown thread")

// NewBackend returns a Backend playing script. opts may be nil.
func NewBackend(script *Script, opts *BackendOptions) *Backend {
	b := &Backend{script: script, threads: map[string]*thread{}}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Name == "" {
		b.opts.Name = "coretest"
	}
	return b
}

var _ driver.Backend = (*Backend)(nil)

// Name implements [driver.Backend].
func (b *Backend) Name() string { return b.opts.Name }

// Capabilities implements [driver.CapabilityReporter]. Its model calls
// tools by their names, a namespace's ("crm.lookup") too: it has
// Namespaces.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{DeferredLoading: true, FailureFlag: true, ContentArrays: true, InputImages: true, InputFiles: true, ResponseFormat: true, Streams: true, Namespaces: true}
}

// Start implements [driver.Backend].
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	step, err := b.start(ctx, req)
	return b.observed(ctx, step, err)
}

// Submit implements [driver.Backend].
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	step, err := b.submit(ctx, req)
	return b.observed(ctx, step, err)
}

// observed streams the reasoning and the answer of step to ctx's
// observer, if any, outside the backend's lock.
func (b *Backend) observed(ctx context.Context, step *driver.Step, err error) (*driver.Step, error) {
	o := driver.ObserverFrom(ctx)
	if err != nil || o == nil {
		return step, err
	}
	size := cmp.Or(b.opts.DeltaSize, b.script.DeltaSize)
	b.mu.Lock()
	var reasoning, commentary string
	var n int
	if th := b.threads[step.Thread]; th != nil {
		reasoning, th.reasoning = th.reasoning, ""
		commentary, th.commentary = th.commentary, ""
		th.streamed++
		n = th.streamed
	}
	b.mu.Unlock()
	if reasoning != "" {
		for _, piece := range fakeapi.Chunks(reasoning, size) {
			if err := o(driver.Delta{Kind: driver.ReasoningDelta, Item: step.Thread + "/r", Text: piece}); err != nil {
				return &driver.Step{Thread: step.Thread}, err
			}
		}
	}
	if commentary != "" {
		if err := message(o, step.Thread+"/c"+strconv.Itoa(n), commentary, size, true); err != nil {
			return &driver.Step{Thread: step.Thread}, err
		}
	}
	if len(step.Calls) > 0 || step.Text == "" {
		return step, nil
	}
	if err := message(o, step.Thread+"/"+step.Turn, step.Text, size, false); err != nil {
		return &driver.Step{Thread: step.Thread}, err
	}
	return step, nil
}

// message streams the text of message item to o, in pieces of at most
// size runes, then whole, marked as commentary or not.
func message(o driver.Observer, item, text string, size int, commentary bool) error {
	for _, piece := range fakeapi.Chunks(text, size) {
		if err := o(driver.Delta{Kind: driver.TextDelta, Item: item, Text: piece, Commentary: commentary}); err != nil {
			return err
		}
	}
	return o(driver.Delta{Kind: driver.TextDone, Item: item, Text: text, Commentary: commentary})
}

func (b *Backend) start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.fault(ctx, "start"); err != nil {
		return nil, err
	}
	th, id := b.threads[req.Thread], req.Thread
	if req.Thread == "" {
		b.nthread++
		id = "thread_" + strconv.Itoa(b.nthread)
		th = &thread{model: b.script.NewModel()}
		if b.opts.Tools != nil {
			th.model.SetTools(toolInfos(b.opts.Tools))
		}
		b.threads[id] = th
	}
	if th == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownThread, req.Thread)
	}
	b.received = append(b.received, Received{Kind: "input", Thread: id, Input: req.Input, Parts: req.Parts, Format: formatName(req.Format)})
	if err := th.model.Begin(req.Input); err != nil {
		return nil, err
	}
	th.nturn++
	th.turn = "turn_" + strconv.Itoa(th.nturn)
	step, err := b.next(id, th)
	return b.lose("start", step, err)
}

func (b *Backend) submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.fault(ctx, "submit"); err != nil {
		return nil, err
	}
	th := b.threads[req.Step.Thread]
	if th == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownThread, req.Step.Thread)
	}
	// Results that do not answer the pending calls are refused, as the
	// services refuse them (400), and not received.
	if len(req.Results) != len(th.pending) {
		return nil, errcode.Errorf(errcode.InvalidArgument, "coretest: %d results for %d pending calls", len(req.Results), len(th.pending))
	}
	for i, c := range th.pending {
		if id := req.Results[i].Call.ID; id != c.ID {
			return nil, errcode.Errorf(errcode.InvalidArgument, "coretest: no pending call %q", id)
		}
	}
	got := make([]Delivered, len(req.Results))
	for i, r := range req.Results {
		got[i] = Delivered{CallID: r.Call.ID, Name: r.Call.Name, Output: r.Output.String(), Failed: r.Failed, Error: r.Error}
	}
	b.received = append(b.received, Received{Kind: "results", Thread: req.Step.Thread, Results: got, Format: formatName(req.Format)})
	if err := th.model.Deliver(got); err != nil {
		return nil, err
	}
	if b.opts.Tools != nil {
		// The toolbox may have changed mid-run: the next step sees it
		// as it is.
		th.model.SetTools(toolInfos(b.opts.Tools))
	}
	th.pending = nil
	step, err := b.next(req.Step.Thread, th)
	return b.lose("submit", step, err)
}

// Resume implements [driver.Backend].
func (b *Backend) Resume(ctx context.Context, id string) (*driver.Step, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.fault(ctx, "resume"); err != nil {
		return nil, err
	}
	th := b.threads[id]
	if th == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownThread, id)
	}
	return &driver.Step{Thread: id, Turn: th.turn, Calls: slices.Clone(th.pending), Text: th.text}, nil
}

// Cancel implements [driver.Canceler]: it drops the pending calls, ending
// the turn.
func (b *Backend) Cancel(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if th := b.threads[id]; th != nil {
		th.pending = nil
		th.model.Cancel()
		b.received = append(b.received, Received{Kind: "cancel", Thread: id})
	}
	return nil
}

// ErrorCode implements [driver.Backend].
func (b *Backend) ErrorCode(err error) errcode.Code {
	var te *driver.TurnError
	switch {
	case errors.Is(err, ErrUnknownThread):
		return errcode.NotFound
	case errors.As(err, &te):
		return errcode.Internal
	}
	return errcode.Unknown
}

// Close implements [driver.Backend].
func (b *Backend) Close() error { return nil }

// Received returns what the backend received so far, in order.
func (b *Backend) Received() []Received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.received)
}

func formatName(f *driver.Format) string {
	if f == nil {
		return ""
	}
	return f.Name
}

// lose applies the Lose hook to the outcome of op.
func (b *Backend) lose(op string, step *driver.Step, err error) (*driver.Step, error) {
	if err == nil && b.opts.Lose != nil && b.opts.Lose(op, b.ops) {
		return nil, ErrLostResponse
	}
	return step, err
}

func (b *Backend) fault(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.ops++
	if b.opts.Fault != nil {
		return b.opts.Fault(op, b.ops)
	}
	return nil
}

// next plays the model's next step on th and turns it into a driver.Step.
func (b *Backend) next(id string, th *thread) (*driver.Step, error) {
	a, err := th.model.Next()
	if err != nil {
		return nil, err
	}
	if a.Fail != nil {
		return nil, &driver.TurnError{Backend: b.Name(), Thread: id, Turn: th.turn, Status: "failed", Code: a.Fail.Code, Message: a.Fail.Message}
	}
	step := &driver.Step{Thread: id, Turn: th.turn, Text: a.Text}
	for _, c := range a.Calls {
		callID := c.ID
		if callID == "" {
			b.ncall++
			callID = "call_" + strconv.Itoa(b.ncall)
		}
		args := []byte(c.Arguments)
		if c.AsString {
			s, _ := jsonLiteral(c.Arguments)
			args = []byte(s)
		}
		step.Calls = append(step.Calls, core.Call{Thread: id, Turn: th.turn, ID: callID, Name: c.Name, Arguments: args})
	}
	th.pending = slices.Clone(step.Calls)
	if len(step.Calls) == 0 {
		th.text = a.Text
	}
	th.reasoning, th.commentary = a.Reasoning, a.Commentary
	return step, nil
}

func toolInfos(tb *core.Toolbox) []ToolInfo {
	var infos []ToolInfo
	for _, t := range tb.Tools() {
		infos = append(infos, ToolInfo{Name: t.Name(), Description: t.Description(), Deferred: t.DeferLoading()})
	}
	return infos
}
