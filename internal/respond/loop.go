package respond

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/apierr"
	"github.com/toolrelay/toolrelay/internal/owned"
)

// Start implements [driver.Backend]. In Conversation mode a new thread is a
// new conversation, created with the user's message as its first item and
// answered by a response with an empty input; an existing thread gets the
// message as the response's input. In Chain mode the message is the input
// of a response linked to the thread's latest response.
func (b *Backend) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	return b.settle(b.start(ctx, req))
}

func (b *Backend) start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	if err := b.checkFormat(req.Format); err != nil {
		return nil, err
	}
	msg := inputMessage(req.Input, req.Parts)
	switch b.mode {
	case Chain:
		input := append(b.takeCanceled(req.Thread), msg)
		return b.respond(withMoved(ctx, req.Created), req.Thread, input, req.Format)
	case Stateless:
		return b.startStateless(ctx, req.Thread, msg, req.Format)
	}
	thread, input := req.Thread, []responses.ResponseInputItemUnionParam{msg}
	if thread == "" {
		conv, err := b.client.Conversations.New(ctx, conversations.ConversationNewParams{Items: input, Metadata: owned.Thread(b.keep)})
		if err != nil {
			return nil, fmt.Errorf("create a conversation: %w", apierr.WithRefusal(err))
		}
		b.mu.Lock()
		b.conversations = append(b.conversations, conv.ID)
		b.mu.Unlock()
		thread, input = conv.ID, nil
		if req.Created != nil {
			req.Created(thread)
		}
	}
	step, err := b.respond(ctx, thread, input, req.Format)
	if err != nil && isBadRequest(err) {
		// The answer to an earlier attempt may have been lost after the
		// service acted on it: the conversation then holds the calls.
		if s, ok := b.recoverStart(ctx, thread, req.Input); ok {
			return s, nil
		}
	}
	if err != nil {
		// The conversation exists: name it, so the run can be resumed.
		return &driver.Step{Thread: thread}, err
	}
	return step, nil
}

// inputMessage returns the user's message: its text alone, or a content
// list of its text, then its parts.
func inputMessage(text string, parts []driver.Part) responses.ResponseInputItemUnionParam {
	if len(parts) == 0 {
		return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
	}
	content := responses.ResponseInputMessageContentListParam{{OfInputText: &responses.ResponseInputTextParam{Text: text}}}
	for _, p := range parts {
		var c responses.ResponseInputContentUnionParam
		switch p.Type {
		case driver.PartText:
			c.OfInputText = &responses.ResponseInputTextParam{Text: p.Text}
		case driver.PartImage:
			c.OfInputImage = &responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto,
				ImageURL: optional(p.URL), FileID: optional(p.FileID)}
		case driver.PartFile:
			c.OfInputFile = &responses.ResponseInputFileParam{FileID: optional(p.FileID), FileURL: optional(p.URL),
				FileData: optional(p.Data), Filename: optional(p.Filename)}
		}
		content = append(content, c)
	}
	return responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser)
}

// optional returns s as an optional parameter, absent when empty.
func optional(s string) param.Opt[string] {
	if s == "" {
		return param.Opt[string]{}
	}
	return openai.String(s)
}

// Submit implements [driver.Backend]: it sends one function_call_output
// item per result, in call order, in one request. A failed result's
// output is [FailureOutput] of its error message; a content array is sent
// as an array of input parts; any other output as [driver.Output.String]
// renders it. A decision on an MCP approval request goes as an
// mcp_approval_response; one on an OAuth consent request as nothing when
// approved (the person signed in: the service is asked to go on), and as
// a developer message saying the person did not sign in when denied.
func (b *Backend) Submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	step, err := b.submit(ctx, req)
	if err == nil && step != nil && step.Thread != req.Step.Thread {
		b.moveKept(req.Step.Thread, step.Thread) // a chain moved on
	}
	return b.settle(step, err)
}

