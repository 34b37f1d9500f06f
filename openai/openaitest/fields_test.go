package openaitest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
)

// TestRequiredFields: what the SDK's types mark required is there, even
// when empty or null: a message's content and phase (null for the user's),
// a function_call_output's output and error (a failed call's output null,
// its status failed), an echoed function tool's description and
// defer_loading.
func TestRequiredFields(t *testing.T) {
	_, c := newServer(t, customerScript(), nil)
	id, turn, call := session(t, c)
	r := oai.AgentSessionInputParamOfParamAgentSessionInputToolResult(call, false, turn)
	r.OfParamAgentSessionInputToolResult.Error = oai.String("no such customer")
	if err := c.Beta.Agents.Sessions.Events.New(t.Context(), id, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{r}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := c.Beta.Agents.Sessions.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still %s", s.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	page, err := c.Beta.Agents.Sessions.Items.List(t.Context(), id, oai.BetaAgentSessionItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, it := range page.Data {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(it.RawJSON()), &m); err != nil {
			t.Fatal(err)
		}
		var typ, role, status string
		json.Unmarshal(m["type"], &typ)
		json.Unmarshal(m["role"], &role)
		json.Unmarshal(m["status"], &status)
		kind := typ + "/" + role
		seen[kind] = true
		var want []string
		switch typ {
		case "message":
			want = []string{"content", "phase"}
		case "function_call_output":
			want = []string{"output", "error"}
			if status != "failed" || string(m["output"]) != "null" {
				t.Errorf("the failed call's output item: %s; want status failed and output null", it.RawJSON())
			}
		}
		for _, k := range want {
			if _, ok := m[k]; !ok {
				t.Errorf("%s item without %q: %s", kind, k, it.RawJSON())
			}
		}
	}
	for _, k := range []string{"message/user", "message/assistant", "function_call_output/"} {
		if !seen[k] {
			t.Errorf("no %s item among %v", k, seen)
		}
	}
	agents, err := c.Beta.Agents.List(t.Context(), oai.BetaAgentListParams{})
	if err != nil {
		t.Fatalf("agents.list: %v", err)
	}
	for _, a := range agents.Data {
		for _, tool := range a.Tools {
			var m map[string]json.RawMessage
			json.Unmarshal([]byte(tool.RawJSON()), &m)
			for _, k := range []string{"defer_loading", "description"} {
				if _, ok := m[k]; !ok {
					t.Errorf("echoed tool without %q: %s", k, tool.RawJSON())
				}
			}
		}
	}
}

// TestManagementEndpoints: agents.list, agents.update, sessions.list and
// sessions.update answer as the SDK expects: lists newest first (or
// oldest, with order=asc) and filtered by agent, updates applied and
// echoed.
func TestManagementEndpoints(t *testing.T) {
	_, c := newServer(t, customerScript(), nil)
	ctx := t.Context()
	first, _, _ := session(t, c)
	second, _, _ := session(t, c)
	agents, err := c.Beta.Agents.List(ctx, oai.BetaAgentListParams{})
	if err != nil || len(agents.Data) != 2 {
		t.Fatalf("agents.list = %v, %v; want the two agents", agents, err)
	}
	newest := agents.Data[0]
	updated, err := c.Beta.Agents.Update(ctx, newest.ID, oai.BetaAgentUpdateParams{Instructions: oai.String("Be brief."), Name: oai.String("support")})
	if err != nil || updated.Instructions != "Be brief." || updated.Name != "support" || updated.Model != newest.Model {
		t.Fatalf("agents.update = %+v, %v", updated, err)
	}
	if got, err := c.Beta.Agents.Get(ctx, newest.ID); err != nil || got.Instructions != "Be brief." {
		t.Errorf("the agent after the update: %+v, %v", got, err)
	}
	sessions, err := c.Beta.Agents.Sessions.List(ctx, oai.BetaAgentSessionListParams{Order: oai.BetaAgentSessionListParamsOrderAsc})
	if err != nil || len(sessions.Data) != 2 || sessions.Data[0].ID != first || sessions.Data[1].ID != second {
		t.Fatalf("sessions.list (asc) = %v, %v; want %s then %s", sessions, err, first, second)
	}
	mine, err := c.Beta.Agents.Sessions.List(ctx, oai.BetaAgentSessionListParams{AgentID: oai.String(newest.ID)})
	if err != nil || len(mine.Data) != 1 || mine.Data[0].ID != second {
		t.Errorf("sessions.list of agent %s = %v, %v; want %s only", newest.ID, mine, err, second)
	}
	s, err := c.Beta.Agents.Sessions.Update(ctx, first, oai.BetaAgentSessionUpdateParams{Metadata: map[string]string{"ticket": "42"}})
	if err != nil || s.Metadata["ticket"] != "42" {
		t.Fatalf("sessions.update = %+v, %v", s, err)
	}
	if got, err := c.Beta.Agents.Sessions.Get(ctx, first); err != nil || got.Metadata["ticket"] != "42" {
		t.Errorf("the session after the update: metadata %v, %v", got.Metadata, err)
	}
}

