package foundrytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/fakeapi"
)

// response is a response of the fake.
type response struct {
	id           string
	created      int64
	status       string // completed, failed
	errCode      string
	errMessage   string
	output       []*item
	conversation string
	previous     string
	agentRef     json.RawMessage
	model        string
	instructions string
	usage        Usage
	deleted      bool
	store        bool            // kept, to be read and continued
	tools        json.RawMessage // the tools in effect, echoed
	format       *textFormat     // the request's text.format, echoed
	inputs       []*item         // the request's input, for input_items

	// In a chain of responses: the operations that bring a new model to
	// the state it has after this response, and the calls it waits for.
	hist  []modelOp
	calls []*item
	text  string // the answer, if the response gave one
}

// modelOp is one operation on a Model, kept to rebuild a chain's model
// at any of its responses (a request may continue from an older one).
type modelOp struct {
	begin   *string
	deliver []coretest.Delivered
	next    bool
}

func (r *response) json() map[string]any {
	var errv, conv, prev, ref, instr any
	if r.status == "failed" {
		errv = map[string]any{"code": r.errCode, "message": r.errMessage}
	}
	if r.conversation != "" {
		conv = map[string]any{"id": r.conversation}
	}
	if r.previous != "" {
		prev = r.previous
	}
	if len(r.agentRef) > 0 {
		ref = r.agentRef
	}
	if r.instructions != "" {
		instr = r.instructions
	}
	output := r.output
	if output == nil {
		output = []*item{}
	}
	tools := any([]any{})
	if len(r.tools) > 0 {
		tools = r.tools
	}
	m := map[string]any{
		"id": r.id, "object": "response", "created_at": r.created, "status": r.status,
		"error": errv, "incomplete_details": nil, "instructions": instr, "model": r.model,
		"output": output, "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0,
		"tool_choice": "auto", "tools": tools, "text": r.textJSON(),
		"truncation": "disabled", "metadata": map[string]any{}, "store": r.store, "background": false,
		"conversation": conv, "previous_response_id": prev, "agent_reference": ref, "usage": usageJSON(r.usage),
	}
	if r.status == "completed" {
		m["completed_at"] = r.created
	}
	return m
}

// request is the part of a create-response body the fake acts on.
type request struct {
	agentRef     json.RawMessage
	agentName    string
	agentVersion string
	model        string
	instructions string
	conversation string
	previous     string
	input        []inputItem
	stream       bool
	format       *textFormat     // the text.format asked for
	store        bool            // false: the response is not kept
	tools        json.RawMessage // the request's tools, or its agent's
	thread       string          // the client's thread, from metadata toolrelay_thread
}

