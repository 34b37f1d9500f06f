package a2atools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/internal/redact"
	"github.com/toolrelay/toolrelay/internal/wirelimit"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// Defaults of [ToolOptions].
const (
	DefaultPollInterval     = 250 * time.Millisecond
	DefaultMaxPollInterval  = 5 * time.Second
	DefaultMaxResponseBytes = 8 << 20
)

// ToolOptions configure the tool of a remote A2A agent ([NewTool]). nil
// is usable.
type ToolOptions struct {
	// Name and Description are the tool's; empty means the agent card's
	// name (made a valid tool name: letters, digits, _ and -) and
	// description.
	Name, Description string
	// Headers are sent with every request to the origin of the card's URL
	// (an Authorization header, an API key), over https or to a loopback
	// host only, and never to another origin: a card whose endpoint is
	// on another origin is refused, and a request redirected to another
	// origin is not sent (PermissionDenied).
	Headers map[string]string
	// HTTPClient sends the requests; nil means http.DefaultClient. Its
	// redirects are checked as Headers says.
	HTTPClient *http.Client
	// Notes, if set, keeps the id of each call's A2A task (the runner's
	// journal, when it keeps notes: memory, SQLite, PostgreSQL), so that
	// a call that runs again — found started but not finished after a
	// crash or a takeover, or interrupted (its run's context ended) and
	// resumed — asks the agent about the same task (tasks/get) instead of
	// sending its message again. Without it, a crashed call's outcome is
	// unknown and it is not run again, as any call with side effects,
	// and an interrupted call sends its message again on resume. With
	// it, a task the agent leaves input-required pauses the call's run
	// for people's decisions (see NewTool).
	Notes journaldriver.Notes
	// NoStream makes the tool use message/send (then tasks/get until the
	// task ends) even when the card says the agent streams.
	NoStream bool
	// PollInterval is the first wait between two tasks/get of a task
	// going on, doubled each time up to MaxPollInterval. Zero means the
	// defaults.
	PollInterval, MaxPollInterval time.Duration
	// MaxResponseBytes bounds a response body of the agent, and each of
	// its stream's events. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Tool holds the tool's own options: its timeout (which bounds the
	// whole exchange with the agent), approval rule, middleware. Its
	// Verify and Server are set by NewTool; with Notes, its Abandon
	// cancels the call's task first (see NewTool), then calls the one
	// set here, if any.
	Tool core.ToolOptions
}

// callArgs are the arguments of a remote agent's tool.
type callArgs struct {
	Message string `json:"message" jsonschema:"what to ask or tell the agent, in plain words, with everything it needs to know"`
	TaskID  string `json:"task_id,omitempty" jsonschema:"only to answer a question the agent asked in an earlier call: the task_id that call named"`
}

// remote is a remote agent offered as a tool.
type remote struct {
	name    string // the tool's
	agent   string // the card's name
	card    *a2a.AgentCard
	client  *a2aclient.Client
	stream  bool
	notes   journaldriver.Notes
	poll    time.Duration
	maxPoll time.Duration
}

