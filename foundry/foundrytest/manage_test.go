package foundrytest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// TestManagementEndpoints: the routes the official clients call beyond the
// tool loop answer: agents.list, agents.listVersions, agents.update (a new
// version), conversations.update, responses.inputItems.list and
// GET /openai/v1/models.
func TestManagementEndpoints(t *testing.T) {
	srv, client := newServer(t, horoscope(), nil)
	ctx := t.Context()
	srv.AddAgent("second-agent", "gpt-4.1")
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.ProjectEndpoint()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer test-token")
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	names := func(m map[string]any, key string) []string {
		var out []string
		for _, d := range m["data"].([]any) {
			out = append(out, d.(map[string]any)[key].(string))
		}
		return out
	}
	if got := names(call("GET", "/agents?api-version=v1", ""), "name"); strings.Join(got, ",") != "second-agent,my-agent" {
		t.Errorf("agents.list = %v, want the newest first", got)
	}
	updated := call("POST", "/agents/my-agent?api-version=v1", `{"definition":{"kind":"prompt","model":"gpt-4.1","instructions":"Be brief."}}`)
	latest := updated["versions"].(map[string]any)["latest"].(map[string]any)
	if latest["version"] != "2" {
		t.Errorf("agents.update = %v, want a version 2", updated)
	}
	if got := names(call("GET", "/agents/my-agent/versions?api-version=v1&order=asc", ""), "version"); strings.Join(got, ",") != "1,2" {
		t.Errorf("agents.listVersions = %v, want 1,2", got)
	}

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: map[string]string{"ticket": "42"}})
	if err != nil || !strings.Contains(c.RawJSON(), `"ticket":"42"`) {
		t.Fatalf("conversations.update = %s, %v", c.RawJSON(), err)
	}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my horoscope? I am an Aquarius.")}}, agentRef())
	if err != nil {
		t.Fatal(err)
	}
	items, err := client.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "message" {
		t.Fatalf("responses.inputItems.list = %+v, %v; want the user's message", items, err)
	}
	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) == 0 || models.Data[0].ID != foundrytest.DefaultModelDeployment {
		t.Errorf("models.list = %+v, %v", models, err)
	}
}