// present reports whether key is in m with a value other than null.
func present(m map[string]json.RawMessage, key string) bool {
	v, ok := m[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (s *Server) parseRequest(body []byte) (*request, *apiError) {
	m, e := decodeObject(body)
	if e != nil {
		return nil, e
	}
	if present(m, "agent") {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "invalid_payload", Message: msgAgentDeprecated, Param: "agent"}
	}
	req := &request{store: true}
	var agentText json.RawMessage // the text member of the agent's definition
	if present(m, "store") && json.Unmarshal(m["store"], &req.store) != nil {
		return nil, schemaError("store")
	}
	if present(m, "tools") {
		req.tools = m["tools"]
		if e := checkToolNames(req.tools); e != nil {
			return nil, e
		}
		if e := checkDeferred(req.tools, "tools"); e != nil {
			return nil, e
		}
	}
	if present(m, "metadata") {
		var md map[string]string
		if json.Unmarshal(m["metadata"], &md) != nil {
			return nil, schemaError("metadata")
		}
		req.thread = md["toolrelay_thread"]
	}
	if present(m, "agent_reference") {
		var ref struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if err := json.Unmarshal(m["agent_reference"], &ref); err != nil || ref.Type != "agent_reference" || ref.Name == "" {
			return nil, schemaError("agent_reference")
		}
		for _, k := range []string{"tools", "tool_choice", "parallel_tool_calls", "text"} {
			if present(m, k) {
				return nil, &apiError{Status: http.StatusBadRequest, Code: "invalid_payload", Message: msgNotAllowed, Param: k}
			}
		}
		v := s.version(ref.Name, ref.Version)
		if v == nil {
			if ref.Version != "" {
				return nil, notFound("Agent %q has no version %q.", ref.Name, ref.Version)
			}
			return nil, notFound("Agent %q not found.", ref.Name)
		}
		var def struct {
			Model        string          `json:"model"`
			Instructions string          `json:"instructions"`
			Tools        json.RawMessage `json:"tools"`
			Text         json.RawMessage `json:"text"`
		}
		json.Unmarshal(v.Definition, &def)
		agentText = def.Text // the agent's format: a request naming it sends none
		req.tools = def.Tools
		req.agentRef, req.agentName, req.agentVersion = m["agent_reference"], ref.Name, v.Version
		req.model, req.instructions = def.Model, def.Instructions
	} else {
		if !s.opts.Plain {
			return nil, badRequest("invalid_payload", "agent_reference", "This fake project serves agents: set agent_reference (or make the server with Options.Plain for model requests).")
		}
		if !present(m, "model") {
			return nil, badRequest("missing_required_parameter", "model", "Missing required parameter: 'model'.")
		}
		json.Unmarshal(m["model"], &req.model)
		if present(m, "instructions") {
			json.Unmarshal(m["instructions"], &req.instructions)
		}
	}
	if present(m, "conversation") {
		var id string
		if json.Unmarshal(m["conversation"], &id) != nil {
			var obj struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(m["conversation"], &obj) != nil || obj.ID == "" {
				return nil, schemaError("conversation")
			}
			id = obj.ID
		}
		req.conversation = id
	}
	if present(m, "previous_response_id") {
		if json.Unmarshal(m["previous_response_id"], &req.previous) != nil {
			return nil, schemaError("previous_response_id")
		}
	}
	if req.conversation != "" && req.previous != "" {
		return nil, badRequest("invalid_request", "conversation", msgBothThreads)
	}
	in, e := parseInputOf(m["input"], req.agentRef == nil)
	if e != nil {
		return nil, e
	}
	req.input = in
	text := agentText
	if present(m, "text") {
		text = m["text"]
	}
	if req.format, e = parseTextFormat(text); e != nil {
		return nil, e
	}
	if present(m, "stream") {
		json.Unmarshal(m["stream"], &req.stream)
	}
	return req, nil
}

func (s *Server) createResponse(ex *exchange, _ []string, f *Fault) (any, error) {
	req, e := s.parseRequest(ex.body)
	if e != nil {
		return nil, e
	}
	var (
		conv *conversation
		prev *response
	)
	switch {
	case req.conversation != "":
		if conv, e = s.conversation(req.conversation); e != nil {
			return nil, e
		}
	case req.previous != "":
		prev = s.responses[req.previous]
		if prev == nil || prev.deleted {
			return nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "Previous response with id '" + req.previous + "' not found.", Param: "previous_response_id"}
		}
	}
	r := &response{id: s.newID("resp_"), created: now(), status: "completed", usage: s.opts.Usage, agentRef: req.agentRef, model: req.model,
		instructions: req.instructions, previous: req.previous, store: req.store, tools: req.tools, format: req.format}
	if conv != nil {
		r.conversation = conv.id
	}
	r.inputs = s.inputItems(req.input)
	if f != nil && (f.Failed || f.ErrorEvent) {
		return s.faultResponse(r, prev, req.stream, f)
	}
	var a *coretest.Action
	if conv != nil {
		a, e = s.playConversation(r, conv, req)
	} else {
		a, e = s.playChain(r, prev, req)
	}
	if e != nil {
		return nil, e
	}
	s.answer(r, a)
	if conv != nil {
		for _, it := range r.output {
			it.ResponseID = r.id
		}
		conv.append(r.output...)
		conv.modelCalls = nil
		for _, c := range r.calls {
			conv.modelCalls = append(conv.modelCalls, c.CallID)
		}
		if r.text != "" {
			conv.lastText = r.text
		}
		r.calls = nil
	}
	if r.store {
		s.responses[r.id] = r
	}
	if req.stream {
		return s.events(r), nil
	}
	return r.wire(), nil
}