// NewTool reads the agent card at cardURL (the agent's base URL, whose
// card is at /.well-known/agent-card.json, or the card's URL itself, one
// ending in .json), with a2a-go's card resolver, and returns a tool that
// sends the model's message to the agent: message/stream when the card
// says the agent streams (and opts.NoStream does not), else message/send
// and tasks/get until the task ends. The card is read once; the tool
// keeps it.
//
// The tool's arguments are the message and, to answer a question the
// agent asked, the task_id of the call it asked in. Its result is the
// text of the completed task's artifacts (data parts as JSON), or of the
// agent's message. A failed, rejected or canceled task is a failed call
// saying so, with the agent's status message; an auth-required one, a
// failed call saying the program gives no such authentication.
//
// A task the agent leaves input-required is asked about, when the call
// runs in a step of a runner's run and opts.Notes is set (so that the
// call run again finds the same task): the call asks people
// ([core.Ask]), and the run pauses ([core.ErrAwaitingApproval]). An
// agent this package serves ([NewHandler]) lists the approvals its run
// awaits in a data part {"approvals": [...]} of the task's status: each
// is a question (the approval's call id, tool, arguments and why), and
// the run's approvals list it with the call's id, "/" and the child's
// call id as call id. Another agent's question is one question, about
// the agent (the card's name as tool), its status text as why. Once
// every one is decided ([core.Runner.Decide]; edited arguments are
// refused), [core.Runner.Resume] runs the call again: it sends the
// decisions on the same task — a data part {"decisions": [{"callId",
// "approve", "reason"}]} to an agent this package serves, the text
// "approve" or "deny: " and the reason to another — and waits for the
// task as before; [core.Runner.Cancel] of the paused run cancels the task
// instead (tasks/cancel: an agent this package serves abandons its turn).
// Where no one can be asked ([core.Runner.Call], as
// module toolrelay/temporal runs tools; a journal without approvals),
// without opts.Notes, or when the agent asks again what it was just
// told, the call fails with a message telling the model what the agent
// asks and the task_id to answer with; the model may ask the user.
//
// With opts.Notes, each call notes its task's id as soon as the agent
// names it (the stream's first event, or message/send's answer, sent
// without blocking), and a call found started but not finished after a
// crash asks the agent about that task (the tool's Verify hook): its
// answer if it completed, else the call runs again and waits for the
// same task, sending nothing. A crash after the agent received the
// message and before it named the task leaves nothing noted: the
// message is sent again.
//
// Errors are *errcode.Error: InvalidArgument for a URL that is not http
// or https, or headers over plain http to a host that is not loopback;
// PermissionDenied for headers and a card whose endpoint is on another
// origin, or a redirect to another origin; Unavailable for a card that
// cannot be read; FailedPrecondition for an agent without a JSON-RPC
// interface. opts may be nil.
func NewTool(ctx context.Context, cardURL string, opts *ToolOptions) (*core.Tool, error) {
	var o ToolOptions
	if opts != nil {
		o = *opts
	}
	const what = "a2atools: agent card URL"
	if err := origin.CheckBaseURL(what, cardURL, len(o.Headers) > 0); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cardURL)
	base, path := cardURL, ""
	if strings.HasSuffix(u.Path, ".json") {
		path = u.Path
		base = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	}
	maxResp := o.MaxResponseBytes
	if maxResp <= 0 {
		maxResp = DefaultMaxResponseBytes
	}
	hc := origin.Client(o.HTTPClient)
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	var rt http.RoundTripper = &limitTransport{l: wirelimit.Limits{MaxResponseBytes: maxResp, MaxEventBytes: maxResp}, next: next}
	if len(o.Headers) > 0 {
		rt = &headerTransport{origin: u, headers: o.Headers, next: rt}
	}
	hc.Transport = rt

	var ropts []agentcard.ResolveOption
	if path != "" {
		ropts = append(ropts, agentcard.WithPath(path))
	}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base, ropts...)
	if err != nil {
		return nil, cardError(cardURL, err)
	}
	if len(o.Headers) > 0 {
		for _, iface := range append([]a2a.AgentInterface{{URL: card.URL, Transport: card.PreferredTransport}}, card.AdditionalInterfaces...) {
			if iu, err := url.Parse(iface.URL); err != nil || !origin.Same(iu, u) {
				return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "a2atools: agent " + card.Name, Err: fmt.Errorf("its card names an endpoint (%s) on another origin than the card's (%s), where its headers are not sent", redact.ConnString(iface.URL), origin.Of(u))}
			}
		}
	}
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{Polling: true, PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		return nil, &errcode.Error{Code: errcode.FailedPrecondition, Op: "a2atools: agent " + card.Name, Err: fmt.Errorf("no interface this client speaks (JSON-RPC): %w", err)}
	}
	r := &remote{
		name: o.Name, agent: card.Name, card: card, client: client,
		stream: card.Capabilities.Streaming && !o.NoStream, notes: o.Notes,
		poll: o.PollInterval, maxPoll: o.MaxPollInterval,
	}
	if r.poll <= 0 {
		r.poll = DefaultPollInterval
	}
	if r.maxPoll <= 0 {
		r.maxPoll = DefaultMaxPollInterval
	}
	if r.name == "" {
		r.name = toolName(card.Name)
	}
	desc := o.Description
	if desc == "" {
		desc = card.Description
		if desc == "" {
			desc = "Asks the agent " + card.Name + "."
		}
	}
	topts := o.Tool
	topts.Server = base
	if r.notes != nil {
		topts.Verify = r.verify
		topts.Abandon = r.abandoner(o.Tool.Abandon)
	}
	return core.NewTool(r.name, desc, r.call, &topts)
}

