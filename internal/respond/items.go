package respond

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// The loop runs function calls, and hands the service's MCP approval
// requests and OAuth consent requests over as calls of kind
// ServiceApproval. Every other output item the client is to run is one it
// cannot: a step that holds one is never an answer (its text, often "",
// would end the run as if the model had answered, the item left without
// its output), but an error naming the item's kind. The items the service
// runs itself (web_search_call, file_search_call, code_interpreter_call,
// image_generation_call, mcp_call, mcp_list_tools, a tool_search_call it
// executes, …), and those it answers in the same response, ask nothing of
// the client and are passed over.

// clientItem is a kind of output item the client is to run, which the
// loop cannot.
type clientItem struct {
	// code is the error's: Unimplemented for a tool of a kind toolrelay
	// does not run (its calls are the client's to run, and toolrelay runs
	// functions only); FailedPrecondition for an item of an agent that
	// is not a prompt agent answering in messages (Foundry's workflow
	// agents, the capture_structured_outputs tool), which the agent's
	// configuration, not toolrelay, would change.
	code errcode.Code
	// what says what the item asks for, and fix what to do instead.
	what, fix string
}

// What to do instead, by kind of item.
const (
	removeTool = "remove the tool that makes it from the agent (or the request)"
	promptOnly = "run a prompt agent, whose answers are messages"
)

// clientItems are the output items the client is to run that the loop
// cannot, by type. The shapes are openai-go v3.105's (responses.
// ResponseOutputItemUnion: custom_tool_call, computer_call,
// local_shell_call, shell_call, apply_patch_call, tool_search_call with
// execution "client", program) and, for Foundry's own items, Microsoft's
// Foundry Agent Service reference (Azure.AI.AgentServer.Responses.Models:
// WorkflowActionOutputItem {kind, action_id, status},
// StructuredOutputsOutputItem {output}); neither is in openai-go.
var clientItems = map[string]clientItem{
	"custom_tool_call":   {errcode.Unimplemented, "a call of a custom tool (free-form input)", removeTool},
	"computer_call":      {errcode.Unimplemented, "a computer-use action", removeTool},
	"local_shell_call":   {errcode.Unimplemented, "a command for the local shell", removeTool},
	"shell_call":         {errcode.Unimplemented, "a command for a local shell", removeTool},
	"apply_patch_call":   {errcode.Unimplemented, "a patch to apply to the client's files", removeTool},
	"tool_search_call":   {errcode.Unimplemented, "a tool search the client executes", removeTool + ", or let the service execute the search"},
	"program":            {errcode.Unimplemented, "a program of programmatic tool calling", removeTool},
	"workflow_action":    {errcode.FailedPrecondition, "an action of a workflow agent", promptOnly},
	"structured_outputs": {errcode.FailedPrecondition, "the agent's answer as structured outputs (its capture_structured_outputs tool)", "ask for the answer's schema as the run's format instead (RunOptions.Format), which the answer's message follows"},
}

// toolItems maps the types of the tools whose calls are client items to
// those items' types (openai-go v3.105 responses.ToolUnion; Foundry's
// capture_structured_outputs tool, CaptureStructuredOutputsTool in
// Microsoft's reference).
var toolItems = map[string]string{
	"custom":                     "custom_tool_call",
	"computer":                   "computer_call",
	"computer_use_preview":       "computer_call",
	"local_shell":                "local_shell_call",
	"shell":                      "shell_call",
	"apply_patch":                "apply_patch_call",
	"tool_search":                "tool_search_call",
	"programmatic_tool_calling":  "program",
	"capture_structured_outputs": "structured_outputs",
}

// ClientTool reports, for a tool of an agent's definition (or a request)
// of type typ, whether the loop cannot run its calls, with the type of the
// output item they are, the code of the error a step holding one ends the
// run with, and what to do instead. execution is a tool_search tool's
// ("server" when empty: the service runs it), environment the type of a
// shell tool's environment ("local": the client's; a container runs on
// the service).
func ClientTool(typ, execution, environment string) (item string, code errcode.Code, fix string, ok bool) {
	item, ok = toolItems[typ]
	switch {
	case !ok:
		return "", errcode.Unknown, "", false
	case typ == "tool_search" && execution != "client":
		return "", errcode.Unknown, "", false
	case typ == "shell" && environment != "" && environment != "local":
		return "", errcode.Unknown, "", false
	}
	c := clientItems[item]
	return item, c.code, c.fix, true
}