// faultResponse answers with a failed response (or an error event),
// leaving the thread as it was.
func (s *Server) faultResponse(r, prev *response, stream bool, f *Fault) (any, error) {
	code, msg := f.Code, f.Message
	if code == "" {
		code = "server_error"
	}
	if msg == "" {
		msg = "The server had an error while processing your request."
	}
	if f.ErrorEvent {
		if !stream {
			return nil, &apiError{Status: http.StatusInternalServerError, Code: code, Message: msg, Type: "server_error"}
		}
		r.status = "in_progress"
		return &sseAnswer{events: []sseEvent{
			{"response.created", map[string]any{"response": r.json()}},
			{"error", map[string]any{"code": code, "message": msg, "param": nil}},
		}}, nil
	}
	r.status, r.errCode, r.errMessage = "failed", code, msg
	if prev != nil {
		r.hist = prev.hist
	}
	s.responses[r.id] = r
	if stream {
		return s.events(r), nil
	}
	return r.wire(), nil
}

// playConversation takes the request's input into conv and plays the
// model's next action; r's output begins with the MCP calls the input
// approved.
func (s *Server) playConversation(r *response, conv *conversation, req *request) (*coretest.Action, *apiError) {
	waiting := conv.pending()
	items, texts, e := s.takeInput(waiting, conv.knows, req.input, true)
	if e != nil {
		return nil, e
	}
	r.output = s.mcpCalls(waiting, items)
	conv.goOn(consentAnswers(waiting, items))
	s.add(conv, items, texts, req)
	if len(conv.unbegun) > 0 {
		input := strings.Join(conv.unbegun, "\n")
		conv.unbegun = nil
		if err := conv.model.Begin(input); err != nil {
			return nil, scriptError(err)
		}
	}
	offer(conv.model, req.tools)
	a, err := conv.model.Next()
	if err != nil {
		if len(items) == 0 && conv.lastText != "" {
			// Asked again with nothing new: the model says it again.
			return &coretest.Action{Text: conv.lastText}, nil
		}
		return nil, scriptError(err)
	}
	return a, nil
}

// playChain takes the request's input into a chain of responses (a new
// one when prev is nil) and plays the model's next action; it sets r.hist,
// and begins r's output with the MCP calls the input approved.
func (s *Server) playChain(r, prev *response, req *request) (*coretest.Action, *apiError) {
	if prev == nil && slices.ContainsFunc(req.input, func(it inputItem) bool {
		return it.Type == "function_call" || it.Type == "mcp_approval_request" || it.Type == "message" && it.Role == "assistant"
	}) {
		return s.replayChain(r, req)
	}
	var waiting []*item
	var hist []modelOp
	known := func(string) bool { return false }
	if prev != nil {
		waiting, hist = prev.calls, slices.Clone(prev.hist)
		known = func(id string) bool {
			return slices.ContainsFunc(prev.calls, func(it *item) bool { return it.CallID == id })
		}
	}
	items, texts, e := s.takeInput(waiting, known, req.input, true)
	if e != nil {
		return nil, e
	}
	r.output = s.mcpCalls(waiting, items)
	model := s.chainModel(prev)
	thread := r.id
	if prev != nil {
		thread = prev.id
	}
	if req.thread != "" {
		thread = req.thread
	}
	s.record(thread, items, req.format.name)
	if len(waiting) > 0 {
		outputs := consentAnswers(waiting, items)
		for _, it := range items {
			outputs[it.CallID] = it
		}
		results := make([]coretest.Delivered, len(waiting))
		for i, c := range waiting {
			results[i] = outputs[c.CallID].delivered(c.tool())
		}
		if err := model.Deliver(slices.Clone(results)); err != nil {
			return nil, scriptError(err)
		}
		hist = append(hist, modelOp{deliver: results})
	}
	if len(texts) > 0 {
		input := strings.Join(texts, "\n")
		if err := model.Begin(input); err != nil {
			return nil, scriptError(err)
		}
		hist = append(hist, modelOp{begin: &input})
	}
	offer(model, req.tools)
	a, err := model.Next()
	if err != nil {
		if len(items) == 0 && prev != nil && prev.text != "" {
			a = &coretest.Action{Text: prev.text}
		} else {
			return nil, scriptError(err)
		}
	} else {
		hist = append(hist, modelOp{next: true})
	}
	r.hist = hist
	s.models[r.id] = model
	return a, nil
}