// abandoner returns the tool's Abandon hook ([core.Runner.Cancel]): the
// task noted for the call, if any (one awaiting input, whose call paused
// its run), is canceled (tasks/cancel), as no one will resume the call to
// answer it; then next, if set, is called. A task that already ended is
// left as it is.
func (r *remote) abandoner(next func(context.Context, core.Call) error) func(context.Context, core.Call) error {
	return func(ctx context.Context, call core.Call) error {
		var err error
		if id := r.noted(ctx, call, true); id != "" {
			_, err = r.client.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
			if errors.Is(err, a2a.ErrTaskNotCancelable) || errors.Is(err, a2a.ErrTaskNotFound) {
				err = nil
			}
			if err != nil {
				err = &errcode.Error{Code: errcode.Unavailable, Op: "a2atools: agent " + r.agent + ": cancel task " + string(id), Err: err}
			}
		}
		if next != nil {
			err = errors.Join(err, next(ctx, call))
		}
		return err
	}
}

// nameChars are the characters a tool's name may not hold.
var nameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// toolName returns name made a valid tool name.
func toolName(name string) string {
	n := strings.Trim(nameChars.ReplaceAllString(strings.ToLower(name), "_"), "_")
	if n == "" {
		n = "agent"
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// noteBackend is the name space of the tool's notes.
const noteBackend = "a2atools"

// noteName names the note of a call's task.
func noteName(c core.Call) string { return "task/" + c.Turn + "/" + c.ID }

// call is the tool's handler.
func (r *remote) call(ctx context.Context, in callArgs) (string, error) {
	if strings.TrimSpace(in.Message) == "" {
		return "", core.ModelErrorf("the message is empty: say what to ask the agent %q", r.agent)
	}
	call, hasCall := core.CallFromContext(ctx)
	if id := r.noted(ctx, call, hasCall); id != "" {
		// The call ran before and its task was noted: wait for it
		// rather than send the message again.
		task, err := r.wait(ctx, id)
		if errors.Is(err, a2a.ErrTaskNotFound) {
			return "", &core.ModelError{
				Message: fmt.Sprintf("the agent %q no longer knows the task this call started; whether it took effect is unknown", r.agent),
				Err:     &errcode.Error{Code: errcode.NotFound, Op: "a2atools: agent " + r.agent, Err: err},
			}
		}
		return r.settle(ctx, nil, task, err, nil)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: in.Message})
	msg.TaskID = a2a.TaskID(in.TaskID)
	note := func(id a2a.TaskID) {
		if r.notes != nil && hasCall && id != "" {
			// A note lost only makes a resume send the message again.
			_ = r.notes.SetNote(ctx, noteBackend, call.Thread, noteName(call), string(id))
		}
	}
	m, task, err := r.send(ctx, &a2a.MessageSendParams{Message: msg}, note)
	return r.settle(ctx, m, task, err, note)
}

// send sends params to the agent and follows the task it starts (or goes
// on with) to its settling, noting its id: message/stream when the agent
// streams, else message/send and tasks/get. It returns the agent's
// message, or the task, or the error.
func (r *remote) send(ctx context.Context, params *a2a.MessageSendParams, note func(a2a.TaskID)) (*a2a.Message, *a2a.Task, error) {
	if note == nil {
		note = func(a2a.TaskID) {}
	}
	if r.stream {
		return r.streamed(ctx, params, note)
	}
	res, err := r.client.SendMessage(ctx, params)
	if err != nil {
		return nil, nil, err
	}
	switch res := res.(type) {
	case *a2a.Message:
		return res, nil, nil
	case *a2a.Task:
		note(res.ID)
		if settled(res.Status.State) {
			return nil, res, nil
		}
		task, err := r.wait(ctx, res.ID)
		return nil, task, err
	}
	return nil, nil, fmt.Errorf("an answer that is neither a task nor a message (%T): %w", res, a2a.ErrInvalidAgentResponse)
}

// settle returns the call's result of the agent's message m, or of task,
// or of err. A task awaiting input, when the tool keeps notes (so that
// the call run again finds the same task), is asked about (core.Ask): the
// agent's questions become approvals of the call's run, which pauses
// until people decide them; the call run again sends the decisions on
// the task and goes on with it. Where no one can be asked, or when the
// agent asks again what it was told, the task's question goes to the
// model (see answer).
func (r *remote) settle(ctx context.Context, m *a2a.Message, task *a2a.Task, err error, note func(a2a.TaskID)) (string, error) {
	told := map[string]bool{} // the questions whose decisions were sent
	for r.notes != nil && err == nil && m == nil && task.Status.State == a2a.TaskStateInputRequired {
		qs, approvals := r.questions(task)
		if slices.ContainsFunc(qs, func(q core.Question) bool { return told[q.ID] }) {
			break
		}
		ds, aerr := core.Ask(ctx, qs...)
		switch {
		case errors.Is(aerr, core.ErrAwaitingApproval):
			return "", aerr
		case errcode.Of(aerr) == errcode.FailedPrecondition:
			// No one can be asked here (Runner.Call; a journal
			// without approvals): the model is.
			return r.answer(ctx, nil, task, nil)
		case aerr != nil:
			return "", aerr
		}
		for _, q := range qs {
			told[q.ID] = true
		}
		reply := a2a.NewMessage(a2a.MessageRoleUser, decisionsPart(qs, ds, approvals))
		reply.TaskID = task.ID
		m, task, err = r.send(ctx, &a2a.MessageSendParams{Message: reply}, note)
	}
	return r.answer(ctx, m, task, err)
}

// questions returns what the agent asks of task, awaiting input: one
// question per approval its status message lists in a data part
// {"approvals": [...]}, as a runner this package serves does (approvals
// true), each with its call id, tool, arguments and why; else one
// question, the agent's status text, about the agent.
func (r *remote) questions(task *a2a.Task) (qs []core.Question, approvals bool) {
	msg := task.Status.Message
	if msg == nil {
		return []core.Question{{ID: "input", Tool: r.agent, Why: "the agent " + r.agent + " asks for input"}}, false
	}
	for _, p := range msg.Parts {
		dp, ok := p.(a2a.DataPart)
		if !ok {
			continue
		}
		list, _ := dp.Data["approvals"].([]any)
		for _, item := range list {
			a, _ := item.(map[string]any)
			id, _ := a["callId"].(string)
			if id == "" || slices.ContainsFunc(qs, func(q core.Question) bool { return q.ID == id }) {
				continue
			}
			q := core.Question{ID: id}
			q.Tool, _ = a["name"].(string)
			q.Why, _ = a["why"].(string)
			if args, ok := a["arguments"]; ok && args != nil {
				q.Arguments, _ = json.Marshal(args)
			}
			qs = append(qs, q)
		}
		if len(qs) > 0 {
			return qs, true
		}
	}
	id := "input"
	if msg.ID != "" {
		id += ":" + msg.ID
	}
	return []core.Question{{ID: id, Tool: r.agent, Why: cmpOr(partsText(msg.Parts, "\n"), "the agent "+r.agent+" asks for input")}}, false
}

// decisionsPart returns the part of the message that gives the agent ds,
// the decisions about qs: for a runner this package serves (approvals),
// a data part {"decisions": [{"callId", "approve", "reason"}]}; for
// another agent, the text "approve", or "deny" and the reason.
func decisionsPart(qs []core.Question, ds []core.Decision, approvals bool) a2a.Part {
	if approvals {
		list := make([]any, len(qs))
		for i, q := range qs {
			d := map[string]any{"callId": q.ID, "approve": ds[i].Approved}
			if ds[i].Reason != "" {
				d["reason"] = ds[i].Reason
			}
			list[i] = d
		}
		return a2a.DataPart{Data: map[string]any{"decisions": list}}
	}
	d := ds[0]
	switch {
	case d.Approved:
		return a2a.TextPart{Text: "approve"}
	case d.Reason != "":
		return a2a.TextPart{Text: "deny: " + d.Reason}
	}
	return a2a.TextPart{Text: "deny"}
}

// noted returns the task id noted for call, if any.
func (r *remote) noted(ctx context.Context, call core.Call, hasCall bool) a2a.TaskID {
	if r.notes == nil || !hasCall {
		return ""
	}
	id, ok, err := r.notes.Note(ctx, noteBackend, call.Thread, noteName(call))
	if err != nil || !ok {
		return ""
	}
	return a2a.TaskID(id)
}

// verify is the tool's Verify hook: the answer of the task noted for
// call, found if it completed; not found (the call runs again, waiting
// for the noted task, or sending the message when none is noted)
// otherwise.
func (r *remote) verify(ctx context.Context, call core.Call) (any, bool, error) {
	id := r.noted(ctx, call, true)
	if id == "" {
		return nil, false, nil
	}
	task, err := r.wait(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if task.Status.State != a2a.TaskStateCompleted {
		return nil, false, nil
	}
	return taskText(task), true, nil
}

// settled reports whether a task in state s will not move without the
// caller: ended, or asking for input.
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// wait asks the agent about task id (tasks/get) until it settles, waiting
// longer each time, up to ctx's end.
func (r *remote) wait(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	pause := r.poll
	for {
		task, err := r.client.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
		if err != nil {
			return nil, err
		}
		if settled(task.Status.State) {
			return task, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, r.maxPoll)
	}
}

// streamed sends params with message/stream and follows the task to its
// settling, noting its id; a stream that ends before is followed by
// tasks/get.
func (r *remote) streamed(ctx context.Context, params *a2a.MessageSendParams, note func(a2a.TaskID)) (*a2a.Message, *a2a.Task, error) {
	var task *a2a.Task
	var serr error
	for ev, err := range r.client.SendStreamingMessage(ctx, params) {
		if err != nil {
			serr = err
			break
		}
		switch ev := ev.(type) {
		case *a2a.Message:
			return ev, nil, nil
		case *a2a.Task:
			if task == nil {
				note(ev.ID)
			}
			task = ev
		case *a2a.TaskStatusUpdateEvent:
			if task == nil {
				note(ev.TaskID)
				task = &a2a.Task{ID: ev.TaskID, ContextID: ev.ContextID}
			}
			task.Status = ev.Status
		case *a2a.TaskArtifactUpdateEvent:
			if task == nil {
				note(ev.TaskID)
				task = &a2a.Task{ID: ev.TaskID, ContextID: ev.ContextID}
			}
			addArtifact(task, ev)
		}
		if task != nil && settled(task.Status.State) {
			return nil, task, nil
		}
	}
	if task == nil || ctx.Err() != nil {
		if serr == nil {
			serr = errors.New("the stream ended without a task")
		}
		return nil, nil, serr
	}
	t, err := r.wait(ctx, task.ID)
	return nil, t, err
}

// addArtifact applies an artifact update to task.
func addArtifact(task *a2a.Task, ev *a2a.TaskArtifactUpdateEvent) {
	if ev.Artifact == nil {
		return
	}
	for i, a := range task.Artifacts {
		if a.ID != ev.Artifact.ID {
			continue
		}
		if ev.Append {
			a.Parts = append(a.Parts, ev.Artifact.Parts...)
		} else {
			task.Artifacts[i] = ev.Artifact
		}
		return
	}
	task.Artifacts = append(task.Artifacts, ev.Artifact)
}

// partsText returns the text of parts: text parts as they are, data
// parts as JSON, files as a line naming them.
func partsText(parts a2a.ContentParts, sep string) string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case a2a.TextPart:
			out = append(out, p.Text)
		case a2a.DataPart:
			b, _ := json.Marshal(p.Data)
			out = append(out, string(b))
		case a2a.FilePart:
			out = append(out, "[a file was left out]")
		}
	}
	return strings.Join(out, sep)
}

