package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // postgres:// for ApprovalSecondProcess
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite:// for ApprovalSecondProcess
)

type scenario struct {
	name        string
	explanation string
	run         func(e *env)
}

// scenarios is the suite, in the order it runs.
var scenarios = []scenario{
	{"TextOnly", "an answer without calls ends the run with the model's text and sends nothing else", textOnly},
	{"OneCall", "one call is run and its output goes back; the answer quotes it", oneCall},
	{"NoParameters", "a function without parameters runs whatever empty form its arguments take", noParameters},
	{"ParallelCalls", "calls of one step run concurrently and their results go back together, in call order", parallelCalls},
	{"ConcurrencyBound", "a step with more calls than Options.Concurrency runs exactly that many at once, never one more: counted in the handlers and in the run's events", concurrencyBound},
	{"Chain", "a chain of steps (the seed's weather bot) runs to the final answer", chain},
	{"ArgumentsAsString", "arguments delivered as a JSON string holding an object are accepted", argumentsAsString},
	{"ArgumentsAsObject", "arguments delivered as a JSON object are accepted", argumentsAsObject},
	{"HandlerError", "a handler's error becomes a failed result the model reads, and the run goes on", handlerError},
	{"HiddenErrorText", "internal error text never reaches the model; a ModelError's text does", hiddenErrorText},
	{"UnknownTool", "a call of an unknown tool gets a failed result naming it, and the run goes on", unknownTool},
	{"InvalidJSON", "arguments that are not JSON get a failed result, and the handler does not run", invalidJSON},
	{"SchemaViolation", "arguments that break the schema get a failed result naming the field, and the handler does not run", schemaViolation},
	{"HandlerPanic", "a panicking handler gives a failed result, and the loop survives", handlerPanic},
	{"HandlerTimeout", "a handler past its timeout gives a failed result saying so", handlerTimeout},
	{"CancelMidStep", "canceling the caller's context mid-step ends the run with Canceled and sends no result; the turn is left waiting: a resume finishes it (each call once), or Runner.Cancel abandons it and the thread takes new input", cancelMidStep},
	{"CancelThenNewInput", "a turn stopped by its run's context and abandoned with Runner.Cancel leaves the thread taking new input", cancelThenNewInput},
	{"Budget/ToolCalls", "a run whose next calls would pass its budget stops before running them, sending nothing, with ErrBudgetExceeded (ResourceExhausted); a resume with the same budget stops again, one with a raised budget finishes the turn, each call once", budgetToolCalls},
	{"Budget/Tokens", "a run whose token budget is spent stops before its next request, its step's calls not run; a resume with the budget lifted finishes the turn", budgetTokens},
	{"Budget/Refused", "a budget no runner may take (a negative limit other than Unlimited, a cost or a price that is NaN, infinite or negative), in a run's options or the runner's, fails Run, Stream and Resume with InvalidArgument before anything is sent or run", budgetRefused},
	{"Budget/ResumeKeeps", "a resume given no budget holds the turn to its run's; one given a budget overrides the turn's field by field", budgetResumeKeeps},
	{"Budget/ServiceBudget", "a turn the service ends on its spending limit (budget_reached) gives ErrBudgetExceeded, as a run's own budget does", budgetReached},
	{"AgentTool/Answer", "an agent tool runs its child (a runner on a fake of its own) on the call's input, once, and the child's answer is the call's result", agentAnswer},
	{"AgentTool/Events", "the parent's stream gives the child's events, the end of its run included, with the parent's call as their path and before that call's end; the parent's OnEvent gets the child's calls' events so", agentEvents},
	{"AgentTool/Approval", "a child's call that needs approval pauses the parent: the parent's Approvals lists it, the parent's Decide decides it, the parent's Resume resumes both, the child's turn the same one", agentApproval},
	{"AgentTool/CrashMidChild", "a parent stopped mid-child (after the child's call ran, before its result was sent), resumed in a second process over the same journal, resumes the same child turn: one child turn, one effect", agentCrash},
	{"AgentTool/Budget", "the child runs under what the parent's budget has left: past it both stop with ErrBudgetExceeded; a resume with the same budget stops again, one with a raised budget resumes the child, each of its calls once, and the parent counts the child's calls", agentBudget},
	{"AgentTool/Cancel", "canceling the parent's context (on a durable loop, which its caller's context does not end, canceling the turn: Runner.Cancel) cancels the child's run: the child's handler sees its context end, and the parent ends with Canceled", agentCancel},
	{"AgentTool/CancelPaused", "Runner.Cancel of a parent paused on its child's approval abandons the child's turn too: the child's service is told (a cancellation, or its pending call answered as stopped), the child's call never runs, and the parent's thread takes new input", agentCancelPaused},
	{"MaxSteps", "a model that keeps calling ends the run with ErrMaxSteps, and the thread is not left waiting", maxSteps},
	{"RepeatedCallID", "a step that repeats a call id ends the run with Internal, runs and sends nothing, and the turn is canceled, not left waiting", repeatedCallID},
	{"ResultNotPending", "a result for a call that is not pending is refused by the service (InvalidArgument), recorded nowhere, and the turn still waits for its call", resultNotPending},
	{"LargeOutput", "a 1 MiB output goes back intact", largeOutput},
	{"OutputTooLarge", "an output past the runner's limit gives a failed result saying so, and the run goes on", outputTooLarge},
	{"ArgumentsTooLarge", "arguments past the runner's limit give a failed result saying so, and the handler does not run", argumentsTooLarge},
	{"NonASCII", "non-ASCII text survives in arguments, outputs and the answer", nonASCII},
	{"ContentArray", "a content-array output reaches the service (as an array where it accepts one)", contentArray},
	{"NullOutput", "a nil result is sent as the protocol allows, and the run goes on", nullOutput},
	{"DeferredTool", "a deferred tool is found through tool search and its call is served", deferredTool},
	{"SecondRunSameThread", "a second run on the same thread keeps the context and sends only new items", secondRun},
	{"ResumeAfterLostResponse", "after a lost response, the kept result is sent again, the function does not run twice, and the model answers the step once (the lost request's answer is found, not asked for again)", resumeAfterLostResponse},
	{"JournalReuse", "a result journaled before the process died, unsent, is sent on the resume and the function does not run again (the service alone cannot tell it ran)", journalReuse},
	{"OfferedTools", "every tool of the toolbox is offered to the model (the fakes refuse calls of tools they were not given)", offeredTools},
	{"ResumeUnknownThread", "resuming a thread the service does not know is NotFound", resumeUnknownThread},
	{"ResumeFinishedThread", "resuming a thread whose turn is over returns its answer and runs nothing", resumeFinishedThread},
	{"DuplicateDelivery", "a duplicated event or response does not run a function twice", duplicateDelivery},
	{"RateLimitThenSuccess", "a 429 followed by success completes the run", rateLimitThenSuccess},
	{"RateLimitExhausted", "429s past the retries end the run with ResourceExhausted", rateLimitExhausted},
	{"ServerErrorBurst", "a burst of 500s followed by success completes the run", serverErrorBurst},
	{"AuthenticationFailure", "a refused credential gives PermissionDenied", authenticationFailure},
	{"TurnFailure", "a service-side failure of the turn ends the run with an error carrying the service's message", turnFailure},
	{"ApprovalMixedStep", "a step whose calls need approval pauses after the others ran; approved calls run once, denied ones tell the model, and the results go together in call order", approvalMixedStep},
	{"ApprovalSecondProcess", "a run paused for approval with a durable journal (SQLite; PostgreSQL when TOOLRELAY_TEST_POSTGRES names one) is decided and resumed by a second backend and journal opened anew; the approved call runs once", approvalSecondProcess},
	{"ApprovalExpires", "a call left undecided past its time is answered to the model as denied, never left parked: Runner.ResumeExpired finds and resumes its run", approvalExpires},
	{"LeftOnService/Answer", "a run that ends with its answer leaves nothing on the service once its backend is closed: no session or conversation, no agent or agent version made for it", leftAfterAnswer},
	{"LeftOnService/PauseResume", "a run paused for approval, then decided, resumed and finished in the same process, leaves nothing on the service once its backend is closed", leftAfterPauseResume},
	{"LeftOnService/Takeover", "a run paused for approval in a process that dies, decided and finished by a second one, leaves nothing on the service once the second is closed; the second makes no agent (version) of its own for the same definition", leftAfterTakeover},
	{"LeftOnService/SeveralProcesses", "a run that pauses again in each of several processes resuming it in turn keeps one agent (version) at most on the service, and leaves nothing once the last is closed", leftAfterSeveral},
	{"ServiceApproval", "the service's own approval requests are decided through the same API and answered on its wire", serviceApproval},
	{"ServiceApprovalCancel", "Cancel abandons a turn paused on the service's own approval request, answering it on its wire (a denial, not a function's output), so that the thread takes new input", serviceApprovalCancel},
	{"RichInput", "images and files go with the input as the backend's wire carries them; a kind it cannot carry is refused before anything is sent", richInput},
	{"StructuredOutput", "a run can ask for an answer of a Go type's schema, sent on every request of the run, and decode it; backends that cannot set it refuse before sending", structuredOutput},
	{"StreamAnswer", "a streamed answer arrives in pieces that make exactly its text, once, then the run ends", streamAnswer},
	{"StreamOrder", "a streamed run reports each step's calls, their runs and their results in order, then the answer's text", streamOrder},
	{"StreamReasoning", "a streaming backend hands over the model's reasoning summaries as they are written, each before what it led to", streamReasoning},
	{"StreamCutMidText", "after the stream drops in the middle of a message, the reader gets the rest of it: no repeat, no gap", streamCut},
	{"StreamBreak", "a reader that stops ends the run as Canceled, sends nothing, leaves no goroutine behind, and a resume finishes the turn (each call once)", streamBreak},
	{"StreamBreakResume/ToolCall", "a reader that stops at a step's calls leaves the turn resumable: the resume finishes it, each function run once, each result received once", streamBreakAt(core.EventToolCall)},
	{"StreamBreakResume/StepStarted", "a reader that stops as a step starts leaves the turn resumable, the same on every backend", streamBreakAt(core.EventStepStarted)},
	{"StreamBreakResume/CallStarted", "a reader that stops as a call starts leaves the turn resumable, the same on every backend", streamBreakAt(core.EventCallStarted)},
	{"StreamBreakResume/CallFinished", "a reader that stops once a call's result is journaled, not sent, leaves the turn resumable: the resume sends the kept result", streamBreakAt(core.EventCallFinished)},
	{"StreamBreakResume/ResultsSubmitted", "a reader that stops once results went leaves the turn resumable, the same on every backend", streamBreakAt(core.EventResultsSubmitted)},
	{"StreamBreakResume/TextDelta", "a reader that stops in the answer's text leaves a turn whose resume gives the answer", streamBreakAt(core.EventTextDelta)},
	{"StreamSlowReader", "a slow reader slows the read of the service's stream: nothing is read ahead into memory", streamSlowReader},
}