func (b *Backend) submit(ctx context.Context, req *driver.SubmitRequest) (*driver.Step, error) {
	if err := b.checkFormat(req.Format); err != nil {
		return nil, err
	}
	input := make([]responses.ResponseInputItemUnionParam, 0, len(req.Results))
	for i := range req.Results {
		r := &req.Results[i]
		if consent, ok := consentOf(&r.Call); ok {
			// An OAuth consent request has no reply item: approved (the
			// person signed in), the service goes on; denied, the model
			// is told.
			if r.Failed {
				input = append(input, declined(consent.ServerLabel, r.Error))
			}
			continue
		}
		input = append(input, outputItem(r))
	}
	if b.mode == Stateless {
		return b.respondStateless(ctx, req.Step.Thread, input, req.Format)
	}
	if b.mode == Chain {
		ctx = withMoved(ctx, req.Moved)
	}
	step, err := b.respond(ctx, req.Step.Thread, input, req.Format)
	if err != nil && b.mode == Conversation && isBadRequest(err) {
		// The outputs may have been delivered by an attempt whose answer
		// was lost: then the conversation holds them, and the next step.
		if s, ok := b.recoverSubmit(ctx, req.Step); ok {
			return s, nil
		}
	}
	return step, err
}

// Resume implements [driver.Backend]. In Conversation mode it reads the
// conversation's items: the function calls without an output are the
// pending calls; with none, the last assistant message is the answer, and
// if the model has not answered the last input yet, a response with an
// empty input is requested. In Chain mode it reads the response named by
// thread: its function calls are pending, or its text is the answer.
func (b *Backend) Resume(ctx context.Context, thread string) (*driver.Step, error) {
	return b.settle(b.resume(ctx, thread))
}

func (b *Backend) resume(ctx context.Context, thread string) (*driver.Step, error) {
	if thread == "" {
		return nil, errcode.Errorf(errcode.InvalidArgument, "%s: resume: no thread", b.name)
	}
	switch b.mode {
	case Chain:
		r, err := b.getReply(ctx, thread)
		if err != nil {
			return nil, err
		}
		return b.step(thread, r)
	case Stateless:
		return b.resumeStateless(thread)
	}
	return b.resumeConversation(ctx, thread)
}

// Cancel implements [driver.Canceler]. A Foundry thread has no running turn
// to stop, but a call left without an output makes every later request on
// the thread fail ("No tool output found for function call"). In
// Conversation mode Cancel therefore answers each pending call of the
// conversation, saying the run stopped: a function call with the output
// CanceledOutput, an MCP approval request with a denial whose reason is
// CanceledReason. In Chain mode it remembers the pending calls of the
// response, and the next Start on that thread sends those answers with the
// user's message.
func (b *Backend) Cancel(ctx context.Context, thread string) error {
	switch b.mode {
	case Conversation:
		return b.cancelConversation(ctx, thread)
	case Stateless:
		return b.cancelStateless(thread)
	}
	r, err := b.getReply(ctx, thread)
	if err != nil {
		return err
	}
	var calls []canceledCall
	for _, o := range r.Output {
		c := canceledCall{id: o.CallID, name: qualifiedName(o.Namespace, o.Name)}
		switch o.Type {
		case "function_call":
		case "mcp_approval_request":
			c = canceledCall{id: o.ID, approval: true}
		default:
			continue
		}
		if !slices.Contains(calls, c) {
			calls = append(calls, c)
		}
	}
	if len(calls) > 0 {
		b.mu.Lock()
		if b.canceled == nil {
			b.canceled = map[string][]canceledCall{}
		}
		b.canceled[thread] = calls
		b.mu.Unlock()
	}
	return nil
}

// canceledCall is a pending call of a chain's response that Cancel
// answers with the next Start: a function call, or an MCP approval
// request.
type canceledCall struct {
	id       string
	name     string // a function call's (see qualifiedName)
	approval bool
}

// takeCanceled returns the answers of the calls Cancel left on a chain's
// response, and forgets them.
func (b *Backend) takeCanceled(thread string) []responses.ResponseInputItemUnionParam {
	b.mu.Lock()
	calls := b.canceled[thread]
	delete(b.canceled, thread)
	b.mu.Unlock()
	var items []responses.ResponseInputItemUnionParam
	for _, c := range calls {
		items = append(items, canceledItem(c.id, c.name, c.approval))
	}
	return items
}