// taskText returns the answer of a completed task: its artifacts' text,
// or else its status message's.
func taskText(task *a2a.Task) string {
	var out []string
	for _, a := range task.Artifacts {
		if s := partsText(a.Parts, ""); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 && task.Status.Message != nil {
		return partsText(task.Status.Message.Parts, "\n")
	}
	return strings.Join(out, "\n")
}

// answer returns the call's result of the agent's message m, or of task,
// or of err.
func (r *remote) answer(ctx context.Context, m *a2a.Message, task *a2a.Task, err error) (string, error) {
	op := "a2atools: agent " + r.agent
	if err != nil {
		return "", r.callError(ctx, op, err)
	}
	if m != nil {
		return partsText(m.Parts, "\n"), nil
	}
	said := func() string {
		if task.Status.Message == nil {
			return ""
		}
		return partsText(task.Status.Message.Parts, "\n")
	}
	switch task.Status.State {
	case a2a.TaskStateCompleted:
		return taskText(task), nil
	case a2a.TaskStateInputRequired:
		return "", &core.ModelError{
			Message: fmt.Sprintf("the agent %q needs more input before it goes on: %s\nTo answer it, call %s again with task_id %q and the answer as message.", r.agent, cmpOr(said(), "(it did not say what)"), r.name, task.ID),
			Err:     &errcode.Error{Code: errcode.FailedPrecondition, Op: op, Err: fmt.Errorf("task %s is input-required", task.ID)},
		}
	case a2a.TaskStateAuthRequired:
		return "", &core.ModelError{
			Message: fmt.Sprintf("the agent %q asks for an authentication this program does not give; the task (%s) did not go on", r.agent, task.ID),
			Err:     &errcode.Error{Code: errcode.PermissionDenied, Op: op, Err: fmt.Errorf("task %s is auth-required", task.ID)},
		}
	case a2a.TaskStateCanceled:
		return "", &core.ModelError{
			Message: fmt.Sprintf("the agent %q canceled the task: %s", r.agent, cmpOr(said(), "it did not say why")),
			Err:     &errcode.Error{Code: errcode.Canceled, Op: op, Err: fmt.Errorf("task %s was canceled", task.ID)},
		}
	}
	return "", &core.ModelError{
		Message: fmt.Sprintf("the agent %q could not do it (%s): %s", r.agent, task.Status.State, cmpOr(said(), "it did not say why")),
		Err:     &errcode.Error{Code: errcode.Internal, Op: op, Err: fmt.Errorf("task %s is %s", task.ID, task.Status.State)},
	}
}

// callError returns the handler's error for a protocol or transport
// failure: a *core.ModelError telling the model what it can act on,
// wrapping an *errcode.Error. ctx's own end is returned as it is.
func (r *remote) callError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var re *origin.RedirectError
	code, msg := errcode.Unavailable, fmt.Sprintf("the agent %q stopped answering during the call; whether the call took effect is unknown", r.agent)
	switch {
	case errors.As(err, &re) || errors.Is(err, errOtherOrigin):
		code, msg = errcode.PermissionDenied, fmt.Sprintf("the agent %q redirected the call to another origin, where it was not sent", r.agent)
	case errors.Is(err, a2a.ErrTaskNotFound):
		code, msg = errcode.NotFound, fmt.Sprintf("the agent %q does not know the task: a task_id is only for answering the question of an earlier call", r.agent)
	case errors.Is(err, a2a.ErrInvalidParams), errors.Is(err, a2a.ErrUnsupportedContentType), errors.Is(err, a2a.ErrInvalidRequest):
		code, msg = errcode.InvalidArgument, fmt.Sprintf("the agent %q refused the message", r.agent)
	case errors.Is(err, wirelimit.ErrTooLarge):
		code, msg = errcode.ResourceExhausted, fmt.Sprintf("the agent %q answered with more than this program reads", r.agent)
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError):
		code, msg = errcode.Internal, fmt.Sprintf("the agent %q failed to answer", r.agent)
	}
	return &core.ModelError{Message: msg, Err: &errcode.Error{Code: code, Op: op, Err: err}}
}

