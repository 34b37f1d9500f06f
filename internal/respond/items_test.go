package respond

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
)

// TestStepItems checks what a step makes of the output items a client
// does not run as function calls: the items the service ran (those of its
// own tools, a tool search it executes, a shell call in its container, a
// call it answered in the same response; an item of a type the loop does
// not know, whatever its members) are passed over and the answer is the
// message; an OAuth consent request is a call of kind
// ServiceApproval carrying its link, also in a response said incomplete;
// an item the client is to run is an error naming its kind, with its code.
// A reply decoded by encoding/json and one from openai-go's Response (a
// stream's) give the same step.
func TestStepItems(t *testing.T) {
	const answer = `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[]}]}`
	for _, tc := range []struct {
		name   string
		status string
		items  string
		calls  []driver.Call
		code   errcode.Code // of the error, if any
		names  string       // what the error names
	}{
		{name: "the service's own calls", items: `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},
			{"type":"file_search_call","id":"fs_1","status":"completed","queries":["q"]},
			{"type":"mcp_list_tools","id":"ml_1","server_label":"gh","tools":[]},
			{"type":"mcp_call","id":"mcp_1","server_label":"gh","name":"list","arguments":"{}","output":"[]"},
			{"type":"code_interpreter_call","id":"ci_1","status":"completed","code":"1","container_id":"c"},
			{"type":"image_generation_call","id":"ig_1","status":"completed","result":""},
			{"type":"tool_search_call","id":"ts_1","call_id":"ts_1","execution":"server","arguments":{"query":"q"},"status":"completed"},
			{"type":"tool_search_call","id":"ts_2","call_id":"ts_2","arguments":{"query":"q"},"status":"completed"},
			{"type":"shell_call","id":"sh_1","call_id":"call_sh1","action":{"commands":["ls"]},"environment":{"type":"container_reference","container_id":"c"},"status":"completed"},
			{"type":"shell_call","id":"sh_2","call_id":"call_sh2","action":{"commands":["ls"]},"environment":{"type":"local"},"status":"completed"},
			{"type":"shell_call_output","id":"sho_2","call_id":"call_sh2","output":[],"status":"completed"},
			{"type":"browser_automation_call","id":"ba_1","environment":"browser","status":"completed"}`},
		{name: "a consent request in an incomplete response", status: "incomplete",
			items: `{"type":"oauth_consent_request","id":"oauthreq_1","consent_link":"https://login.example/consent?x=1","server_label":"github"}`,
			calls: []driver.Call{{ID: "oauthreq_1", Name: "github/oauth_consent", Kind: driver.ServiceApproval,
				Arguments: json.RawMessage(`{"type":"oauth_consent_request","server_label":"github","consent_link":"https://login.example/consent?x=1"}`)}}},
		{name: "a computer-use action beside a function call",
			items: `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"},
			{"type":"computer_call","id":"cu_1","call_id":"call_cu","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`,
			code: errcode.Unimplemented, names: "computer_call call_cu"},
		{name: "a local shell call and a patch",
			items: `{"type":"shell_call","id":"sh_1","call_id":"call_sh","action":{"commands":["ls"]},"environment":{"type":"local"},"status":"completed"},
			{"type":"apply_patch_call","id":"ap_1","call_id":"call_ap","operation":{"type":"delete_file","path":"a"},"status":"completed"}`,
			code: errcode.Unimplemented, names: "shell_call call_sh, apply_patch_call call_ap"},
		{name: "a client tool search", items: `{"type":"tool_search_call","id":"ts_1","call_id":"ts_1","execution":"client","arguments":{},"status":"completed"}`,
			code: errcode.Unimplemented, names: "tool_search_call ts_1"},
		{name: "a workflow's action", items: `{"type":"workflow_action","id":"wfa_1","kind":"InvokeAzureAgent","action_id":"a","status":"completed"}`,
			code: errcode.FailedPrecondition, names: "workflow_action wfa_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == "" {
				status = "completed"
			}
			body := `{"id":"resp_1","status":"` + status + `","output":[` + tc.items + `,` + answer + `]}`
			var got reply
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			var r responses.Response
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatal(err)
			}
			b := &Backend{name: "responses", mode: Conversation}
			for _, rep := range []*reply{&got, replyOf(&r)} {
				step, err := b.step("conv_1", rep)
				switch {
				case tc.code != errcode.Unknown:
					if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.names) {
						t.Errorf("step = %+v, %v; want a %v error naming %s", step, err, tc.code, tc.names)
					}
				case err != nil:
					t.Errorf("step: %v", err)
				case tc.calls != nil:
					for i := range tc.calls {
						tc.calls[i].Thread = "conv_1"
					}
					if diff := cmp.Diff(tc.calls, step.Calls); diff != "" {
						t.Errorf("calls (-want +got):\n%s", diff)
					}
				case step.Text != "done" || len(step.Calls) != 0:
					t.Errorf("step = %+v, want the answer", step)
				}
			}
		})
	}
}
