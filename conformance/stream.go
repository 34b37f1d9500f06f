package conformance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
)

// streamed is what a streamed run gave: its events, result and error.
type streamed struct {
	events []core.Event
	res    *core.Result
	err    error
}

// stream runs input on r as a stream and keeps every event.
func (e *env) stream(r Loop, input string, opts *core.RunOptions) streamed {
	e.t.Helper()
	var s streamed
	st := r.Stream(e.t.Context(), input, opts)
	for ev := range st.Events() {
		s.events = append(s.events, ev)
	}
	s.res, s.err = st.Result()
	return s
}

// wantMessages checks the text events: the pieces of each message make
// its text exactly, none comes after its message is done, and the
// messages' texts are want. It returns the number of pieces.
func (e *env) wantMessages(events []core.Event, want ...string) int {
	e.t.Helper()
	pieces := map[string]*strings.Builder{}
	done := map[string]bool{}
	var texts []string
	n := 0
	for _, ev := range events {
		switch ev.Kind {
		case core.EventTextDelta:
			if done[ev.Item] {
				e.t.Errorf("a piece %q of message %q after it was done", ev.Text, ev.Item)
			}
			if pieces[ev.Item] == nil {
				pieces[ev.Item] = &strings.Builder{}
			}
			pieces[ev.Item].WriteString(ev.Text)
			n++
		case core.EventTextDone:
			got := ""
			if b := pieces[ev.Item]; b != nil {
				got = b.String()
			}
			if got != ev.Text {
				e.t.Errorf("message %q: its pieces make %q, its text is %q", ev.Item, got, ev.Text)
			}
			if done[ev.Item] {
				e.t.Errorf("message %q done twice", ev.Item)
			}
			done[ev.Item] = true
			texts = append(texts, ev.Text)
		}
	}
	if strings.Join(texts, "\x00") != strings.Join(want, "\x00") {
		e.t.Errorf("messages %q, want %q", texts, want)
	}
	return n
}

// streamText is a long answer, in pieces of a few runes.
var streamText = "Streaming — text arrives piece by piece, ünïcödé included, and ends exactly here."

func streamAnswer(e *env) {
	s := script(answer(streamText))
	s.DeltaSize = 4
	r := e.runner(s, nil)
	got := e.stream(r, "Hi", nil)
	if got.err != nil {
		e.t.Fatalf("stream: %v", got.err)
	}
	e.wantText(got.res, streamText)
	n := e.wantMessages(got.events, streamText)
	if e.caps.Streams && n < 2 {
		e.t.Errorf("the answer came in %d piece(s) from a backend that streams, want it in the fake's pieces", n)
	}
	if last := got.events[len(got.events)-1]; last.Kind != core.EventRunFinished || last.Err != nil {
		e.t.Errorf("last event %v (%v), want run_finished without error", last.Kind, last.Err)
	}
}

func streamOrder(e *env) {
	s := script(
		calls("getUserFavoriteCity", `{}`),
		calls("getCityNickname", `{"location":"{{output \"getUserFavoriteCity\"}}"}`, "getCurrentWeatherAtLocation", `{"location":"{{output \"getUserFavoriteCity\"}}"}`),
		answer(`{{output "getUserFavoriteCity"}} ({{output "getCityNickname"}}): {{output "getCurrentWeatherAtLocation"}}.`),
	)
	s.DeltaSize = 5
	r := e.runner(s, nil, weatherTools(e)...)
	got := e.stream(r, "Weather?", nil)
	if got.err != nil {
		e.t.Fatalf("stream: %v", got.err)
	}
	const want = "Seattle, WA (The Emerald City): 70f."
	e.wantText(got.res, want)
	e.wantMessages(got.events, want)
	for _, err := range checkOrder(got.events) {
		e.t.Error(err)
	}
}

// checkOrder checks the order of a run's events: each step's calls arrive
// before the step starts, each call starts before it finishes, and every
// call of a step finishes before its results are submitted; the text of
// the answer comes after the last results; the run ends last, once.
func checkOrder(events []core.Event) []error {
	var errs []error
	fail := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("event %d (%v): %s", i, events[i].Kind, fmt.Sprintf(format, args...)))
	}
	arrived, state := 0, map[string]string{}
	inStep, steps, text := false, 0, false
	for i, ev := range events {
		switch ev.Kind {
		case core.EventToolCall:
			if inStep || text {
				fail(i, "a call arrived inside a step or after the answer began")
			}
			arrived++
		case core.EventStepStarted:
			if ev.Calls != arrived || arrived == 0 {
				fail(i, "the step has %d calls, %d arrived", ev.Calls, arrived)
			}
			inStep, steps, state = true, steps+1, map[string]string{}
		case core.EventCallStarted, core.EventCallFinished, core.EventCallReused, core.EventCallInDoubt:
			id := ev.Call.ID
			switch {
			case !inStep:
				fail(i, "call %s outside a step", id)
			case ev.Kind == core.EventCallStarted && state[id] == "":
				state[id] = "started"
			case ev.Kind == core.EventCallFinished && state[id] == "started", ev.Kind == core.EventCallReused && state[id] == "":
				state[id] = "finished"
			default:
				fail(i, "call %s in state %q", id, state[id])
			}
		case core.EventResultsSubmitted:
			finished := 0
			for _, s := range state {
				if s == "finished" {
					finished++
				}
			}
			if !inStep || finished != arrived || ev.Calls != arrived {
				fail(i, "%d results submitted, %d calls finished of %d", ev.Calls, finished, arrived)
			}
			inStep, arrived = false, 0
		case core.EventTextDelta, core.EventTextDone:
			if inStep {
				fail(i, "text inside a step")
			}
			text = true
		case core.EventRunFinished:
			if i != len(events)-1 {
				fail(i, "the run finished before its last event")
			}
		}
	}
	if steps == 0 || !text {
		errs = append(errs, fmt.Errorf("%d steps, text %v: want steps and an answer", steps, text))
	}
	return errs
}