// TestAgentMetadata: an agent (and a session) keeps the metadata it is
// created or updated with, as the service does: an update without metadata
// leaves it, one with {} clears it, and more than 16 pairs or an over-long
// key or value is refused.
func TestAgentMetadata(t *testing.T) {
	_, c := newServer(t, customerScript(), nil)
	ctx := t.Context()
	a, err := c.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "gpt-5", Metadata: map[string]string{"team": "support"}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		update oai.BetaAgentUpdateParams
		want   map[string]string
	}{
		{"created with", oai.BetaAgentUpdateParams{}, map[string]string{"team": "support"}},
		{"replaced", oai.BetaAgentUpdateParams{Metadata: map[string]string{"team": "billing", "tier": "2"}}, map[string]string{"team": "billing", "tier": "2"}},
		{"left alone by an update without it", oai.BetaAgentUpdateParams{Instructions: oai.String("Be brief.")}, map[string]string{"team": "billing", "tier": "2"}},
		{"cleared by {}", oai.BetaAgentUpdateParams{Metadata: map[string]string{}}, map[string]string{}},
	}
	for _, st := range steps {
		if st.name != "created with" {
			u, err := c.Beta.Agents.Update(ctx, a.ID, st.update)
			if err != nil {
				t.Fatalf("%s: agents.update: %v", st.name, err)
			}
			if diff := cmp.Diff(st.want, u.Metadata); diff != "" {
				t.Errorf("%s: the update's answer (-want +got):\n%s", st.name, diff)
			}
		}
		got, err := c.Beta.Agents.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st.want, got.Metadata); diff != "" {
			t.Errorf("%s: agents.retrieve metadata (-want +got):\n%s", st.name, diff)
		}
	}
	sess, err := c.Beta.Agents.Sessions.New(ctx, oai.BetaAgentSessionNewParams{
		Environment: oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}},
		AgentID:     oai.String(a.ID),
		Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String("Hi")},
		Metadata:    map[string]string{"ticket": "42"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Beta.Agents.Sessions.Get(ctx, sess.ID); err != nil || got.Metadata["ticket"] != "42" {
		t.Errorf("a session created with metadata reads back %v, %v", got.Metadata, err)
	}
	tooMany := map[string]string{}
	for i := range 17 {
		tooMany[fmt.Sprint("k", i)] = "v"
	}
	for name, md := range map[string]map[string]string{
		"17 pairs":         tooMany,
		"a 65-char key":    {strings.Repeat("k", 65): "v"},
		"a 513-char value": {"k": strings.Repeat("v", 513)},
	} {
		_, err := c.Beta.Agents.Update(ctx, a.ID, oai.BetaAgentUpdateParams{Metadata: md})
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Errorf("agents.update with %s: %v, want a 400", name, err)
		}
		if _, err := c.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "gpt-5", Metadata: md}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Errorf("agents.create with %s: %v, want a 400", name, err)
		}
	}
}