// checkFormat refuses a run's response format on a request that names an
// agent the backend cannot make carry it: the service takes the format
// from the agent's definition only.
func (b *Backend) checkFormat(f *driver.Format) error {
	if f != nil && b.agentRef != nil && !b.agentFormats {
		return errcode.Errorf(errcode.InvalidArgument, "%s: a request that names an agent answers in the agent's format (its definition's text.format); a run cannot ask for format %q", b.name, f.Name)
	}
	return nil
}

// respond creates a response on thread with input (and, if set, the
// response format) and returns its step.
func (b *Backend) respond(ctx context.Context, thread string, input []responses.ResponseInputItemUnionParam, format *driver.Format) (*driver.Step, error) {
	step, _, err := b.respondWith(ctx, thread, input, format)
	return step, err
}

// respondWith is respond, returning the response's reply too.
func (b *Backend) respondWith(ctx context.Context, thread string, input []responses.ResponseInputItemUnionParam, format *driver.Format) (*driver.Step, *reply, error) {
	p := responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfInputItemList: append(responses.ResponseInputParam{}, input...)}}
	switch {
	case b.mode == Stateless:
		p.Store = openai.Bool(false)
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
		// The service keeps nothing; the metadata names the thread in
		// its logs.
		p.Metadata = map[string]string{ThreadMetadata: thread}
	case b.mode == Conversation:
		p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(thread)}
	case thread != "":
		p.PreviousResponseID = openai.String(thread)
	}
	for attempt := 0; ; attempt++ {
		tools, agentRef := b.tools, b.agentRef
		if b.offer != nil {
			var err error
			if tools, agentRef, err = b.offer(ctx, format); err != nil {
				return nil, nil, err
			}
		}
		q := p
		if err := b.offering(&q, tools, agentRef, format); err != nil {
			return nil, nil, err
		}
		r, err := b.create(ctx, thread, &q)
		if err != nil && attempt == 0 && agentRef != nil && b.agentGone != nil && ErrorCode(err) == errcode.NotFound && b.agentGone(ctx, agentRef) {
			// Another process deleted the agent (version) once it
			// needed it no more: the next offer makes it again.
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		step, err := b.step(thread, r)
		return step, r, err
	}
}

// offering sets what p offers the model: the agent reference, or the
// model, instructions, tools and format.
func (b *Backend) offering(p *responses.ResponseNewParams, tools []responses.ToolUnionParam, agentRef map[string]any, format *driver.Format) error {
	if agentRef != nil {
		p.SetExtraFields(map[string]any{"agent_reference": agentRef})
	} else {
		p.Model = b.model
		if b.instructions != "" {
			p.Instructions = openai.String(b.instructions)
		}
		p.Tools = tools
		if format != nil {
			var schema map[string]any
			if err := json.Unmarshal(format.Schema, &schema); err != nil {
				return errcode.Errorf(errcode.InvalidArgument, "%s: format %q: the schema is not a JSON object: %v", b.name, format.Name, err)
			}
			p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: format.Name, Schema: schema, Strict: openai.Bool(format.Strict)},
			}}
		}
	}
	return nil
}

// create sends a create-response request of thread, streaming or not, and
// returns the finished response's reply. The text of its messages goes to
// ctx's observer, if any: piece by piece when streaming, else whole.
func (b *Backend) create(ctx context.Context, thread string, p *responses.ResponseNewParams) (*reply, error) {
	obs := driver.ObserverFrom(ctx)
	if !b.stream {
		newReply := b.newReply
		if b.mode == Stateless {
			newReply = b.newReplyItems
		}
		r, err := newReply(ctx, p)
		if err == nil {
			if moved := movedFrom(ctx); moved != nil && r.ID != "" {
				moved(r.ID) // before the observer may stop the run
			}
			err = r.observe(obs)
		}
		return r, err
	}
	rs := &responseStream{b: b, thread: thread, obs: obs, seq: -1, moved: movedFrom(ctx)}
	return rs.read(ctx, p)
}