// replayChain plays a new chain whose input resends the whole history, as
// a client that keeps no response on the service does (store false, or
// the Responses function-calling guide's loop): the function_call items
// are the caller's record of the model's earlier calls. It replays the
// history through a new model (each group of calls is the model's next
// action, answered by the function_call_output items that follow), takes
// what comes after the last of the model's items as the new input, and
// plays the model's next action; it sets r.hist.
func (s *Server) replayChain(r *response, req *request) (*coretest.Action, *apiError) {
	model := s.script.NewModel()
	// The history may call tools the request no longer offers (the
	// client's tools changed mid-turn): the replay takes them as they
	// were; the model's next action gets the tools offered now.
	offer(model, req.tools)
	for _, it := range req.input {
		if it.Type == "function_call" {
			model.AddTools(coretest.ToolInfo{Name: (&item{Name: it.Name, Namespace: it.Namespace}).tool()})
		}
	}
	var (
		hist     []modelOp
		texts    []string    // user messages not yet given to the model
		group    []inputItem // the calls of the model's last action
		outputs  = map[string]inputItem{}
		needNext bool
		tail     []inputItem // the input after the model's last item
	)
	begin := func() *apiError {
		if len(texts) == 0 {
			return nil
		}
		input := strings.Join(texts, "\n")
		texts = nil
		if err := model.Begin(input); err != nil {
			return scriptError(err)
		}
		hist = append(hist, modelOp{begin: &input})
		needNext = true
		return nil
	}
	// next plays the model's action that the resent item it shows.
	next := func() (*coretest.Action, *apiError) {
		a, err := model.Next()
		if err != nil {
			return nil, scriptError(err)
		}
		hist = append(hist, modelOp{next: true})
		needNext = false
		return a, nil
	}
	deliver := func() *apiError {
		results := make([]coretest.Delivered, len(group))
		for i, c := range group {
			out, ok := outputs[c.CallID]
			if !ok {
				return noToolOutput(c.CallID)
			}
			results[i] = answerItem(out).delivered((&item{Name: c.Name, Namespace: c.Namespace}).tool())
		}
		if err := model.Deliver(slices.Clone(results)); err != nil {
			return scriptError(err)
		}
		hist = append(hist, modelOp{deliver: results})
		group, needNext = nil, true
		clear(outputs)
		return nil
	}
	for _, it := range req.input {
		switch {
		case it.Type == "message" && it.Role == "user":
			text, _ := messageText(it.Content)
			texts = append(texts, text)
			tail = append(tail, it)
		case it.Type == "reasoning", it.Type == "tool_search_call", it.Type == "tool_search_output", it.Type == "mcp_call":
			// The model's (or the service's search for it), before the
			// calls they go with, or the service's own calls: nothing to
			// play.
		case it.Type == "function_call" || it.Type == "mcp_approval_request" || it.Type == "message" && it.Role == "assistant":
			if it.Type == "mcp_approval_request" {
				it.CallID = it.ID
			}
			if len(group) > 0 && len(outputs) > 0 {
				if e := deliver(); e != nil {
					return nil, e
				}
			}
			if e := begin(); e != nil {
				return nil, e
			}
			if needNext {
				a, e := next()
				if e != nil {
					return nil, e
				}
				if it.Type == "function_call" && len(a.Calls) == 0 {
					return nil, badRequest("invalid_request", "input", "The resent history does not follow this fake's script: the model answered where the input has a function call %s.", it.CallID)
				}
			}
			if it.Type != "message" {
				group = append(group, it)
			}
			tail = nil
		case it.Type == "function_call_output" || it.Type == "mcp_approval_response":
			if it.Type == "mcp_approval_response" {
				it.CallID = it.ApprovalRequestID
			}
			// Each answer to its own kind of call: a function output to a
			// function call, a decision to an approval request.
			want := map[string]string{"function_call_output": "function_call", "mcp_approval_response": "mcp_approval_request"}[it.Type]
			if !slices.ContainsFunc(group, func(c inputItem) bool { return c.CallID == it.CallID && c.Type == want }) {
				return nil, noToolCall(it.CallID)
			}
			outputs[it.CallID] = it
			tail = append(tail, it)
		}
	}
	if len(group) > 0 {
		// The answers of the model's last calls are new: the service makes
		// the MCP calls they approve.
		var waiting, answers []*item
		for _, c := range group {
			var args string
			json.Unmarshal(c.Args, &args)
			waiting = append(waiting, &item{Type: c.Type, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Arguments: args, ServerLabel: c.ServerLabel})
			if out, ok := outputs[c.CallID]; ok {
				answers = append(answers, answerItem(out))
			}
		}
		r.output = s.mcpCalls(waiting, answers)
		if e := deliver(); e != nil {
			return nil, e
		}
	}
	if e := begin(); e != nil {
		return nil, e
	}
	// What the caller added since the model's last item is what it sends
	// now, for the record.
	var recorded []*item
	for _, it := range tail {
		if it.Type == "message" {
			text, _ := messageText(it.Content)
			recorded = append(recorded, &item{Type: "message", Role: "user", Text: text, Parts: fakeapi.InputParts(it.Content)})
			continue
		}
		x := answerItem(it)
		for _, op := range req.input {
			if (op.Type == "function_call" && op.CallID == it.CallID) || (op.Type == "mcp_approval_request" && op.ID == it.CallID) {
				x.Name = (&item{Name: op.Name, Namespace: op.Namespace}).tool()
			}
		}
		recorded = append(recorded, x)
	}
	thread := r.id
	if req.thread != "" {
		thread = req.thread
	}
	s.record(thread, recorded, req.format.name)
	offer(model, req.tools)
	a, e := next()
	if e != nil {
		return nil, e
	}
	r.hist = hist
	s.models[r.id] = model
	return a, nil
}