func streamCut(e *env) {
	e.inject(Fault{Kind: CutStream})
	s := script(answer(streamText))
	s.DeltaSize = 3
	r := e.runner(s, nil)
	got := e.stream(r, "Hi", nil)
	if got.err != nil {
		e.t.Fatalf("stream: %v", got.err)
	}
	e.wantText(got.res, streamText)
	e.wantMessages(got.events, streamText)
}

func streamBreak(e *env) {
	var stopped atomic.Bool
	var runs callCounts
	block := tool(e, "block", "Blocks.", func(ctx context.Context, _ struct{}) (string, error) {
		if stopped.Load() {
			runs.ran(ctx)
			return "unblocked", nil
		}
		<-ctx.Done()
		return "", ctx.Err() // gave up: its call runs again
	}, nil)
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{calls("block", `{}`, "block", `{}`), answer("{{result 0}} {{result 1}}")}}, afterStop}}
	r := e.runner(s, nil, block)
	e.notDurable(r, "ends no turn when its reader stops: the turn goes on to its answer, which Resume returns (StreamBreakResume holds that), so its blocked call is never cut short")
	st := r.Stream(e.t.Context(), "go", nil)
	for ev := range st.Events() {
		if ev.Kind == core.EventCallStarted {
			break
		}
	}
	res, err := st.Result()
	if !errors.Is(err, core.ErrStreamStopped) || !errors.Is(err, context.Canceled) {
		e.t.Fatalf("Result error = %v, want ErrStreamStopped (context.Canceled)", err)
	}
	e.wantCode(err, errcode.Canceled)
	if res == nil || res.Thread == "" {
		e.t.Fatalf("Result = %+v, want the thread", res)
	}
	if got := e.results(); len(got) != 0 {
		e.t.Errorf("results were sent after the reader stopped: %+v", got)
	}
	e.wantNoRunGoroutines()
	stopped.Store(true)
	e.wantResumable(r, res.Thread, "unblocked unblocked", &runs)
}

// breakKinds are the events at which StreamBreakResume stops reading.
// Every run of its script owes each of them, on every backend: the runner
// reports a step's calls, its start, each call's start and end and the
// results' submission itself, and the answer's text in one piece at least
// (whole, from a backend that does not stream: Capabilities.Streams only
// says whether it comes in more). So a run that reports none of a kind
// fails the scenario, on every loop: on a DurableLoop the turn goes on
// when its reader stops, and the resume waits for its answer.
var breakKinds = []core.EventKind{core.EventToolCall, core.EventStepStarted, core.EventCallStarted, core.EventCallFinished, core.EventResultsSubmitted, core.EventTextDelta}

// streamBreakAt returns the scenario whose reader stops at the first event
// of kind, in a two-step turn whose calls have side effects: a resume
// (Runner.Resume) finishes the turn with the answer, each function run
// once, each result received once, whatever had happened when the reader
// stopped.
func streamBreakAt(kind core.EventKind) func(*env) {
	return func(e *env) {
		var runs callCounts
		charge := tool(e, "charge", "Charges a card.", func(ctx context.Context, in struct {
			N int `json:"n"`
		}) (string, error) {
			runs.ran(ctx)
			return fmt.Sprintf("charged %d", in.N), nil
		}, nil)
		s := script(calls("charge", `{"n":1}`), calls("charge", `{"n":2}`), answer(`done: {{output "charge"}} in all`))
		s.DeltaSize = 3
		r := e.runner(s, nil, charge)
		st := r.Stream(e.t.Context(), "charge twice", nil)
		seen := false
		for ev := range st.Events() {
			if ev.Kind == kind {
				seen = true
				break
			}
		}
		res, err := st.Result()
		if !seen {
			// Owed by every backend (see breakKinds): lost, not unsupported.
			e.t.Fatalf("the run reported no %v event, which every run of calls and an answer owes (err %v)", kind, err)
		}
		if res == nil || res.Thread == "" {
			e.t.Fatalf("Result = %+v, %v; want the thread", res, err)
		}
		e.wantResumable(r, res.Thread, "done: charged 2 in all", &runs)
	}
}

