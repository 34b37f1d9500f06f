package foundrytest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// signSchema is a strict schema: an object with one string, sign.
var signSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"sign": map[string]any{"type": "string"}},
	"required":             []any{"sign"},
	"additionalProperties": false,
}

// jsonSchemaFormat is text.format json_schema "sign" with signSchema.
func jsonSchemaFormat(strict bool) responses.ResponseTextConfigParam {
	f := responses.ResponseFormatTextConfigParamOfJSONSchema("sign", signSchema)
	f.OfJSONSchema.Strict = param.NewOpt(strict)
	f.OfJSONSchema.Description = openai.String("The user's sign.")
	return responses.ResponseTextConfigParam{Format: f}
}

// TestTextFormat: a plain Responses request's text.format is echoed as the
// service echoes it (type json_schema, name, schema, description, strict),
// streamed or not; under a strict schema the model never answers text that
// does not validate: a script whose text breaks the schema fails the
// response (status failed, code server_error), as the service reports a
// response it could not produce; without strict, the text is answered.
func TestTextFormat(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		strict     bool
		wantStatus string
	}{
		{"strict, valid", `{"sign":"Aquarius"}`, true, "completed"},
		{"strict, not JSON", `Aquarius`, true, "failed"},
		{"strict, a number for the string", `{"sign":3}`, true, "failed"},
		{"strict, a missing member", `{}`, true, "failed"},
		{"not strict, breaking the schema", `{"sign":3}`, false, "completed"},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: "", true: ", streamed"}[stream], func(t *testing.T) {
				_, client := newServer(t, coretest.Answer(tc.text), &foundrytest.Options{Plain: true})
				p := responses.ResponseNewParams{Model: "gpt-4.1-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("My sign?")}, Text: jsonSchemaFormat(tc.strict)}
				var r *responses.Response
				if stream {
					st := client.Responses.NewStreaming(t.Context(), p)
					for st.Next() {
						if ev := st.Current(); ev.Type == "response.completed" || ev.Type == "response.failed" {
							resp := ev.Response
							r = &resp
						}
					}
					if err := st.Err(); err != nil {
						t.Fatal(err)
					}
					if r == nil {
						t.Fatal("the stream ended without response.completed or response.failed")
					}
				} else {
					var err error
					if r, err = client.Responses.New(t.Context(), p); err != nil {
						t.Fatal(err)
					}
				}
				f := r.Text.Format.AsJSONSchema()
				var schema map[string]any
				json.Unmarshal([]byte(r.Text.Format.JSON.Schema.Raw()), &schema)
				got := []any{string(f.Type), f.Name, f.Description, f.Strict, schema}
				want := []any{"json_schema", "sign", "The user's sign.", tc.strict, signSchema}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("echoed text.format (type, name, description, strict, schema) (-want +got):\n%s", diff)
				}
				if r.Status != responses.ResponseStatus(tc.wantStatus) {
					t.Fatalf("status %q (error %+v, text %q), want %q", r.Status, r.Error, r.OutputText(), tc.wantStatus)
				}
				if tc.wantStatus == "failed" {
					if r.Error.Code != "server_error" || !strings.Contains(r.Error.Message, "sign") || r.OutputText() != "" {
						t.Errorf("error %+v, text %q; want server_error naming the format, no text", r.Error, r.OutputText())
					}
				} else if r.OutputText() != tc.text {
					t.Errorf("text %q, want %q", r.OutputText(), tc.text)
				}
			})
		}
	}
}

// mcpTool is an MCP tool declaration of server label, its calls to be
// approved.
func mcpTool(label string, allowed ...string) responses.ToolUnionParam {
	tool := responses.ToolParamOfMcp(label)
	tool.OfMcp.ServerURL = openai.String("https://" + label + ".example/mcp")
	tool.OfMcp.RequireApproval = responses.ToolMcpRequireApprovalUnionParam{OfMcpToolApprovalSetting: openai.String("always")}
	if len(allowed) > 0 {
		tool.OfMcp.AllowedTools = responses.ToolMcpAllowedToolsUnionParam{OfMcpAllowedTools: allowed}
	}
	return tool
}