// offeredTool is a tool of a request (or of its agent) as the fake reads
// it: a function tool, or a namespace tool and its function tools.
type offeredTool struct {
	Type         string        `json:"type"`
	Name         string        `json:"name"`
	Description  string        `json:"description"`
	DeferLoading bool          `json:"defer_loading"`
	Tools        []offeredTool `json:"tools"`
}

// offer tells model the function tools of a request (or of its agent), if
// it lists any: the model calls no other, and a deferred one only after a
// tool search loaded it. The functions of a namespace tool ns are its
// tools "ns.name", as a script names them.
func offer(model *coretest.Model, tools json.RawMessage) {
	var list []offeredTool
	if json.Unmarshal(tools, &list) != nil || len(list) == 0 {
		return
	}
	var infos []coretest.ToolInfo
	for _, t := range list {
		switch t.Type {
		case "function":
			infos = append(infos, coretest.ToolInfo{Name: t.Name, Description: t.Description, Deferred: t.DeferLoading})
		case "namespace":
			for _, f := range t.Tools {
				if f.Type == "function" {
					infos = append(infos, coretest.ToolInfo{Name: t.Name + "." + f.Name, Description: f.Description, Deferred: f.DeferLoading})
				}
			}
		}
	}
	if len(infos) > 0 {
		model.SetTools(infos)
	}
}

// functionName is the pattern of a function's (and a namespace's) name.
var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// checkToolNames refuses a function tool, or a namespace tool or one of
// its functions, whose name the service refuses (a name in a namespace is
// the function's alone: "lookup" of namespace "crm", never "crm.lookup"),
// as the service does.
func checkToolNames(tools json.RawMessage) *apiError {
	var list []offeredTool
	json.Unmarshal(tools, &list)
	refuse := func(param string) *apiError {
		return badRequest("invalid_value", param, "Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", param)
	}
	for i, t := range list {
		if (t.Type == "function" || t.Type == "namespace") && !functionName.MatchString(t.Name) {
			return refuse(fmt.Sprintf("tools[%d].name", i))
		}
		for j, f := range t.Tools {
			if !functionName.MatchString(f.Name) {
				return refuse(fmt.Sprintf("tools[%d].tools[%d].name", i, j))
			}
		}
	}
	return nil
}