// clientItem returns what the loop makes of output item it of a response
// whose outputs answered holds the call ids of (the service ran those
// calls itself): the client item it is, if the loop cannot run it.
func (it *replyItem) clientItem(answered map[string]bool) (clientItem, bool) {
	c, ok := clientItems[it.Type]
	switch {
	case !ok:
		return c, false
	case it.Type == "tool_search_call" && it.Execution != "client":
		return c, false // the service's search
	case it.Type == "shell_call" && it.environment() == "container_reference":
		return c, false // run in the service's container
	case it.CallID != "" && answered[it.CallID]:
		return c, false // the service ran it: its output follows
	}
	return c, true
}

// answeredCalls returns the call ids that output items among items answer
// (function_call_output, shell_call_output, …): calls the service ran.
func answeredCalls(items []replyItem) map[string]bool {
	var out map[string]bool
	for _, it := range items {
		if strings.HasSuffix(it.Type, "_output") && it.CallID != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[it.CallID] = true
		}
	}
	return out
}

// clientItemsError returns the error of a step holding items the loop
// cannot run (each the type and id of one): it names every one, and has
// the code of the first.
func (b *Backend) clientItemsError(thread, turn string, items [][2]string) error {
	first := clientItems[items[0][0]]
	var named []string
	for _, it := range items {
		named = append(named, it[0]+" "+it[1])
	}
	where := "response " + turn
	if turn == "" {
		where = "the last response"
	}
	if first.code == errcode.Unimplemented {
		return errcode.Errorf(first.code, "%s: %s (thread %s) asks the client to run %s (%s); toolrelay runs function calls, and hands MCP approval and OAuth consent requests over for a person's decision, not this kind of call: %s. The run ends; the thread waits for the item's output, so the service may refuse a new run on it",
			b.name, where, thread, first.what, strings.Join(named, ", "), first.fix)
	}
	return errcode.Errorf(first.code, "%s: %s (thread %s) holds %s (%s), which toolrelay does not read as an answer: %s. The run ends",
		b.name, where, thread, first.what, strings.Join(named, ", "), first.fix)
}

// consentName is the function part of the name of a call that stands for
// an OAuth consent request: "<server_label>/oauth_consent".
const consentName = "oauth_consent"

// consentArgs are the arguments of a call that stands for an OAuth consent
// request: the link the person opens to sign in, and the MCP server
// (server_label) the service would run tools of (Microsoft's reference,
// OAuthConsentRequestOutputItem {id, consent_link, server_label}; not in
// openai-go).
type consentArgs struct {
	Type        string `json:"type"` // oauth_consent_request
	ServerLabel string `json:"server_label"`
	ConsentLink string `json:"consent_link"`
}

// consentCall returns the call that stands for the service's request
// (keyed by the request's id) that a person sign in to MCP server server
// at link before it runs that server's tools: a call of kind
// ServiceApproval named "<server>/oauth_consent", whose arguments carry the
// link. Approved (once the person signed in), Submit sends nothing for it
// (the request needs no reply item) and the service is asked to go on.
func consentCall(thread, id, server, link string) driver.Call {
	args, _ := json.Marshal(consentArgs{Type: "oauth_consent_request", ServerLabel: server, ConsentLink: link})
	c := newCall(thread, id, server+"/"+consentName, string(args))
	c.Kind = driver.ServiceApproval
	return c
}

// consentOf returns the consent request a call stands for, if it is one
// (see consentCall).
func consentOf(c *driver.Call) (consentArgs, bool) {
	var a consentArgs
	if c.Kind != driver.ServiceApproval || !strings.HasSuffix(c.Name, "/"+consentName) || json.Unmarshal(c.Arguments, &a) != nil || a.Type != "oauth_consent_request" {
		return consentArgs{}, false
	}
	return a, true
}

// declined returns the input that tells the model a person did not sign
// in to server (their consent request denied, or undecided in time, for
// why): a developer message, since the request has no reply item.
func declined(server, why string) responses.ResponseInputItemUnionParam {
	text := fmt.Sprintf("The user did not sign in to %q (OAuth consent), so its tools cannot be used: %s", server, why)
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleDeveloper)
}