// movedKey is the context key of a chain request's Moved callback.
type movedKey struct{}

// withMoved returns ctx carrying f, which a chain's response stream calls
// with the new response's id as soon as the service names it (see
// driver.SubmitRequest.Moved).
func withMoved(ctx context.Context, f func(string)) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, movedKey{}, f)
}

func movedFrom(ctx context.Context) func(string) {
	f, _ := ctx.Value(movedKey{}).(func(string))
	return f
}

func isTurnError(err error) bool {
	var te *driver.TurnError
	return errors.As(err, &te)
}

// step turns a finished response into a step of thread. In Chain mode the
// thread becomes the response's id. Its calls are the response's function
// calls, and its MCP approval and OAuth consent requests (calls of kind
// ServiceApproval); an output item the client is to run that the loop
// cannot (see clientItems) makes it an error naming the item's kind,
// never an answer.
func (b *Backend) step(thread string, r *reply) (*driver.Step, error) {
	if err := b.turnError(thread, r); err != nil && !(r.Status == "incomplete" && r.asksConsent()) {
		// A response that asks for a person's sign-in may say it is
		// incomplete: the request is what it holds.
		return nil, err
	}
	if b.mode == Chain {
		thread = r.ID
	}
	s := &driver.Step{Thread: thread, Turn: r.ID, Model: cmp.Or(r.Model, b.model), Usage: driver.Usage{
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, TotalTokens: r.Usage.TotalTokens,
	}}
	answered := answeredCalls(r.Output)
	var refused [][2]string
	for i := range r.Output {
		switch o := &r.Output[i]; o.Type {
		case "function_call":
			s.Calls = append(s.Calls, newCall(thread, o.CallID, qualifiedName(o.Namespace, o.Name), o.arguments()))
		case "mcp_approval_request":
			s.Calls = append(s.Calls, approvalCall(thread, o.ID, o.ServerLabel, o.Name, o.arguments()))
		case "oauth_consent_request":
			s.Calls = append(s.Calls, consentCall(thread, o.ID, o.ServerLabel, o.ConsentLink))
		default:
			if _, ok := o.clientItem(answered); ok {
				refused = append(refused, [2]string{o.Type, cmp.Or(o.CallID, o.ID)})
			}
		}
	}
	if len(refused) > 0 {
		return nil, b.clientItemsError(thread, r.ID, refused)
	}
	if len(s.Calls) == 0 {
		s.Text = r.text()
	}
	return s, nil
}

// asksConsent reports whether the reply holds an OAuth consent request.
func (r *reply) asksConsent() bool {
	return slices.ContainsFunc(r.Output, func(it replyItem) bool { return it.Type == "oauth_consent_request" })
}

// newCall returns a call of thread. Its journal key is (backend, thread,
// "", call id): in Conversation mode the thread is the conversation, so
// that a call rebuilt from the conversation's items, which do not say
// which response made them, has the key it had when it was seen live; in
// Chain mode it is the response that made the call.
func newCall(thread, id, name, args string) driver.Call {
	return driver.Call{Thread: thread, ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// approvalCall returns the call that stands for the service's request
// that a person approve a call of tool name of MCP server server (keyed by
// the request's id), which Submit answers with an mcp_approval_response.
func approvalCall(thread, id, server, name, args string) driver.Call {
	c := newCall(thread, id, server+"/"+name, args)
	c.Kind = driver.ServiceApproval
	return c
}

// turnError returns a *driver.TurnError for a response of thread that did
// not complete.
func (b *Backend) turnError(thread string, r *reply) error {
	e := &driver.TurnError{Backend: b.name, Thread: thread, Turn: r.ID, Status: r.Status}
	switch r.Status {
	case "completed", "":
		return nil
	case "failed":
		e.Code, e.Message = r.Error.Code, r.Error.Message
	case "incomplete":
		e.Code, e.Message = r.IncompleteDetails.Reason, "the response is incomplete"
	default:
		e.Message = "the response did not complete"
	}
	return e
}

func isBadRequest(err error) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == 400
}