// checkDeferred refuses deferred function tools without a tool_search
// tool beside them, as the service does.
func checkDeferred(tools json.RawMessage, param string) *apiError {
	var list []offeredTool
	json.Unmarshal(tools, &list)
	deferred, search := false, false
	for _, t := range list {
		deferred = deferred || t.DeferLoading
		for _, f := range t.Tools { // a namespace's
			deferred = deferred || f.DeferLoading
		}
		search = search || t.Type == "tool_search"
	}
	if deferred && !search {
		return badRequest("invalid_request", param, "Deferred function tools (defer_loading: true) require a tool_search tool.")
	}
	return nil
}

// answerItem returns the item an input item answering a call stands for:
// a function_call_output, or an mcp_approval_response.
func answerItem(it inputItem) *item {
	if it.Type == "mcp_approval_response" {
		x := &item{Type: "mcp_approval_response", CallID: it.ApprovalRequestID, Approve: *it.Approve}
		if it.Reason != nil {
			x.Reason = *it.Reason
		}
		return x
	}
	return &item{Type: "function_call_output", CallID: it.CallID, Output: it.Output}
}

// chainModel returns the model in the state it has after prev (a new
// model for a new chain): the live one if no request continued from prev
// yet, else one rebuilt by replaying prev's history.
func (s *Server) chainModel(prev *response) *coretest.Model {
	if prev == nil {
		return s.script.NewModel()
	}
	if m := s.models[prev.id]; m != nil {
		delete(s.models, prev.id)
		return m
	}
	m := s.script.NewModel()
	for _, op := range prev.hist {
		switch {
		case op.begin != nil:
			m.Begin(*op.begin)
		case op.deliver != nil:
			m.Deliver(slices.Clone(op.deliver))
		case op.next:
			m.Next()
		}
	}
	return m
}

// answer fills r's output from the model's action.
func (s *Server) answer(r *response, a *coretest.Action) {
	if (s.opts.Reasoning || a.Reasoning != "") && a.Fail == nil {
		r.output = append(r.output, &item{Type: "reasoning", ID: s.newID("rs_"), Summary: a.Reasoning})
	}
	if a.Search != "" {
		// The service's tool search ran, and loaded the deferred tools
		// that match.
		id := s.newID("ts_")
		loaded := []map[string]any{}
		var offered []map[string]any
		json.Unmarshal(r.tools, &offered)
		for _, t := range offered {
			if name, _ := t["name"].(string); slices.Contains(a.Loaded, name) {
				loaded = append(loaded, t)
			}
		}
		r.output = append(r.output,
			&item{Type: "tool_search_call", ID: id, CallID: id, Status: "completed", Arguments: string(mustJSON(map[string]string{"query": a.Search}))},
			&item{Type: "tool_search_output", ID: s.newID("tso_"), CallID: id, Status: "completed", Output: mustJSON(loaded)})
	}
	answer := "" // the phase of the answer: a model that writes commentary marks both
	if a.Commentary != "" && a.Fail == nil {
		r.output = append(r.output, &item{Type: "message", ID: s.newID("msg_"), Status: "completed", Role: "assistant", Phase: "commentary", Text: a.Commentary})
		answer = "final_answer"
	}
	switch {
	case a.Fail != nil:
		r.status, r.errCode, r.errMessage = "failed", a.Fail.Code, a.Fail.Message
	case len(a.Calls) > 0:
		for _, c := range a.Calls {
			id := c.ID
			if id == "" {
				id = s.newCallID()
			}
			it := &item{Type: "function_call", ID: s.newID("fc_"), Status: "completed", CallID: id, Name: c.Name, Arguments: c.Arguments}
			if ns, name, ok := strings.Cut(c.Name, "."); ok {
				// A function of a namespace: the call names both.
				it.Namespace, it.Name = ns, name
			}
			switch {
			case c.Consent && !s.opts.Plain:
				// The service runs the MCP server's tools once a person
				// signed in: it asks for that.
				id = s.newID("oauthreq_")
				it = &item{Type: "oauth_consent_request", ID: id, CallID: id, Name: c.Name, ServerLabel: c.Name,
					Extra: map[string]any{"consent_link": s.URL + "/oauth/consent/" + id, "server_label": c.Name}}
			case c.Item != "":
				it = s.clientItem(c, id)
			}
			if c.Approval || c.Consent && s.opts.Plain {
				// The service runs this tool itself, once a person
				// approves: it asks for the approval.
				id = s.newID("mcpr_")
				it = &item{Type: "mcp_approval_request", ID: id, CallID: id, ServerLabel: mcpServerLabel(r.tools, c.Name), Name: c.Name, Arguments: c.Arguments}
			}
			r.output = append(r.output, it)
			r.calls = append(r.calls, it)
		}
	case r.format.refusal(a.Text) != "":
		r.status, r.errCode, r.errMessage = "failed", "server_error", r.format.refusal(a.Text)
	default:
		r.output = append(r.output, &item{Type: "message", ID: s.newID("msg_"), Status: "completed", Role: "assistant", Phase: answer, Text: a.Text})
		r.text = a.Text
	}
}