func textOnly(e *env) {
	r := e.runner(script(answer("Hello! How can I help?")), nil)
	res := e.run(r, "Hi", nil)
	e.wantText(res, "Hello! How can I help?")
	if res.Steps != 0 || len(e.results()) != 0 {
		e.t.Errorf("steps %d, results sent %d; want none", res.Steps, len(e.results()))
	}
	if diff := cmp.Diff([]string{"input"}, e.kinds()); diff != "" {
		e.t.Errorf("received (-want +got):\n%s", diff)
	}
}

func oneCall(e *env) {
	r := e.runner(script(calls("get_customer", `{"customer_id":"123"}`), answer(`The customer is {{output "get_customer"}}`)), nil,
		tool(e, "get_customer", "Look up a customer by ID.", getCustomer, nil))
	res := e.run(r, "Who is customer 123?", nil)
	out := `{"found":true,"customer":{"name":"Example Customer","plan":"pro"}}`
	e.wantText(res, "The customer is "+out)
	got := e.results()
	if len(got) != 1 || got[0].Output != out || got[0].Failed || got[0].Name != "get_customer" {
		e.t.Errorf("results = %+v, want one with output %s", got, out)
	}
}

func noParameters(e *env) {
	st := coretest.Step{Calls: []coretest.Call{
		{Name: "getUserFavoriteCity"},
		{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`)},
		{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`""`)},
	}}
	r := e.runner(script(st, answer("{{result 0}}|{{result 1}}|{{result 2}}")), nil, weatherTools(e)...)
	e.wantText(e.run(r, "Where?", nil), "Seattle, WA|Seattle, WA|Seattle, WA")
}

func parallelCalls(e *env) {
	// Each handler waits until all three have started: only concurrent
	// execution lets the step finish without a timeout.
	var wg sync.WaitGroup
	wg.Add(3)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	var order []string
	var mu sync.Mutex
	barrier := tool(e, "lookup", "Look something up.", func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		wg.Done()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return "", errors.New("calls did not run concurrently")
		}
		mu.Lock()
		order = append(order, in.Key)
		mu.Unlock()
		return "value of " + in.Key, nil
	}, nil)
	r := e.runner(script(calls("lookup", `{"key":"a"}`, "lookup", `{"key":"b"}`, "lookup", `{"key":"c"}`),
		answer("{{result 0}}, {{result 1}}, {{result 2}}")), nil, barrier)
	res := e.run(r, "Look up a, b and c", nil)
	e.wantText(res, "value of a, value of b, value of c")
	rec := e.h.Received()
	var subs [][]coretest.Delivered
	for _, x := range rec {
		if x.Kind == "results" {
			subs = append(subs, x.Results)
		}
	}
	if len(subs) != 1 || len(subs[0]) != 3 {
		e.t.Fatalf("submissions = %+v, want one with 3 results", subs)
	}
	for i, want := range []string{"value of a", "value of b", "value of c"} {
		if subs[0][i].Output != want {
			e.t.Errorf("result %d = %q, want %q (call order)", i, subs[0][i].Output, want)
		}
	}
	if len(order) != 3 {
		e.t.Errorf("handlers finished: %v", order)
	}
}

func concurrencyBound(e *env) {
	// Five calls, at most two at once. Each handler waits until two are
	// running (so the bound is reached) and counts the peak; a runner
	// that starts a third while two wait shows it in the peak. The events
	// tell the same from the loop's side: between a call's start and its
	// end, at most two calls are open.
	const bound, n = 2, 5
	var (
		mu            sync.Mutex
		running, peak int
	)
	reached := make(chan struct{})
	var once sync.Once
	hold := tool(e, "hold", "Hold a slot.", func(ctx context.Context, in struct {
		Key string `json:"key"`
	}) (string, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		if running == bound {
			once.Do(func() { close(reached) })
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			return "", errors.New("the bound was never reached: calls did not run concurrently")
		}
		return "held " + in.Key, nil
	}, nil)
	var step []string
	for i := range n {
		step = append(step, "hold", fmt.Sprintf(`{"key":"%c"}`, 'a'+i))
	}
	r := e.runner(script(calls(step...), answer("{{result 0}} {{result 4}}")), &core.Options{Concurrency: bound}, hold)
	s := e.stream(r, "Hold five", nil)
	if s.err != nil {
		e.t.Fatalf("run: %v", s.err)
	}
	e.wantText(s.res, "held a held e")
	mu.Lock()
	if peak != bound {
		e.t.Errorf("at most %d calls ran at once, want exactly %d (Concurrency %d)", peak, bound, bound)
	}
	mu.Unlock()
	open, most, started := 0, 0, 0
	for _, ev := range s.events {
		switch ev.Kind {
		case core.EventCallStarted:
			open++
			started++
			most = max(most, open)
		case core.EventCallFinished, core.EventCallInDoubt:
			open--
		}
	}
	if started != n || most != bound {
		e.t.Errorf("events: %d calls started, at most %d open at once; want %d started, at most %d open", started, most, n, bound)
	}
}

func chain(e *env) {
	s := script(
		calls("getUserFavoriteCity", `{}`),
		calls("getCityNickname", `{"location":"{{output \"getUserFavoriteCity\"}}"}`),
		calls("getCurrentWeatherAtLocation", `{"location":"{{output \"getUserFavoriteCity\"}}","unit":"f"}`),
		answer(`Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`),
	)
	var names []string
	r := e.runner(s, &core.Options{OnEvent: func(ev core.Event) {
		if ev.Kind == core.EventCallStarted {
			names = append(names, ev.Call.Name)
		}
	}}, weatherTools(e)...)
	res := e.run(r, "What's the weather like in my favorite city?", nil)
	e.wantText(res, "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f.")
	if diff := cmp.Diff([]string{"getUserFavoriteCity", "getCityNickname", "getCurrentWeatherAtLocation"}, names); diff != "" {
		e.t.Errorf("calls (-want +got):\n%s", diff)
	}
	if res.Steps != 3 {
		e.t.Errorf("steps = %d, want 3", res.Steps)
	}
}

func argumentsAs(e *env, asString bool) {
	st := coretest.Step{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: json.RawMessage(`{"location":"Seattle, WA","unit":"c"}`), AsString: asString}}}
	r := e.runner(script(st, answer("{{result 0}}")), nil, weatherTools(e)...)
	e.wantText(e.run(r, "Weather in Seattle in Celsius?", nil), "21c")
}

func argumentsAsString(e *env) { argumentsAs(e, true) }
func argumentsAsObject(e *env) { argumentsAs(e, false) }

func handlerError(e *env) {
	s := script(calls("getCityNickname", `{"location":"Paris, FR"}`), answer(`nickname: {{output "getCityNickname"}}`))
	r := e.runner(s, nil, weatherTools(e)...)
	res := e.run(r, "Nickname of Paris?", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], `tool "getCityNickname" failed`)
	if !strings.HasPrefix(res.Text, "nickname: ") || !strings.Contains(res.Text, "getCityNickname") || !strings.Contains(res.Text, "failed") {
		e.t.Errorf("answer %q does not show the model read the failure", res.Text)
	}
}

func hiddenErrorText(e *env) {
	s := script(calls("getCityNickname", `{"location":"Paris, FR"}`, "getCurrentWeatherAtLocation", `{"location":"Paris, FR"}`), answer("ok"))
	r := e.runner(s, nil, weatherTools(e)...)
	e.run(r, "Paris?", nil)
	got := e.results()
	if len(got) != 2 {
		e.t.Fatalf("results = %+v", got)
	}
	if strings.Contains(got[0].Text()+got[0].Output, "not implemented for") {
		e.t.Errorf("internal error text leaked: %+v", got[0])
	}
	e.wantFailure(got[1], "no weather data for Paris, FR")
}

func unknownTool(e *env) {
	made := coretest.Step{Calls: []coretest.Call{{Name: "getWeather", Arguments: json.RawMessage(`{"city":"Seattle"}`), Unoffered: true}}}
	r := e.runner(script(made, answer("{{result 0}}")), nil, weatherTools(e)...)
	res := e.run(r, "Weather?", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], `unknown tool "getWeather"`)
	if !strings.Contains(res.Text, "getCurrentWeatherAtLocation") {
		e.t.Errorf("answer %q: the failure should list the available tools", res.Text)
	}
}

func invalidJSON(e *env) {
	var runs atomic.Int32
	st := coretest.Step{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: json.RawMessage(`"{\"location\": "`)}}}
	r := e.runner(script(st, answer("{{result 0}}")), nil, tool(e, "getCityNickname", "", counted(&runs, cityNickname), nil))
	e.run(r, "go", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], "not valid JSON")
	if runs.Load() != 0 {
		e.t.Errorf("handler ran %d times on invalid JSON", runs.Load())
	}
}

func schemaViolation(e *env) {
	var runs atomic.Int32
	r := e.runner(script(calls("getCurrentWeatherAtLocation", `{"location":"Seattle, WA","unit":"kelvin"}`, "getCurrentWeatherAtLocation", `{"unit":"c"}`), answer("ok")), nil,
		tool(e, "getCurrentWeatherAtLocation", "", counted(&runs, currentWeather),
			&core.ToolOptions{Fields: map[string]core.Field{"unit": {Enum: []any{"c", "f"}}}}))
	e.run(r, "go", nil)
	got := e.results()
	if len(got) != 2 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], "unit: enum")
	e.wantFailure(got[1], `missing properties: ["location"]`)
	if runs.Load() != 0 {
		e.t.Errorf("handler ran %d times on invalid arguments", runs.Load())
	}
}

func handlerPanic(e *env) {
	boom := tool(e, "boom", "Explodes.", func(context.Context, struct{}) (string, error) { panic("kaboom with secrets") }, nil)
	r := e.runner(script(calls("boom", `{}`), calls("getUserFavoriteCity", `{}`), answer("{{output \"getUserFavoriteCity\"}}")), nil,
		append(weatherTools(e), boom)...)
	e.wantText(e.run(r, "go", nil), "Seattle, WA")
	got := e.results()
	if len(got) != 2 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], `tool "boom" failed`)
	if strings.Contains(got[0].Text()+got[0].Output, "kaboom") {
		e.t.Errorf("panic value leaked: %+v", got[0])
	}
}

func handlerTimeout(e *env) {
	slow := tool(e, "slow", "Takes forever.", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, &core.ToolOptions{Timeout: 20 * time.Millisecond})
	r := e.runner(script(calls("slow", `{}`), answer("{{result 0}}")), nil, slow)
	e.run(r, "go", nil)
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("results = %+v", got)
	}
	e.wantFailure(got[0], `tool "slow" timed out after 20ms`)
}

// afterStop is the second turn of the cancel and max-steps scripts: a
// backend that cancels the stopped turn leaves the thread usable.
var afterStop = coretest.Turn{Steps: []coretest.Step{answer("fresh start")}}

// wantThreadUsable checks, on a backend that can cancel turns, that a new
// run on the thread of a stopped run works: its turn was not left waiting.
func (e *env) wantThreadUsable(r Loop, thread string) {
	e.t.Helper()
	if _, ok := e.b.(driver.Canceler); !ok {
		return
	}
	res, err := r.Run(e.t.Context(), "again", &core.RunOptions{Thread: thread})
	if err != nil {
		e.t.Fatalf("a new run on the stopped thread failed (the turn was left waiting?): %v", err)
	}
	e.wantText(res, "fresh start")
}

// wantResumable checks that the turn of a run stopped by its context was
// left waiting: a resume finishes it with the answer want, sending the
// results the journal kept, and no function ran twice (runs counts them,
// by call).
func (e *env) wantResumable(r Loop, thread, want string, runs *callCounts) {
	e.t.Helper()
	res, err := r.Resume(e.t.Context(), thread, nil)
	if err != nil {
		e.t.Fatalf("Resume of the stopped turn: %v", err)
	}
	e.wantText(res, want)
	runs.wantOnce(e)
	if e.caps.LocalThreads {
		// The service keeps nothing of the thread: a request cut short is
		// sent again, and its step answered again.
		return
	}
	e.wantOneResponsePerStep()
}

// callCounts counts the runs of handlers by call id.
type callCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounts) ran(ctx context.Context) {
	call, _ := core.CallFromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[call.ID]++
}

// wantOnce checks that every handler that ran ran once.
func (c *callCounts) wantOnce(e *env) {
	e.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.n {
		if n != 1 {
			e.t.Errorf("the handler of call %s ran %d times, want once", id, n)
		}
	}
}

func cancelMidStep(e *env) {
	started := make(chan struct{})
	var runs callCounts
	var stopped atomic.Bool
	block := tool(e, "block", "Blocks.", func(ctx context.Context, _ struct{}) (string, error) {
		if stopped.Load() {
			runs.ran(ctx)
			return "unblocked", nil
		}
		close(started)
		<-ctx.Done()
		return "", ctx.Err() // gave up: its call runs again
	}, nil)
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{calls("block", `{}`), answer("{{result 0}}")}}, afterStop}}
	r := e.runner(s, nil, block)
	e.notDurable(r, "ends no turn with its caller's context: the turn goes on to its answer (Runner.Cancel abandons it, for good), so no resume finishes a call its caller cut short")
	ctx, cancel := context.WithCancel(e.t.Context())
	go func() { <-started; cancel() }()
	res, err := r.Run(ctx, "go", nil)
	if !errors.Is(err, context.Canceled) {
		e.t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	e.wantCode(err, errcode.Canceled)
	if res == nil || res.Thread == "" {
		e.t.Fatalf("Result = %+v, want the thread", res)
	}
	if got := e.results(); len(got) != 0 {
		e.t.Errorf("results were sent after cancellation: %+v", got)
	}
	stopped.Store(true)
	e.wantResumable(r, res.Thread, "unblocked", &runs)
}

func cancelThenNewInput(e *env) {
	started := make(chan struct{})
	block := tool(e, "block", "Blocks.", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}, nil)
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{calls("block", `{}`), answer("never")}}, afterStop}}
	r := e.runner(s, nil, block)
	cr := e.canceler(r)
	if _, ok := e.b.(driver.Canceler); !ok {
		e.t.Skip("the backend cannot cancel a turn (driver.Canceler)")
	}
	ctx, cancel := context.WithCancel(e.t.Context())
	go func() { <-started; cancel() }()
	res, err := r.Run(ctx, "go", nil)
	if !errors.Is(err, context.Canceled) {
		e.t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	if err := cr.Cancel(e.t.Context(), res.Thread); err != nil {
		e.skipLacking(err)
		e.t.Fatalf("Runner.Cancel: %v", err)
	}
	e.wantThreadUsable(r, res.Thread)
}

func maxSteps(e *env) {
	var steps []coretest.Step
	for range 4 {
		steps = append(steps, calls("getUserFavoriteCity", `{}`))
	}
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: append(steps, answer("done"))}, afterStop}}
	r := e.runner(s, &core.Options{MaxSteps: 2}, weatherTools(e)...)
	res, err := r.Run(e.t.Context(), "go", nil)
	if !errors.Is(err, core.ErrMaxSteps) {
		e.t.Fatalf("Run error = %v, want ErrMaxSteps", err)
	}
	e.wantCode(err, errcode.ResourceExhausted)
	if n := len(e.results()); n != 2 {
		e.t.Errorf("%d results sent, want 2", n)
	}
	e.wantThreadUsable(r, res.Thread)
}

func repeatedCallID(e *env) {
	var runs atomic.Int32
	dup := coretest.Step{Calls: []coretest.Call{
		{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`), ID: "call_dup"},
		{Name: "getUserFavoriteCity", Arguments: json.RawMessage(`{}`), ID: "call_dup"},
	}}
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{dup, answer("never")}}, afterStop}}
	r := e.runner(s, nil, tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	res, err := r.Run(e.t.Context(), "go", nil)
	e.wantCode(err, errcode.Internal)
	if !strings.Contains(err.Error(), `repeats call id "call_dup"`) {
		e.t.Errorf("Run error = %v, want it to name the repeated call id", err)
	}
	if n := runs.Load(); n != 0 {
		e.t.Errorf("the function ran %d times, want 0", n)
	}
	if got := e.results(); len(got) != 0 {
		e.t.Errorf("results were sent for a step that repeats a call id: %+v", got)
	}
	if res == nil || res.Thread == "" {
		e.t.Fatalf("Result = %+v, want the thread", res)
	}
	e.wantThreadUsable(r, res.Thread)
}

