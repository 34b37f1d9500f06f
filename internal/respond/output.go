package respond

import (
	"encoding/json"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
)

// CanceledOutput is the output Cancel gives a call whose run stopped
// before its result was sent.
var CanceledOutput = FailureOutput("the run stopped before this call's result was sent")

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

// outputItem returns the function_call_output item of a result.
func outputItem(r *driver.ToolResult) responses.ResponseInputItemUnionParam {
	if r.Call.Kind == driver.ServiceApproval {
		it := responses.ResponseInputItemParamOfMcpApprovalResponse(r.Call.ID, !r.Failed)
		if r.Failed && r.Error != "" {
			it.OfMcpApprovalResponse.Reason = openai.String(r.Error)
		}
		return it
	}
	if r.Failed {
		return functionOutput(r.Call.ID, FailureOutput(r.Error))
	}
	if len(r.Output.Parts) == 0 {
		return functionOutput(r.Call.ID, r.Output.String())
	}
	parts := make(responses.ResponseFunctionCallOutputItemListParam, len(r.Output.Parts))
	for i, p := range r.Output.Parts {
		parts[i] = outputPart(p)
	}
	it := responses.ResponseInputItemParamOfFunctionCallOutput(parts)
	it.OfFunctionCallOutput.CallID = openai.String(r.Call.ID)
	return it
}

func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
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