// clientItem returns an output item of type c.Item that the client is to
// run, as call callID, filled from the call where its shape has room: the
// shapes of openai-go v3.105 (responses.ResponseOutputItemUnion) and, for
// Foundry's workflow_action and structured_outputs, of Microsoft's
// reference (WorkflowActionOutputItem, StructuredOutputsOutputItem).
func (s *Server) clientItem(c coretest.ActionCall, callID string) *item {
	it := &item{Type: c.Item, CallID: callID, Name: c.Name, Status: "completed", Extra: map[string]any{"call_id": callID}}
	var args any
	json.Unmarshal([]byte(c.Arguments), &args)
	switch c.Item {
	case "custom_tool_call":
		it.ID = s.newID("ctc_")
		it.Extra["name"], it.Extra["input"] = c.Name, c.Arguments
	case "computer_call":
		it.ID = s.newID("cu_")
		it.Extra["action"], it.Extra["pending_safety_checks"] = map[string]any{"type": "screenshot"}, []any{}
	case "local_shell_call":
		it.ID = s.newID("lsh_")
		it.Extra["action"] = map[string]any{"type": "exec", "command": []string{c.Name}, "env": map[string]string{}}
	case "shell_call":
		it.ID = s.newID("sh_")
		it.Extra["action"], it.Extra["environment"] = map[string]any{"commands": []string{c.Name}}, map[string]any{"type": "local"}
	case "apply_patch_call":
		it.ID = s.newID("apc_")
		it.Extra["operation"] = map[string]any{"type": "update_file", "path": c.Name, "diff": c.Arguments}
	case "tool_search_call":
		it.ID = s.newID("ts_")
		it.Extra["execution"], it.Extra["arguments"] = "client", args
	case "program":
		it.ID = s.newID("prg_")
		it.Extra["code"], it.Extra["fingerprint"] = c.Arguments, "fp_"+callID
	case "workflow_action":
		it.ID, it.Status = s.newID("wfa_"), "in_progress"
		delete(it.Extra, "call_id")
		it.Extra["kind"], it.Extra["action_id"] = "InvokeAzureAgent", c.Name
	case "structured_outputs":
		it.ID = s.newID("so_")
		delete(it.Extra, "call_id")
		it.Extra["output"] = args
	default:
		it.ID = s.newID("item_")
	}
	return it
}

// getResponse answers GET responses/{id}: the response, or, with
// stream=true, its events again, those after the sequence number
// starting_after only, as the service replays a stream to resume it.
func (s *Server) getResponse(ex *exchange, args []string, _ *Fault) (any, error) {
	r := s.responses[args[0]]
	if r == nil || r.deleted {
		return nil, notFound("Response with id '%s' not found.", args[0])
	}
	q := ex.r.URL.Query()
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(ex.body, &body) // openai-go's GetStreaming sends {"stream": true}
	if q.Get("stream") != "true" && !body.Stream {
		return r.wire(), nil
	}
	a := s.events(r)
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("invalid_value", "starting_after", "Invalid 'starting_after': %q.", v)
		}
		a.first = min(n+1, len(a.events))
		a.events = a.events[a.first:]
	}
	return a, nil
}

func (s *Server) deleteResponse(_ *exchange, args []string, _ *Fault) (any, error) {
	r := s.responses[args[0]]
	if r == nil || r.deleted {
		return nil, notFound("Response with id '%s' not found.", args[0])
	}
	r.deleted = true
	return map[string]any{"id": r.id, "object": "response", "deleted": true}, nil
}