// TestMCPApproval: an MCP approval request carries the server_label of the
// MCP tool the request declared (of the one whose allowed tools name the
// call, when several are), and once approved the service's call is
// reported in the next response's output as an mcp_call item (before the
// model's answer), in a chain of responses, a conversation, and a history
// resent with store false (which resends the mcp_call item too); a denial
// makes no mcp_call.
func TestMCPApproval(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{
		{Steps: []coretest.Step{
			{Calls: []coretest.Call{{Name: "ask_question", Arguments: json.RawMessage(`{"repo":"toolrelay"}`), Approval: true}}},
			{Text: "Asked: {{result 0}}"},
		}},
		{Steps: []coretest.Step{{Text: "Anything else?"}}},
	}}
	tools := []responses.ToolUnionParam{mcpTool("github", "list_issues"), mcpTool("deepwiki", "ask_question", "read_wiki")}
	for _, mode := range []string{"chain", "conversation", "resend"} {
		for _, approve := range []bool{true, false} {
			t.Run(mode+map[bool]string{true: ", approved", false: ", denied"}[approve], func(t *testing.T) {
				_, client := newServer(t, script, &foundrytest.Options{Plain: true})
				history := []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("Ask the wiki.", responses.EasyInputMessageRoleUser)}
				p := responses.ResponseNewParams{Model: "gpt-4.1-mini", Tools: tools, Input: inputItems(history...)}
				switch mode {
				case "conversation":
					conv, err := client.Conversations.New(t.Context(), conversations.ConversationNewParams{})
					if err != nil {
						t.Fatal(err)
					}
					p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
				case "resend":
					p.Store = openai.Bool(false)
				}
				first, err := client.Responses.New(t.Context(), p)
				if err != nil {
					t.Fatal(err)
				}
				if len(first.Output) != 1 || first.Output[0].Type != "mcp_approval_request" {
					t.Fatalf("first output %s, want one mcp_approval_request", first.JSON.Output.Raw())
				}
				req := first.Output[0].AsMcpApprovalRequest()
				if req.ServerLabel != "deepwiki" || req.Name != "ask_question" {
					t.Errorf("approval request of %s/%s, want deepwiki/ask_question (the declared tool that allows it)", req.ServerLabel, req.Name)
				}
				answer := responses.ResponseInputItemParamOfMcpApprovalResponse(req.ID, approve)
				switch mode {
				case "chain":
					p.PreviousResponseID = openai.String(first.ID)
					p.Input = inputItems(answer)
				case "conversation":
					p.Input = inputItems(answer)
				case "resend":
					history = append(history, resend(t, first)...)
					history = append(history, answer)
					p.Input = inputItems(history...)
				}
				second, err := client.Responses.New(t.Context(), p)
				if err != nil {
					t.Fatalf("the approval response: %v", err)
				}
				var types []string
				for _, o := range second.Output {
					types = append(types, o.Type)
				}
				want := []string{"message"}
				if approve {
					want = []string{"mcp_call", "message"}
				}
				if diff := cmp.Diff(want, types); diff != "" {
					t.Fatalf("second output types (-want +got):\n%s", diff)
				}
				if approve {
					call := second.Output[0].AsMcpCall()
					got := []string{call.ServerLabel, call.Name, call.Arguments, call.ApprovalRequestID, call.Status, call.Output}
					if diff := cmp.Diff([]string{"deepwiki", "ask_question", `{"repo":"toolrelay"}`, req.ID, "completed", "approved"}, got); diff != "" {
						t.Errorf("mcp_call (server_label, name, arguments, approval_request_id, status, output) (-want +got):\n%s", diff)
					}
					if !strings.HasPrefix(call.ID, "mcp_") || call.JSON.Error.Raw() != "null" {
						t.Errorf("mcp_call id %q, error %s; want an mcp_ id and a null error", call.ID, call.JSON.Error.Raw())
					}
				}
				if mode != "resend" {
					return
				}
				// The next turn resends everything, the mcp_call item too.
				history = append(history, resend(t, second)...)
				history = append(history, responses.ResponseInputItemParamOfMessage("Thanks.", responses.EasyInputMessageRoleUser))
				p.Input = inputItems(history...)
				third, err := client.Responses.New(t.Context(), p)
				if err != nil {
					t.Fatalf("a history with the mcp_call item resent: %v", err)
				}
				if third.OutputText() != "Anything else?" || len(third.Output) != 1 {
					t.Errorf("third output %s, want the next turn's answer alone", third.JSON.Output.Raw())
				}
			})
		}
	}
}

// resend returns r's output items as input items, as a client that keeps
// the history resends them.
func resend(t *testing.T, r *responses.Response) []responses.ResponseInputItemUnionParam {
	t.Helper()
	var items []responses.ResponseInputItemUnionParam
	for _, o := range r.Output {
		var p responses.ResponseInputItemUnionParam
		if err := json.Unmarshal([]byte(o.RawJSON()), &p); err != nil {
			t.Fatal(err)
		}
		items = append(items, p)
	}
	return items
}