func largeOutput(e *env) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	r := e.runner(script(calls("big", `{}`), answer("got it")), nil,
		tool(e, "big", "Returns a lot.", func(context.Context, struct{}) (string, error) { return big, nil }, nil))
	e.wantText(e.run(r, "go", nil), "got it")
	got := e.results()
	if len(got) != 1 || got[0].Output != big {
		e.t.Errorf("output of %d bytes arrived as %d bytes", len(big), len(got[0].Output))
	}
}

func outputTooLarge(e *env) {
	r := e.runner(script(calls("big", `{}`), answer("done")), &core.Options{MaxOutputBytes: 1024},
		tool(e, "big", "Returns too much.", func(context.Context, struct{}) (string, error) { return strings.Repeat("x", 2048), nil }, nil))
	e.wantText(e.run(r, "go", nil), "done")
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("%d results sent, want 1", len(got))
	}
	e.wantFailure(got[0], "output too large (2048 bytes; the limit is 1024)")
}

func argumentsTooLarge(e *env) {
	var runs atomic.Int32
	args := `{"location":"` + strings.Repeat("x", 2048) + `"}`
	r := e.runner(script(calls("getCityNickname", args), answer("done")), &core.Options{MaxArgumentBytes: 1024},
		tool(e, "getCityNickname", "", counted(&runs, cityNickname), nil))
	e.wantText(e.run(r, "go", nil), "done")
	if n := runs.Load(); n != 0 {
		e.t.Errorf("the function ran %d times, want 0", n)
	}
	got := e.results()
	if len(got) != 1 {
		e.t.Fatalf("%d results sent, want 1", len(got))
	}
	e.wantFailure(got[0], "arguments too large (")
	e.wantFailure(got[0], " bytes; the limit is 1024)")
}