// clientCode matches the stack of a goroutine running a run's code: the
// runner's, or the built-in backends' (not their fakes').
var clientCode = regexp.MustCompile(`toolrelay/toolrelay/(core|openai|foundry|responses|internal/respond|internal/wirelimit)\.|openai-go/v3/packages/ssestream`)

// wantNoRunGoroutines checks, within a second, that no goroutine is left
// running a run's code.
func (e *env) wantNoRunGoroutines() {
	e.t.Helper()
	var left []string
	for range 100 {
		if left = e.runGoroutines(); len(left) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Errorf("%d goroutines left running the run's code:\n%s", len(left), strings.Join(left, "\n\n"))
}

// runGoroutines returns the stacks of the goroutines, other than the
// test's, running a run's code (but those that live as long as the
// runner: its lease keeper, and its idle workers, which wait for the
// calls of its next steps, their stack's top frame core's workers.loop).
func (e *env) runGoroutines() []string {
	var found []string
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		_, stack, _ := strings.Cut(g, "\n")
		idle := strings.HasPrefix(stack, "github.com/toolrelay/toolrelay/core.(*workers).loop(")
		if clientCode.MatchString(g) && !idle && !strings.Contains(g, "renewLeases") && !strings.Contains(g, "toolrelay/conformance.") {
			found = append(found, g)
		}
	}
	return found
}

func streamSlowReader(e *env) {
	const size = 1 << 20
	text := strings.Repeat("0123456789abcdef", size/16)
	s := script(answer(text))
	s.DeltaSize = 256
	r := e.runner(s, nil)
	e.notDurable(r, "reads the service's stream in its worker, whatever its reader does (the reader may be in another process): the workflow keeps the text for it")
	st := r.Stream(e.t.Context(), "Hi", nil)
	var (
		n       int
		growth  int64
		total   strings.Builder
		readers []string
	)
	for ev, err := range st.Events() {
		if err != nil {
			e.t.Fatalf("stream: %v", err)
		}
		if ev.Kind != core.EventTextDelta {
			continue
		}
		total.WriteString(ev.Text)
		if n++; n == 10 || (n == 1 && len(ev.Text) == size) {
			// Pause: a backend that read ahead would do it now, in a
			// goroutine of its own, into memory.
			before := liveHeap()
			time.Sleep(300 * time.Millisecond)
			readers = e.runGoroutines()
			growth = liveHeap() - before
		}
	}
	if _, err := st.Result(); err != nil {
		e.t.Fatal(err)
	}
	if total.String() != text {
		e.t.Errorf("the pieces make %d bytes, want the %d of the answer", total.Len(), len(text))
	}
	if len(readers) > 0 {
		e.t.Errorf("while the reader paused, %d other goroutines ran the run's code (reading ahead?):\n%s", len(readers), strings.Join(readers, "\n\n"))
	}
	if growth > size/4 {
		e.t.Errorf("the live heap grew by %d bytes while the reader paused, want under %d: the stream was read ahead", growth, size/4)
	}
	e.t.Logf("%d pieces; the live heap grew by %d bytes during the pause", n, growth)
}

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func streamReasoning(e *env) {
	think := calls("getUserFavoriteCity", `{}`)
	think.Reasoning = "The user asks about the weather; first, their city."
	s := script(think, coretest.Step{Reasoning: " Now I can answer.", Text: "Sunny in {{output \"getUserFavoriteCity\"}}."})
	s.DeltaSize = 6
	r := e.runner(s, nil, weatherTools(e)...)
	got := e.stream(r, "Weather?", nil)
	if got.err != nil {
		e.t.Fatalf("stream: %v", got.err)
	}
	e.wantText(got.res, "Sunny in Seattle, WA.")
	var reasoning strings.Builder
	var order []string
	for _, ev := range got.events {
		switch ev.Kind {
		case core.EventReasoningDelta:
			reasoning.WriteString(ev.Text)
			if len(order) == 0 || order[len(order)-1] != "reasoning" {
				order = append(order, "reasoning")
			}
		case core.EventToolCall, core.EventTextDone:
			order = append(order, ev.Kind.String())
		}
	}
	want, wantOrder := think.Reasoning+" Now I can answer.", []string{"reasoning", "tool_call", "reasoning", "text_done"}
	if !e.caps.Streams {
		// Reasoning is streamed only; a backend that does not stream
		// gives none.
		want, wantOrder = "", []string{"tool_call", "text_done"}
	}
	if reasoning.String() != want {
		e.t.Errorf("reasoning %q, want %q", reasoning.String(), want)
	}
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		e.t.Errorf("order %v, want %v", order, wantOrder)
	}
}
