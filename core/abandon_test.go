package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// TestToolAbandon: Runner.Cancel of a turn paused on approvals calls the
// Abandon hook of each pending call's tool that has one, once the
// service's turn is canceled, with the call; a hook's error is logged and
// Cancel succeeds; a tool without a hook is left alone.
func TestToolAbandon(t *testing.T) {
	for _, tt := range []struct {
		name    string
		hookErr error
	}{
		{"abandoned", nil},
		{"the hook fails", errors.New("remote task gone")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			var (
				mu        sync.Mutex
				abandoned []string
				canceled  bool
			)
			b := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
				{Calls: []coretest.Call{
					{Name: "ship", Arguments: json.RawMessage(`{"order":"7"}`)},
					{Name: "note", Arguments: json.RawMessage(`{"order":"7"}`)},
				}},
				{Text: "never"},
			}}}}, nil)
			ship := mustTool(t)(core.NewTool("ship", "Ships an order.", func(context.Context, struct{ Order string }) (string, error) {
				return "shipped", nil
			}, &core.ToolOptions{
				Approval: core.ApprovalAlways("shipping needs a person"),
				Abandon: func(ctx context.Context, call core.Call) error {
					mu.Lock()
					defer mu.Unlock()
					canceled = b.Received()[len(b.Received())-1].Kind == "cancel"
					abandoned = append(abandoned, call.Name+" "+string(call.Arguments))
					return tt.hookErr
				},
			}))
			note := mustTool(t)(core.NewTool("note", "Notes an order.", func(context.Context, struct{ Order string }) (string, error) {
				return "noted", nil
			}, &core.ToolOptions{Approval: core.ApprovalAlways("so does noting")}))
			tb, err := core.NewToolbox(ship, note)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			r := core.NewRunner(b, tb, &core.Options{Journal: journaldriver.NewMemory(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer r.Close()
			res, err := r.Run(ctx, "go", nil)
			if !errors.Is(err, core.ErrAwaitingApproval) {
				t.Fatalf("Run = %+v, %v; want a pause", res, err)
			}
			if err := r.Cancel(ctx, res.Thread); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{`ship {"order":"7"}`}, abandoned); diff != "" {
				t.Errorf("abandoned calls (-want +got):\n%s", diff)
			}
			if !canceled {
				t.Error("Abandon ran before the service's turn was canceled")
			}
			logged := strings.Contains(logs.String(), "could not abandon")
			if logged != (tt.hookErr != nil) {
				t.Errorf("logged %q; want a warning only when the hook fails", logs.String())
			}
		})
	}
}

// TestAgentToolRefusesAbandon: an agent tool abandons its child itself.
func TestAgentToolRefusesAbandon(t *testing.T) {
	child := core.NewRunner(coretest.NewBackend(childScript("1"), nil), nil, nil)
	defer child.Close()
	_, err := core.NewAgentTool("ask", "Ask.", child, &core.AgentToolOptions{Tool: core.ToolOptions{Abandon: func(context.Context, core.Call) error { return nil }}})
	if err == nil || !strings.Contains(err.Error(), "Abandon") {
		t.Errorf("NewAgentTool with Tool.Abandon: %v; want a refusal naming it", err)
	}
}