func nonASCII(e *env) {
	echo := tool(e, "echo", "Echoes.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return "écho: " + in.Text + " ✓", nil
	}, nil)
	r := e.runner(script(calls("echo", `{"text":"São Paulo, 北京, Zürich 🚀"}`), answer("{{result 0}} — fin")), nil, echo)
	e.wantText(e.run(r, "Répète «ça»", nil), "écho: São Paulo, 北京, Zürich 🚀 ✓ — fin")
	if rec := e.h.Received(); len(rec) == 0 || rec[0].Input != "Répète «ça»" {
		e.t.Errorf("input arrived as %+v", rec)
	}
}

func contentArray(e *env) {
	img := "data:image/png;base64,iVBORw0KGgo="
	pic := tool(e, "chart", "Draws a chart.", func(context.Context, struct{}) (core.Content, error) {
		return core.Content{core.TextPart("Sales by month"), core.ImagePart(img)}, nil
	}, nil)
	r := e.runner(script(calls("chart", `{}`), answer("see chart")), nil, pic)
	e.wantText(e.run(r, "chart please", nil), "see chart")
	got := e.results()
	if len(got) != 1 || !strings.Contains(got[0].Output, "Sales by month") || !strings.Contains(got[0].Output, img) {
		e.t.Errorf("results = %+v, want the text and the image", got)
	}
	if e.caps.ContentArrays && !strings.Contains(got[0].Output, `"input_image"`) {
		e.t.Errorf("the backend accepts arrays but sent %q", got[0].Output)
	}
}