// cardError returns the error of a card that could not be read.
func cardError(cardURL string, err error) error {
	code := errcode.Unavailable
	var re *origin.RedirectError
	var st *agentcard.ErrStatusNotOK
	switch {
	case errors.As(err, &re) || errors.Is(err, errOtherOrigin):
		code = errcode.PermissionDenied
	case errors.As(err, &st) && st.StatusCode == http.StatusNotFound:
		code = errcode.NotFound
	case errors.As(err, &st) && (st.StatusCode == http.StatusUnauthorized || st.StatusCode == http.StatusForbidden):
		code = errcode.PermissionDenied
	}
	return &errcode.Error{Code: code, Op: "a2atools: read the agent card of " + redact.ConnString(cardURL), Err: err}
}

// headerTransport adds headers to the requests sent to one origin, and
// refuses a request to another.
type headerTransport struct {
	origin  *url.URL
	headers map[string]string
	next    http.RoundTripper
}

// errOtherOrigin is the error of a request to another origin than the
// card's, which its headers must not reach.
var errOtherOrigin = errors.New("refused a request to another origin than the agent card's: its headers go only to its own")

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !origin.Same(req.URL, t.origin) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "a2atools: " + origin.Of(req.URL), Err: errOtherOrigin}
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return origin.Middleware(req, t.next.RoundTrip)
}

// limitTransport bounds the agent's answers (package wirelimit).
type limitTransport struct {
	l    wirelimit.Limits
	next http.RoundTripper
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.l.Do(req, t.next.RoundTrip)
}
