package foundrytest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

const hostedDefinition = `{"kind":"hosted","container_protocol_versions":[{"protocol":"responses","version":"v1"}],"cpu":"1","memory":"2Gi"}`

// call sends a request with a bearer token to the fake's project and
// returns the answer's status, header and body.
func call(t *testing.T, srv *foundrytest.Server, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.ProjectEndpoint()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestAgentObject checks the 2026 agent object the fake serves: its
// state, where a disabled state comes from, and its endpoint's version
// selector (FixedRatio rules).
func TestAgentObject(t *testing.T) {
	srv := foundrytest.NewServer(horoscope(), nil)
	t.Cleanup(srv.Close)
	srv.AddAgent("routed", "gpt-4.1-mini")
	srv.AddAgent("routed", "gpt-4.1")
	if !srv.SetAgentEndpoint("routed", foundrytest.VersionRule{Version: "1", Percent: 90}, foundrytest.VersionRule{Version: "2", Percent: 10}) ||
		!srv.SetAgentState("routed", "disabled", "admin") {
		t.Fatal("the agent is unknown")
	}
	if srv.SetAgentEndpoint("nobody") || srv.SetAgentState("nobody", "disabled", "") {
		t.Error("an unknown agent was configured")
	}
	status, _, body := call(t, srv, "GET", "/agents/routed?api-version=v1", "")
	if status != 200 {
		t.Fatalf("GET agent: %d %s", status, body)
	}
	var got struct {
		State       string         `json:"state"`
		StateSource string         `json:"state_source"`
		Endpoint    map[string]any `json:"agent_endpoint"`
		Versions    struct {
			Latest struct{ Version string } `json:"latest"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version_selector": map[string]any{"version_selection_rules": []any{
			map[string]any{"type": "FixedRatio", "agent_version": "1", "traffic_percentage": 90.0},
			map[string]any{"type": "FixedRatio", "agent_version": "2", "traffic_percentage": 10.0},
		}},
		"protocol_configuration": map[string]any{"responses": map[string]any{}},
	}
	if diff := cmp.Diff(want, got.Endpoint); diff != "" {
		t.Errorf("agent_endpoint (-want +got):\n%s", diff)
	}
	if got.State != "disabled" || got.StateSource != "admin" || got.Versions.Latest.Version != "2" {
		t.Errorf("state %q, state_source %q, latest %q; want disabled, admin, 2", got.State, got.StateSource, got.Versions.Latest.Version)
	}
}

// TestDefinitionKinds checks the definition kinds a create-version request
// may carry, and what each requires.
func TestDefinitionKinds(t *testing.T) {
	srv := foundrytest.NewServer(horoscope(), nil)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		def    string
		status int
	}{
		{`{"kind":"prompt","model":"gpt-4.1-mini"}`, 200},
		{hostedDefinition, 200},
		{`{"kind":"hosted","container_protocol_versions":[{"protocol":"responses","version":"v1"}]}`, 400}, // no cpu, memory
		{`{"kind":"workflow","workflow":"kind: workflow\n"}`, 200},
		{`{"kind":"external","otel_agent_id":"elsewhere"}`, 200},
		{`{"kind":"voice"}`, 400},
	} {
		status, _, body := call(t, srv, "POST", "/agents/kinds/versions?api-version=v1", `{"definition":`+tc.def+`}`)
		if status != tc.status {
			t.Errorf("create a version %s: %d %s; want %d", tc.def, status, body, tc.status)
		}
	}
	if got := srv.AddAgentVersion("kinds", json.RawMessage(`{"kind":"voice"}`)); got != "" {
		t.Errorf("AddAgentVersion of an unknown kind = %q, want refused", got)
	}
}

// TestAgentEndpointRoute checks the per-agent endpoint: it takes
// api-version=v1, refuses an agent_reference, runs the version its
// selector serves (not the latest); and the refusals of the agents the
// routes do not run: a hosted agent on the project's route, an external
// agent on either, a disabled agent on either.
func TestAgentEndpointRoute(t *testing.T) {
	srv := foundrytest.NewServer(horoscope(), nil)
	t.Cleanup(srv.Close)
	srv.AddAgent("routed", "gpt-4.1-mini")
	srv.AddAgent("routed", "gpt-4.1")
	srv.SetAgentEndpoint("routed", foundrytest.VersionRule{Version: "1", Percent: 100})
	srv.AddAgentVersion("sandbox", json.RawMessage(hostedDefinition))
	srv.AddAgentVersion("elsewhere", json.RawMessage(`{"kind":"external"}`))
	srv.AddAgent("off", "gpt-4.1-mini")
	srv.SetAgentState("off", "disabled", "")
	ref := func(name string) string {
		return `{"input":"hi","agent_reference":{"type":"agent_reference","name":"` + name + `"}}`
	}
	const endpoint = "/endpoint/protocols/openai/responses?api-version=v1"
	for _, tc := range []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"endpoint", "/agents/routed" + endpoint, `{"input":"hi"}`, 200, `"version":"1"`},
		{"endpoint without api-version", "/agents/routed/endpoint/protocols/openai/responses", `{"input":"hi"}`, 400, "api-version"},
		{"endpoint with an agent_reference", "/agents/routed" + endpoint, ref("routed"), 400, "agent_reference"},
		{"unknown agent's endpoint", "/agents/nobody" + endpoint, `{"input":"hi"}`, 404, "nobody"},
		{"hosted on the project route", "/openai/v1/responses", ref("sandbox"), 400, "hosted agent"},
		{"external on the project route", "/openai/v1/responses", ref("elsewhere"), 400, "external agent"},
		{"external on its endpoint", "/agents/elsewhere" + endpoint, `{"input":"hi"}`, 400, "external agent"},
		{"disabled on the project route", "/openai/v1/responses", ref("off"), 403, "disabled"},
		{"disabled on its endpoint", "/agents/off" + endpoint, `{"input":"hi"}`, 403, "disabled"},
	} {
		status, _, body := call(t, srv, "POST", tc.path, tc.body)
		if status != tc.status || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %s; want %d saying %s", tc.name, status, body, tc.status, tc.says)
		}
	}
	// The endpoint's conversations are the project's.
	status, _, body := call(t, srv, "POST", "/agents/routed/endpoint/protocols/openai/conversations?api-version=v1", `{}`)
	if status != 200 || len(srv.Conversations()) != 1 {
		t.Errorf("create a conversation on the endpoint: %d %s; the project has %d", status, body, len(srv.Conversations()))
	}
}

// TestHostedSessions checks a hosted agent's sessions: a request that
// names none gets a new one; the answer names it in x-agent-session-id and
// in the response's agent_session_id (also in a stream's response
// events); a request that names it runs in it, with the sandbox of the
// turns before; a caller's new id makes a session of that id; an id that
// is not one is refused.
func TestHostedSessions(t *testing.T) {
	srv := foundrytest.NewServer(horoscope(), nil)
	t.Cleanup(srv.Close)
	srv.AddAgentVersion("sandbox", json.RawMessage(hostedDefinition))
	const path = "/agents/sandbox/endpoint/protocols/openai/responses?api-version=v1"
	type answer struct {
		ID      string `json:"id"`
		Session string `json:"agent_session_id"`
		Output  []struct {
			CallID string `json:"call_id"`
		} `json:"output"`
	}
	status, h, body := call(t, srv, "POST", path, `{"input":"horoscope?"}`)
	var first answer
	if status != 200 || json.Unmarshal(body, &first) != nil || len(first.Output) != 1 {
		t.Fatalf("first turn: %d %s", status, body)
	}
	session := h.Get("x-agent-session-id")
	if session == "" || first.Session != session {
		t.Fatalf("first turn: x-agent-session-id %q, agent_session_id %q; want one session named in both", session, first.Session)
	}
	next := `{"previous_response_id":"` + first.ID + `","agent_session_id":"` + session + `","stream":true,"input":[{"type":"function_call_output","call_id":"` + first.Output[0].CallID + `","output":"otter"}]}`
	status, h, body = call(t, srv, "POST", path, next)
	if status != 200 || h.Get("x-agent-session-id") != session {
		t.Fatalf("second turn: %d, x-agent-session-id %q; want %q", status, h.Get("x-agent-session-id"), session)
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		var ev struct {
			Type     string  `json:"type"`
			Response *answer `json:"response"`
		}
		if ok && json.Unmarshal(data, &ev) == nil && ev.Response != nil && ev.Response.Session != session {
			t.Errorf("%s names session %q, want %q", ev.Type, ev.Response.Session, session)
		}
	}
	sessions := srv.Sessions()
	if len(sessions) != 1 || sessions[0].ID != session || len(sessions[0].Responses) != 2 || sessions[0].Responses[0] != first.ID || sessions[0].Version != "1" {
		t.Errorf("Sessions = %+v; want one, %s, that served both turns, backed by version 1", sessions, session)
	}
	if status, h, _ := call(t, srv, "POST", path, `{"input":"horoscope?","agent_session_id":"caller-chosen-1"}`); status != 200 || h.Get("x-agent-session-id") != "caller-chosen-1" {
		t.Errorf("a caller's session: %d, x-agent-session-id %q", status, h.Get("x-agent-session-id"))
	}
	if status, _, body := call(t, srv, "POST", path, `{"input":"horoscope?","agent_session_id":"x"}`); status != 400 || !strings.Contains(string(body), "agent_session_id") {
		t.Errorf("a session id that is not one: %d %s; want 400", status, body)
	}
	if got := len(srv.Sessions()); got != 2 {
		t.Errorf("%d sessions, want 2", got)
	}
	var named []string
	for _, r := range srv.Requests() {
		if r.Op == foundrytest.OpCreateResponse {
			named = append(named, r.AgentSessionID())
		}
	}
	if diff := cmp.Diff([]string{"", session, "caller-chosen-1", "x"}, named); diff != "" {
		t.Errorf("Request.AgentSessionID (-want +got):\n%s", diff)
	}
}