func nullOutput(e *env) {
	none := tool(e, "noop", "Does nothing.", func(context.Context, struct{}) (*customer, error) { return nil, nil }, nil)
	r := e.runner(script(calls("noop", `{}`), answer("done")), nil, none)
	e.wantText(e.run(r, "go", nil), "done")
	if got := e.results(); len(got) != 1 || got[0].Failed {
		e.t.Errorf("results = %+v, want one successful", got)
	}
}

func deferredTool(e *env) {
	lookup := tool(e, "lookup_item", "Look up a catalog item.", func(_ context.Context, in struct {
		ItemID string `json:"item_id"`
	}) (string, error) {
		return "item " + in.ItemID + ": blue widget", nil
	}, &core.ToolOptions{DeferLoading: true})
	st := calls("lookup_item", `{"item_id":"A1"}`)
	st.Search = "catalog"
	r, err := e.tryRunner(script(st, answer("{{result 0}}")), nil, lookup, tool(e, "getUserFavoriteCity", "", favoriteCity, nil))
	if err != nil {
		e.t.Fatal(err)
	}
	if !e.caps.DeferredLoading {
		e.t.Skip("the backend states no native deferred loading (Capabilities.DeferredLoading is false)")
	}
	e.wantText(e.run(r, "What is item A1?", nil), "item A1: blue widget")
}

func secondRun(e *env) {
	s := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{calls("getUserFavoriteCity", `{}`), answer(`Your favorite city is {{output "getUserFavoriteCity"}}.`)}},
		{Expect: "And its nickname?", Steps: []coretest.Step{
			calls("getCityNickname", `{"location":"{{output \"getUserFavoriteCity\"}}"}`),
			answer(`{{output "getUserFavoriteCity"}} is {{output "getCityNickname"}}.`),
		}},
	}}
	r := e.runner(s, nil, weatherTools(e)...)
	res := e.run(r, "What is my favorite city?", nil)
	res2 := e.run(r, "And its nickname?", &core.RunOptions{Thread: res.Thread})
	e.wantText(res2, "Seattle, WA is The Emerald City.")
	var got []string
	for _, x := range e.h.Received() {
		switch x.Kind {
		case "input":
			got = append(got, "input:"+x.Input)
		case "results":
			for _, d := range x.Results {
				got = append(got, "result:"+d.Name+"="+d.Output)
			}
		}
	}
	want := []string{"input:What is my favorite city?", "result:getUserFavoriteCity=Seattle, WA", "input:And its nickname?", "result:getCityNickname=The Emerald City"}
	if diff := cmp.Diff(want, got); diff != "" {
		e.t.Errorf("received (-want +got):\n%s", diff)
	}
}

func resumeAfterLostResponse(e *env) {
	var runs atomic.Int32
	book := tool(e, "book_table", "Books a table.", counted(&runs, func(_ context.Context, in struct {
		Table int `json:"table"`
	}) (string, error) {
		return fmt.Sprintf("table %d booked", in.Table), nil
	}), nil)
	e.inject(Fault{Kind: LostResponse, On: ResultsRequests})
	r := e.runner(script(calls("book_table", `{"table":7}`), answer("{{result 0}}")), nil, book)
	res, err := r.Run(e.t.Context(), "Book table 7", nil)
	if err != nil {
		// The backend could not recover by itself: resume the thread.
		if res == nil || res.Thread == "" {
			e.t.Fatalf("Run failed without a thread to resume: %v", err)
		}
		res, err = r.Resume(e.t.Context(), res.Thread, nil)
		if err != nil {
			e.t.Fatalf("Resume: %v", err)
		}
	}
	e.wantText(res, "table 7 booked")
	if runs.Load() != 1 {
		e.t.Errorf("the function ran %d times, want 1", runs.Load())
	}
	for _, d := range e.results() {
		if d.Output != "table 7 booked" {
			e.t.Errorf("a resend differs from the kept result: %+v", d)
		}
	}
	e.wantOneResponsePerStep()
}

// wantOneResponsePerStep checks that the model answered each step once:
// the service took each call's result once (a resend it took again would
// have run the model again, forking a chain of responses).
func (e *env) wantOneResponsePerStep() {
	e.t.Helper()
	if e.caps.LostAnswersRerun {
		e.t.Log("the backend cannot find a lost answer (Capabilities.LostAnswersRerun): the model may answer a step again")
		return
	}
	taken := map[string]int{}
	for _, d := range e.results() {
		taken[d.CallID]++
	}
	for id, n := range taken {
		if n > 1 {
			e.t.Errorf("the service took call %s's result %d times: the model answered its step %d times", id, n, n)
		}
	}
}

// submitFails is a backend that dies, as its process would, between a
// step's results being journaled and being sent.
type submitFails struct{ driver.Backend }

var errDied = errors.New("the process died before sending the results")

func (submitFails) Submit(context.Context, *driver.SubmitRequest) (*driver.Step, error) {
	return nil, errDied
}

func journalReuse(e *env) {
	var runs atomic.Int32
	book := tool(e, "book_table", "Books a table.", counted(&runs, func(_ context.Context, in struct {
		Table int `json:"table"`
	}) (string, error) {
		return fmt.Sprintf("table %d booked (%d)", in.Table, runs.Load()), nil
	}), nil)
	j := journaldriver.NewMemory()
	r, tools := e.runnerTools(script(calls("book_table", `{"table":7}`), answer("{{result 0}}")), &core.Options{Journal: j}, book)
	e.notDurable(r, "keeps no core journal: its workflow history keeps each call's result, so no process dies with a result that only a journal holds, unsent")
	dying := core.NewRunner(submitFails{e.b}, tools, &core.Options{Journal: j, Logger: quiet})
	res, err := dying.Run(e.t.Context(), "Book table 7", nil)
	if !errors.Is(err, errDied) || res == nil || res.Thread == "" {
		e.t.Fatalf("Run = %v, want the failure, with the thread", err)
	}
	if len(e.results()) != 0 || runs.Load() != 1 {
		e.t.Fatalf("results sent %d, runs %d; want none sent and one run", len(e.results()), runs.Load())
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res, "table 7 booked (1)")
	if runs.Load() != 1 {
		e.t.Errorf("the function ran %d times, want 1: the journaled result was not reused", runs.Load())
	}
}

