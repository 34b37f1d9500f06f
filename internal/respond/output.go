package respond

import (
	"encoding/json"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
)

// CanceledReason is why Cancel answers a call whose run stopped before its
// result was sent.
const CanceledReason = "the run stopped before this call's result was sent"

// CanceledOutput is the output Cancel gives such a function call; an MCP
// approval request gets a denial (mcp_approval_response, approve false)
// with CanceledReason as its reason instead.
var CanceledOutput = FailureOutput(CanceledReason)

// FailureOutput returns the output a failed call sends, since
// function_call_output has no success flag: a JSON object with one member,
// "error", holding message, the text the runner decided the model may see.
// For example:
//
//	{"error":"unknown tool \"getTime\"; available tools: getUserFavoriteCity"}
func FailureOutput(message string) string {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{message})
	return string(b)
}

// outputItem returns the item that answers a call with its result: an
// mcp_approval_response for an approval request, else a
// function_call_output.
func outputItem(r *driver.ToolResult) responses.ResponseInputItemUnionParam {
	if r.Call.Kind == driver.ServiceApproval {
		it := responses.ResponseInputItemParamOfMcpApprovalResponse(r.Call.ID, !r.Failed)
		if r.Failed && r.Error != "" {
			it.OfMcpApprovalResponse.Reason = openai.String(r.Error)
		}
		return it
	}
	if r.Failed {
		return functionOutput(r.Call.ID, r.Call.Name, FailureOutput(r.Error))
	}
	if len(r.Output.Parts) == 0 {
		return functionOutput(r.Call.ID, r.Call.Name, r.Output.String())
	}
	parts := make(responses.ResponseFunctionCallOutputItemListParam, len(r.Output.Parts))
	for i, p := range r.Output.Parts {
		parts[i] = outputPart(p)
	}
	it := responses.ResponseInputItemParamOfFunctionCallOutput(parts)
	it.OfFunctionCallOutput.CallID = openai.String(r.Call.ID)
	named(it.OfFunctionCallOutput, r.Call.Name)
	return it
}

// canceledItem returns the item that answers a pending call of a stopped
// run: a function_call_output of CanceledOutput, or, for an MCP approval
// request (approval set; the service refuses a function_call_output for
// it, there being no function call of that id), its denial. name is a
// function call's (see qualifiedName).
func canceledItem(id, name string, approval bool) responses.ResponseInputItemUnionParam {
	if approval {
		it := responses.ResponseInputItemParamOfMcpApprovalResponse(id, false)
		it.OfMcpApprovalResponse.Reason = openai.String(CanceledReason)
		return it
	}
	return functionOutput(id, name, CanceledOutput)
}

// functionOutput returns the function_call_output item of call callID, of
// the tool named name.
func functionOutput(callID, name, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	named(it.OfFunctionCallOutput, name)
	return it
}

// named sets the namespace and the function of an output for a call of a
// function in a namespace, as the call named them (openai-go v3.105
// ResponseInputItemFunctionCallOutputParam: name, namespace), so that the
// service matches it to that function; an output for another call stays
// as it was, with neither. The call's caller is not echoed: a call made by
// a program comes with its program item, which the loop refuses, and
// "direct" is the default.
func named(o *responses.ResponseInputItemFunctionCallOutputParam, name string) {
	if ns, f := SplitName(name); ns != "" {
		o.Namespace, o.Name = openai.String(ns), openai.String(f)
	}
}

// outputPart returns a content part as an input part of a function output.
func outputPart(p driver.Part) responses.ResponseFunctionCallOutputItemUnionParam {
	opt := func(s string) param.Opt[string] {
		if s == "" {
			return param.Opt[string]{}
		}
		return openai.String(s)
	}
	switch p.Type {
	case driver.PartImage:
		return responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
			ImageURL: opt(p.URL), FileID: opt(p.FileID),
		}}
	case driver.PartFile:
		return responses.ResponseFunctionCallOutputItemUnionParam{OfInputFile: &responses.ResponseInputFileContentParam{
			FileURL: opt(p.URL), FileID: opt(p.FileID), Filename: opt(p.Filename), FileData: opt(p.Data),
		}}
	}
	return responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: p.Text}}
}