func offeredTools(e *env) {
	tools := weatherTools(e)
	var names []string
	var cs []coretest.Call
	for _, t := range tools {
		names = append(names, t.Name())
		args := `{"location":"Seattle, WA"}`
		if t.Name() == "getUserFavoriteCity" {
			args = `{}`
		}
		cs = append(cs, coretest.Call{Name: t.Name(), Arguments: json.RawMessage(args)})
	}
	r := e.runner(script(coretest.Step{Calls: cs}, answer("{{result 0}} | {{result 1}} | {{result 2}}")), nil, tools...)
	res := e.run(r, "Weather?", nil)
	got := e.results()
	if len(got) != len(names) {
		e.t.Fatalf("results %+v, want one per tool", got)
	}
	for i, d := range got {
		if d.Name != names[i] || d.Failed {
			e.t.Errorf("result %d = %+v, want %s's output", i, d, names[i])
		}
	}
	if strings.Contains(res.Text, "unknown tool") {
		e.t.Errorf("answer %q", res.Text)
	}
}

func resumeUnknownThread(e *env) {
	r := e.runner(script(answer("x")), nil)
	_, err := r.Resume(e.t.Context(), "thread-that-does-not-exist", nil)
	e.wantCode(err, errcode.NotFound)
}

func resumeFinishedThread(e *env) {
	var runs atomic.Int32
	r := e.runner(script(calls("getUserFavoriteCity", `{}`), answer(`{{output "getUserFavoriteCity"}}`)), nil,
		tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil))
	res := e.run(r, "Where?", nil)
	res2, err := r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.wantText(res2, "Seattle, WA")
	if runs.Load() != 1 || len(e.results()) != 1 {
		e.t.Errorf("runs %d, results %d; want 1 and 1", runs.Load(), len(e.results()))
	}
}

func duplicateDelivery(e *env) {
	var runs atomic.Int32
	e.inject(Fault{Kind: Duplicate, Times: 3})
	r := e.runner(script(calls("getUserFavoriteCity", `{}`), calls("getCityNickname", `{"location":"Seattle, WA"}`), answer(`{{output "getCityNickname"}}`)), nil,
		tool(e, "getUserFavoriteCity", "", counted(&runs, favoriteCity), nil),
		tool(e, "getCityNickname", "", counted(&runs, cityNickname), nil))
	e.wantText(e.run(r, "go", nil), "The Emerald City")
	if runs.Load() != 2 {
		e.t.Errorf("functions ran %d times, want 2", runs.Load())
	}
}

func rateLimitThenSuccess(e *env) {
	e.inject(Fault{Kind: RateLimited, Times: 1, On: ResultsRequests})
	r := e.runner(script(calls("getUserFavoriteCity", `{}`), answer(`{{output "getUserFavoriteCity"}}`)), nil, weatherTools(e)...)
	e.wantText(e.run(r, "go", nil), "Seattle, WA")
}

func rateLimitExhausted(e *env) {
	e.inject(Fault{Kind: RateLimited, Times: 100, On: InputRequests})
	r, err := e.tryRunner(script(answer("never")), nil)
	if err == nil {
		_, err = r.Run(e.t.Context(), "go", nil)
	}
	e.wantCode(err, errcode.ResourceExhausted)
}

func serverErrorBurst(e *env) {
	e.inject(Fault{Kind: ServerError, Times: 2, On: ResultsRequests})
	r := e.runner(script(calls("getUserFavoriteCity", `{}`), answer(`{{output "getUserFavoriteCity"}}`)), nil, weatherTools(e)...)
	e.wantText(e.run(r, "go", nil), "Seattle, WA")
}

func authenticationFailure(e *env) {
	e.inject(Fault{Kind: Unauthorized})
	r, err := e.tryRunner(script(answer("never")), nil)
	if err == nil {
		_, err = r.Run(e.t.Context(), "go", nil)
	}
	e.wantCode(err, errcode.PermissionDenied)
}

func turnFailure(e *env) {
	s := script(calls("getUserFavoriteCity", `{}`), coretest.Step{Fail: &coretest.Failure{Code: "server_error", Message: "synthetic model failure"}})
	r := e.runner(s, nil, weatherTools(e)...)
	_, err := r.Run(e.t.Context(), "go", nil)
	if err == nil || !strings.Contains(err.Error(), "synthetic model failure") {
		e.t.Fatalf("Run error = %v, want the service's message", err)
	}
	e.wantCode(err, errcode.Internal)
}

func richInput(e *env) {
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{answer("A cat, and your notes.")}}, {Steps: []coretest.Step{answer("Again.")}}}}
	r := e.runner(s, nil)
	images := []core.Part{core.ImagePart("https://example.com/cat.png"), core.ImageData("image/png", []byte("\x89PNG\r\n\x1a\nfake"))}
	files := []core.Part{core.FilePart("file-abc123"), core.FileURL("https://example.com/notes.pdf"), core.FileData("notes.pdf", []byte("%PDF-1.4 fake"))}
	var carried, refused []core.Part
	for _, group := range []struct {
		ok    bool
		parts []core.Part
	}{{e.caps.InputImages, images}, {e.caps.InputFiles, files}} {
		if group.ok {
			carried = append(carried, group.parts...)
		} else {
			refused = append(refused, group.parts...)
		}
	}
	if len(refused) > 0 {
		_, err := r.Run(e.t.Context(), "What is this?", &core.RunOptions{Parts: append(slices.Clone(carried), refused[0])})
		e.wantCode(err, errcode.InvalidArgument)
		if k := e.kinds(); len(k) != 0 {
			e.t.Errorf("the fake received %v for a refused input, want nothing", k)
		}
	}
	if len(carried) == 0 {
		e.t.Skip("the backend carries neither images nor files")
	}
	res := e.run(r, "What is this?", &core.RunOptions{Parts: carried})
	e.wantText(res, "A cat, and your notes.")
	thread := res.Thread
	if _, ok := r.(coreLoop); !ok {
		// Another loop names its threads itself (Temporal: a workflow
		// id); the service's is its own.
		if got := e.h.Received(); len(got) > 0 {
			thread = got[0].Thread
		}
	}
	want := []coretest.Received{{Kind: "input", Thread: thread, Input: "What is this?", Parts: carried}}
	if diff := cmp.Diff(want, e.h.Received()); diff != "" {
		e.t.Errorf("received (-want +got):\n%s", diff)
	}
	if _, err := r.Run(e.t.Context(), "x", &core.RunOptions{Parts: []core.Part{{Type: core.PartImage}}}); errcode.Of(err) != errcode.InvalidArgument {
		e.t.Errorf("an image without a URL: %v, want InvalidArgument", err)
	}
}

// forecast is the answer of the StructuredOutput scenario.
type forecast struct {
	City  string   `json:"city"`
	TempF int      `json:"temp_f"`
	Sky   []string `json:"sky"`
}

func structuredOutput(e *env) {
	s := script(
		calls("getCurrentWeatherAtLocation", `{"location":"Seattle, WA"}`),
		answer(`{"city":"Seattle, WA","temp_f":70,"sky":["sunny","breezy"]}`),
	)
	s.Turns = append(s.Turns, coretest.Turn{Steps: []coretest.Step{answer(`{"city":"Seattle, WA"}`)}})
	r := e.runner(s, nil, weatherTools(e)...)
	format, err := core.NewFormat[forecast]("forecast", &core.ToolOptions{Strict: true})
	if err != nil {
		e.t.Fatal(err)
	}
	if !e.caps.ResponseFormat {
		_, err := r.Run(e.t.Context(), "Forecast?", &core.RunOptions{Format: format})
		e.wantCode(err, errcode.InvalidArgument)
		if k := e.kinds(); len(k) != 0 {
			e.t.Errorf("the fake received %v for a refused format, want nothing", k)
		}
		return
	}
	res := e.run(r, "Forecast?", &core.RunOptions{Format: format})
	got, err := core.Decode[forecast](format, res)
	if err != nil {
		e.t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(forecast{City: "Seattle, WA", TempF: 70, Sky: []string{"sunny", "breezy"}}, got); diff != "" {
		e.t.Errorf("decoded (-want +got):\n%s", diff)
	}
	for _, rec := range e.h.Received() {
		// A wire whose formats have no name (the sessions API's agent
		// text.format) is recorded by the format's type.
		if rec.Format != "forecast" && rec.Format != "json_schema" {
			e.t.Errorf("the fake received a %s request with format %q, want every request of the run to ask for %q", rec.Kind, rec.Format, "forecast")
		}
	}
	// An answer that is not of the strict schema never decodes: a service
	// that holds its model to the schema (and its fake) fails the turn;
	// one that hands the text over has it refused by Decode. Either way
	// the caller gets an Internal error.
	res, err = r.Run(e.t.Context(), "Again?", &core.RunOptions{Format: format, Thread: res.Thread})
	if err == nil {
		_, err = core.Decode[forecast](format, res)
		if err != nil && !strings.Contains(err.Error(), "does not match") {
			e.t.Errorf("Decode of an answer missing fields: %v, want it to say the answer does not match", err)
		}
	}
	if errcode.Of(err) != errcode.Internal {
		e.t.Errorf("a run whose answer breaks the strict schema, decoded: %v, want an Internal error", err)
	}
}

type refundArgs struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func approvalMixedStep(e *env) {
	var refunds, lookups atomic.Int32
	refund := tool(e, "refund", "Refund an order.", counted(&refunds, func(_ context.Context, in refundArgs) (string, error) {
		return fmt.Sprintf("refunded %d", in.Amount), nil
	}), &core.ToolOptions{Approval: core.ApprovalIf(func(_ context.Context, in refundArgs) (bool, string) {
		return in.Amount > 100, "refunds over 100 need approval"
	})})
	lookup := tool(e, "lookup", "Look up an order.", counted(&lookups, func(context.Context, struct{}) (string, error) { return "found", nil }), nil)
	s := script(
		calls("refund", `{"order":"1","amount":150}`, "refund", `{"order":"2","amount":200}`, "lookup", `{}`),
		answer(`{{result 0}} | {{result 1}} | {{result 2}}`),
	)
	r := e.runner(s, nil, refund, lookup)
	res, err := r.Run(e.t.Context(), "refund both", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) {
		e.t.Fatalf("Run = %v, want ErrAwaitingApproval", err)
	}
	if len(res.Pending) != 2 || refunds.Load() != 0 || lookups.Load() != 1 || len(e.results()) != 0 {
		e.t.Fatalf("pending %d, refunds %d, lookups %d, results sent %d; want 2, 0, 1, 0", len(res.Pending), refunds.Load(), lookups.Load(), len(e.results()))
	}
	if _, err := r.Resume(e.t.Context(), res.Thread, nil); !errors.Is(err, core.ErrAwaitingApproval) || len(e.results()) != 0 {
		e.t.Fatalf("Resume before the decisions = %v, want ErrAwaitingApproval and nothing sent", err)
	}
	byOrder := map[string]string{}
	for _, a := range res.Pending {
		var in refundArgs
		json.Unmarshal(a.Arguments, &in)
		byOrder[in.Order] = a.Key.Call
	}
	if err := r.Decide(e.t.Context(), res.Thread, byOrder["1"], core.Decision{Approved: true, Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	if err := r.Decide(e.t.Context(), res.Thread, byOrder["2"], core.Decision{Reason: "too much", Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	if err := r.Decide(e.t.Context(), res.Thread, byOrder["2"], core.Decision{Approved: true}); errcode.Of(err) != errcode.FailedPrecondition {
		e.t.Errorf("a second decision = %v, want FailedPrecondition", err)
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	got := e.results()
	if len(got) != 3 || got[0].Name != "refund" || got[1].Name != "refund" || got[2].Name != "lookup" {
		e.t.Fatalf("results %+v, want the step's three, in call order, sent together", got)
	}
	if got[0].Failed || !strings.Contains(got[0].Text(), "refunded 150") {
		e.t.Errorf("approved call's result %+v, want its output", got[0])
	}
	e.wantFailure(got[1], "a person denied this call: too much")
	if refunds.Load() != 1 || lookups.Load() != 1 {
		e.t.Errorf("refunds %d, lookups %d; want each run once", refunds.Load(), lookups.Load())
	}
	if !strings.HasPrefix(res.Text, "refunded 150 | ") {
		e.t.Errorf("answer %q, want the approved refund's output first", res.Text)
	}
}

func approvalSecondProcess(e *env) {
	re, ok := e.h.(Reopener)
	if !ok {
		e.t.Skip("the harness cannot open a second backend on its fake (conformance.Reopener)")
	}
	probe := e.runner(script(answer("probe")), nil) // for the capabilities
	e.processOpener(probe)
	e.approver(probe)
	if e.caps.LocalThreads {
		e.t.Skip("the backend's threads live in the process that started them (Capabilities.LocalThreads)")
	}
	urls := map[string]string{"sqlite": "sqlite://" + filepath.Join(e.t.TempDir(), "journal.db")}
	if u := os.Getenv("TOOLRELAY_TEST_POSTGRES"); u != "" {
		urls["postgres"] = pgtest.FreshTable(e.t, u, "conformance")
	}
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		var refunds atomic.Int32
		refund := tool(e, "refund", "Refund an order.", counted(&refunds, func(_ context.Context, in refundArgs) (string, error) {
			return fmt.Sprintf("refunded %d", in.Amount), nil
		}), &core.ToolOptions{Approval: core.ApprovalAlways("every refund needs approval")})
		first, err := journal.Open(e.t.Context(), urls[name])
		if err != nil {
			e.t.Fatalf("%s: %v", name, err)
		}
		r1, tools := e.runnerTools(script(calls("refund", `{"order":"1","amount":150}`), answer(`{{result 0}}`)), &core.Options{Journal: first}, refund)
		res, err := r1.Run(e.t.Context(), "refund", nil)
		if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
			e.t.Fatalf("%s: Run = %v, want a pause on the refund", name, err)
		}
		thread := res.Thread
		r1.Close()
		first.Close()

		b2, err := re.Reopen(e.t.Context(), tools)
		if err != nil {
			e.t.Fatalf("%s: Reopen: %v", name, err)
		}
		second, err := journal.Open(e.t.Context(), urls[name])
		if err != nil {
			e.t.Fatalf("%s: %v", name, err)
		}
		r2, err := e.processOpener(r1).OpenProcess(e.t, b2, tools, &core.Options{Journal: second, Logger: quiet})
		if errors.Is(err, ErrLacking) {
			b2.Close()
			second.Close()
			e.skipLacking(err)
		}
		if err != nil {
			e.t.Fatalf("%s: opening the loop in the second process: %v", name, err)
		}
		list, err := e.approver(r2).Approvals(e.t.Context(), thread)
		if err != nil || len(list) != 1 || list[0].Decision != nil || list[0].Tool != "refund" {
			e.t.Fatalf("%s: Approvals in the second process = %+v, %v; want the pending refund", name, list, err)
		}
		if err := r2.Decide(e.t.Context(), thread, list[0].Key.Call, core.Decision{Approved: true, Actor: "ops"}); err != nil {
			e.t.Fatalf("%s: %v", name, err)
		}
		if err := r2.Decide(e.t.Context(), thread, list[0].Key.Call, core.Decision{Actor: "ops"}); errcode.Of(err) != errcode.FailedPrecondition {
			e.t.Errorf("%s: a second decision = %v, want FailedPrecondition", name, err)
		}
		res, err = r2.Resume(e.t.Context(), thread, nil)
		if err != nil || res.Text != "refunded 150" || refunds.Load() != 1 {
			e.t.Fatalf("%s: Resume in the second process = %+v, %v (refunds %d); want the refund run once", name, res, err, refunds.Load())
		}
		list, _ = e.approver(r2).Approvals(e.t.Context(), thread)
		if len(list) != 1 || list[0].Decision == nil || list[0].Decision.Actor != "ops" || !list[0].Decision.Approved {
			e.t.Errorf("%s: audit trail %+v, want the approval by ops", name, list)
		}
		r2.Close()
		second.Close()
	}
}

func approvalExpires(e *env) {
	var refunds atomic.Int32
	refund := tool(e, "refund", "Refund an order.", counted(&refunds, func(_ context.Context, in refundArgs) (string, error) {
		return "refunded", nil
	}), &core.ToolOptions{Approval: core.ApprovalAlways("every refund needs approval")})
	// Long enough for a slow run (under -race) to pause before the time
	// passes.
	const timeout = 300 * time.Millisecond
	r := e.runner(script(calls("refund", `{"order":"1","amount":5}`), answer(`{{result 0}}`)), &core.Options{ApprovalTimeout: timeout}, refund)
	res, err := r.Run(e.t.Context(), "refund", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		e.t.Fatalf("Run = %v (%d pending), want a pause on the refund", err, len(res.Pending))
	}
	time.Sleep(time.Until(res.Pending[0].Expires) + time.Millisecond)
	if err := r.Decide(e.t.Context(), res.Thread, res.Pending[0].Key.Call, core.Decision{Approved: true}); errcode.Of(err) != errcode.FailedPrecondition {
		e.t.Errorf("a decision after the time = %v, want FailedPrecondition", err)
	}
	c, ok := r.(coreLoop)
	var done []*core.Result
	if ok {
		// Nobody resumes the thread by name: the sweep finds it. (A chained
		// thread's name moves on with the chain.)
		done, err = c.ResumeExpired(e.t.Context(), nil)
		if err != nil || len(done) != 1 {
			e.t.Fatalf("ResumeExpired = %d results, %v; want the paused run resumed", len(done), err)
		}
	} else {
		// Another loop denies the call by itself (Temporal: a workflow
		// timer); its outcome is the thread's.
		res, err := r.Resume(e.t.Context(), res.Thread, nil)
		if err != nil {
			e.t.Fatalf("Resume after the time: %v", err)
		}
		done = append(done, res)
	}
	if got := e.results(); len(got) != 1 || refunds.Load() != 0 {
		e.t.Fatalf("results %+v, refunds %d; want the call answered without running", got, refunds.Load())
	} else {
		e.wantFailure(got[0], "no decision in time")
	}
	if !strings.Contains(done[0].Text, "no decision in time") {
		e.t.Errorf("answer %q, want the model told no decision came in time", done[0].Text)
	}
	if !ok {
		return
	}
	if again, err := c.ResumeExpired(e.t.Context(), nil); err != nil || len(again) != 0 {
		e.t.Errorf("a second ResumeExpired = %d results, %v; want nothing left to resume", len(again), err)
	}
}

func serviceApproval(e *env) {
	s := script(
		coretest.Step{Calls: []coretest.Call{
			{Name: "delete_repo", Arguments: json.RawMessage(`{"repo":"old"}`), Approval: true},
			{Name: "delete_repo", Arguments: json.RawMessage(`{"repo":"main"}`), Approval: true},
		}},
		answer(`{{result 0}} | {{result 1}}`),
	)
	r := e.runner(s, nil)
	if !e.caps.ServiceApprovals {
		e.t.Skip("the backend does not hand over the service's own approval requests")
	}
	res, err := r.Run(e.t.Context(), "clean up the repositories", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 2 {
		e.t.Fatalf("Run = %v (%d pending), want a pause on both approval requests", err, len(res.Pending))
	}
	for i, a := range res.Pending {
		if !strings.HasSuffix(a.Tool, "delete_repo") || !strings.Contains(a.Why, "the service asks") {
			e.t.Errorf("pending %d = %+v, want the service's request for delete_repo", i, a)
		}
	}
	byRepo := map[string]string{}
	for _, a := range res.Pending {
		var in struct{ Repo string }
		json.Unmarshal(a.Arguments, &in)
		byRepo[in.Repo] = a.Key.Call
	}
	if err := r.Decide(e.t.Context(), res.Thread, byRepo["old"], core.Decision{Approved: true, Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	if err := r.Decide(e.t.Context(), res.Thread, byRepo["main"], core.Decision{Reason: "not main", Actor: "ada"}); err != nil {
		e.t.Fatal(err)
	}
	res, err = r.Resume(e.t.Context(), res.Thread, nil)
	if err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	got := e.results()
	// The sessions API's answer carries no reason: a fake records the
	// denial as "denied" there.
	if len(got) != 2 || got[0].Failed || got[0].Output != "approved" || !got[1].Failed || !strings.Contains(got[1].Error, "not main") && got[1].Error != "denied" {
		e.t.Fatalf("decisions the service received = %+v, want the first approved and the second denied (with its reason where the wire has room)", got)
	}
	if !strings.HasPrefix(res.Text, "approved | ") {
		e.t.Errorf("answer %q, want the model told of both decisions", res.Text)
	}
}

func serviceApprovalCancel(e *env) {
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "delete_repo", Arguments: json.RawMessage(`{"repo":"old"}`), Approval: true}}},
		answer("never"),
	}}, afterStop}}
	r := e.runner(s, nil)
	if !e.caps.ServiceApprovals {
		e.t.Skip("the backend does not hand over the service's own approval requests")
	}
	cr := e.canceler(r)
	if _, ok := e.b.(driver.Canceler); !ok {
		e.t.Skip("the backend cannot cancel a turn (driver.Canceler)")
	}
	res, err := r.Run(e.t.Context(), "clean up the repositories", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		e.t.Fatalf("Run = %v (%d pending), want a pause on the approval request", err, len(res.Pending))
	}
	if err := cr.Cancel(e.t.Context(), res.Thread); err != nil {
		e.skipLacking(err)
		e.t.Fatalf("Cancel of a turn paused on the service's approval request: %v", err)
	}
	res, err = r.Run(e.t.Context(), "start again", &core.RunOptions{Thread: res.Thread})
	if err != nil {
		e.t.Fatalf("a run after the cancel: %v", err)
	}
	e.wantText(res, "fresh start")
}
