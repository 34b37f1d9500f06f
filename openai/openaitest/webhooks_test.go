package openaitest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/webhooks"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

const testSecret = "whsec_dGhlIGZha2UncyB0ZXN0IHNpZ25pbmcga2V5IDMyIGJ5dGVz" // 32 bytes

// receiver is a webhook endpoint that verifies each delivery with
// openai-go's Unwrap and records the events.
type receiver struct {
	t      *testing.T
	client oai.Client
	// refuse, if set, answers the nth delivery (from 1) with its status.
	refuse func(n int) int
	// gate, if set, holds every delivery until it is closed.
	gate chan struct{}

	mu     sync.Mutex
	n      int
	events []*webhooks.UnwrapWebhookEventUnion
	ids    []string // webhook-id headers
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{t: t, client: oai.NewClient(option.WithWebhookSecret(testSecret), option.WithAPIKey("unused"))}
	hs := httptest.NewServer(r)
	t.Cleanup(hs.Close)
	return r, hs
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.gate != nil {
		<-r.gate
	}
	body, _ := io.ReadAll(req.Body)
	ev, err := r.client.Webhooks.Unwrap(body, req.Header)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if err != nil {
		r.t.Errorf("delivery %d: Unwrap: %v", r.n, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.refuse != nil {
		if status := r.refuse(r.n); status != 0 {
			w.WriteHeader(status)
			return
		}
	}
	r.events = append(r.events, ev)
	r.ids = append(r.ids, req.Header.Get("webhook-id"))
}

func (r *receiver) got() ([]*webhooks.UnwrapWebhookEventUnion, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events), slices.Clone(r.ids)
}

// startSession makes, with the SDK, an agent with tools and a session of it
// on input in env (nil: none).
func startSession(t *testing.T, client oai.Client, tools []oai.PersistedAgentToolParamUnion, env *oai.EnvironmentParamUnion, input string) *oai.AgentSession {
	t.Helper()
	ctx := t.Context()
	agent, err := client.Beta.Agents.New(ctx, oai.BetaAgentNewParams{Model: "m", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	e := oai.EnvironmentParamUnion{OfParamNone: &oai.EnvironmentParamNone{}}
	if env != nil {
		e = *env
	}
	sess, err := client.Beta.Agents.Sessions.New(ctx, oai.BetaAgentSessionNewParams{
		Environment: e,
		AgentID:     oai.String(agent.ID),
		Input:       oai.BetaAgentSessionNewParamsInputUnion{OfString: oai.String(input)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func flush(t *testing.T, srv *openaitest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := srv.FlushWebhooks(ctx); err != nil {
		t.Fatalf("FlushWebhooks: %v", err)
	}
}

// TestWebhooks: the fake sends a signed webhook for each session event
// that has one, which openai-go's Unwrap verifies and types: created,
// in_progress, action_required (naming the action) and idle, in order
// without Shuffle; each webhook's id is its event's, its data the session.
func TestWebhooks(t *testing.T) {
	rcv, hs := newReceiver(t)
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_customer", Arguments: json.RawMessage(`{"customer_id":"123"}`)}}},
		{Text: "done"},
	}}}}
	srv, client := newServer(t, script, &openaitest.Options{Webhooks: &openaitest.Webhooks{URLs: []string{hs.URL}, Secret: testSecret}})
	ctx := t.Context()
	sess := startSession(t, client, []oai.PersistedAgentToolParamUnion{customerTool()}, nil, "Hi")
	a := sess.RequiredActions[0]
	err := client.Beta.Agents.Sessions.Events.New(ctx, sess.ID, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{{
		OfParamAgentSessionInputToolResult: &oai.AgentSessionInputParamAgentSessionInputToolResult{TurnID: a.TurnID, CallID: a.CallID, Success: true,
			Output: oai.AgentFunctionCallOutputParamUnion{OfString: oai.String("ok")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	flush(t, srv)
	events, ids := rcv.got()
	type seen struct{ Type, Session, Action, Environment string }
	var got []seen
	for i, ev := range events {
		if ids[i] != ev.ID || ev.Object != "event" || ev.CreatedAt == 0 {
			t.Errorf("delivery %d: webhook-id %q, event %s (object %q, created_at %d), want the event's id, an event, a time", i, ids[i], ev.ID, ev.Object, ev.CreatedAt)
		}
		s := seen{Type: ev.Type, Session: ev.Data.ID, Environment: ev.Data.EnvironmentType}
		if v, ok := ev.AsAny().(webhooks.AgentSessionActionRequiredWebhookEvent); ok {
			s.Action = v.Data.RequiredAction.Type
		}
		got = append(got, s)
	}
	want := []seen{
		{"agent.session.created", sess.ID, "", "none"},
		{"agent.session.in_progress", sess.ID, "", "none"},
		{"agent.session.action_required", sess.ID, "function_call", ""},
		{"agent.session.in_progress", sess.ID, "", "none"},
		{"agent.session.idle", sess.ID, "", "none"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
}

// TestWebhookDeliveries: with Duplicates and two URLs each event reaches
// each URL twice; a delivery answered with other than 2xx is sent again
// (signed afresh) until one is taken; Shuffle delivers a later event
// before an earlier one.
func TestWebhookDeliveries(t *testing.T) {
	rcv1, hs1 := newReceiver(t)
	rcv2, hs2 := newReceiver(t)
	// The deliveries are held until every event was emitted: those
	// queued meanwhile go out together, shuffled.
	gate := make(chan struct{})
	rcv1.gate, rcv2.gate = gate, gate
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the receivers close, on a failure too
	rcv2.refuse = func(n int) int {
		if n%3 == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	// Ten turns of one text step each.
	var turns []coretest.Turn
	for range 10 {
		turns = append(turns, coretest.Turn{Steps: []coretest.Step{{Text: "hi"}}})
	}
	srv, client := newServer(t, &coretest.Script{Turns: turns}, &openaitest.Options{Webhooks: &openaitest.Webhooks{
		URLs: []string{hs1.URL, hs2.URL}, Secret: testSecret, Duplicates: 1, Shuffle: true, Seed: 7}})
	ctx := t.Context()
	sess := startSession(t, client, nil, nil, "Hi")
	for range 9 {
		msg := oai.AgentSessionInputParamOfParamAgentSessionInputMessage([]oai.AgentSessionInputMessageParam{{Content: []oai.InputContentParamUnion{oai.InputContentParamOfParamInputText("hi")}}})
		if err := client.Beta.Agents.Sessions.Events.New(ctx, sess.ID, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{msg}}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	flush(t, srv)
	const events = 1 + 10*2 // created, then in_progress and idle per turn
	for i, rcv := range []*receiver{rcv1, rcv2} {
		got, _ := rcv.got()
		count := map[string]int{}
		for _, ev := range got {
			count[ev.ID]++
		}
		if len(count) != events {
			t.Errorf("URL %d got %d events, want %d", i+1, len(count), events)
		}
		for id, n := range count {
			if n != 2 {
				t.Errorf("URL %d got event %s %d times, want 2 (a duplicate)", i+1, id, n)
			}
		}
	}
	retried := 0
	for _, d := range srv.WebhookDeliveries() {
		if d.URL == hs2.URL && d.Attempt > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no delivery refused with 503 was sent again")
	}
	// Events are numbered in the order they were emitted.
	got, _ := rcv1.got()
	late := 0
	for i := 1; i < len(got); i++ {
		if eventNumber(got[i].ID) < eventNumber(got[i-1].ID) {
			late++
		}
	}
	if late == 0 {
		t.Error("with Shuffle, every event arrived in the order it was emitted")
	}
}

func eventNumber(id string) int {
	var n int
	for _, c := range id {
		if c >= '0' && c <= '9' {
			n = 10*n + int(c-'0')
		}
	}
	return n
}

// TestSignWebhook: SignWebhook signs as openai-go verifies, with a
// whsec_ secret and a raw one; a bad whsec_ secret is an error.
func TestSignWebhook(t *testing.T) {
	body := []byte(`{"id":"evt_1","object":"event","created_at":1,"type":"agent.session.idle","data":{"id":"sess_1","environment_type":"none"}}`)
	for _, secret := range []string{testSecret, "a raw secret"} {
		hdr, err := openaitest.SignWebhook(secret, "evt_1", time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		svc := webhooks.NewWebhookService(option.WithWebhookSecret(secret))
		if _, err := svc.Unwrap(body, hdr); err != nil {
			t.Errorf("secret %q: Unwrap: %v", secret, err)
		}
	}
	if _, err := openaitest.SignWebhook("whsec_c2hvcnQ=", "evt_1", time.Now(), body); err == nil {
		t.Error("SignWebhook accepted a key of 5 bytes")
	}
}

// TestEnvironmentConnection: a session in a self-hosted environment waits
// for its executor at each turn until it connected: status
// requires_action with an environment_connection naming the environment
// (and no turn), no input event answers it, and ConnectEnvironment lets the
// turn go on.
func TestEnvironmentConnection(t *testing.T) {
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: "connected"}}}}}
	srv, client := newServer(t, script, nil)
	ctx := t.Context()
	selfHosted := oai.EnvironmentParamOfParamSelfHosted("/workspace")
	sess := startSession(t, client, nil, &selfHosted, "Hi")
	env := sess.Environment.AsSelfHosted()
	if sess.Status != "requires_action" || len(sess.RequiredActions) != 1 || env.ID == "" || env.RemoteURL == "" || env.WorkspaceDirectory != "/workspace" {
		t.Fatalf("session = %s, want requires_action in a self-hosted environment", sess.RawJSON())
	}
	a := sess.RequiredActions[0].AsEnvironmentConnection()
	if a.Type != "environment_connection" || a.EnvironmentID != env.ID || sess.RequiredActions[0].TurnID != "" {
		t.Errorf("required action = %s, want environment_connection of %s", sess.RequiredActions[0].RawJSON(), env.ID)
	}
	if err := srv.ConnectEnvironment("sess_missing"); err == nil {
		t.Error("ConnectEnvironment of no session: no error")
	}
	if err := srv.ConnectEnvironment(sess.ID); err != nil {
		t.Fatal(err)
	}
	got, err := client.Beta.Agents.Sessions.Get(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "idle" || len(got.RequiredActions) != 0 {
		t.Errorf("after ConnectEnvironment: %s, want idle", got.RawJSON())
	}
}

// TestSignIn: with SignIn a computer-use request asks to sign in
// (browser_authentication, two required fields); submit without a
// field's value is refused; submit with both is "signed in", cancel a
// failed "cancelled".
func TestSignIn(t *testing.T) {
	for _, submit := range []bool{true, false} {
		step := coretest.Step{Calls: []coretest.Call{{Name: "browser", Approval: true, Origin: "https://shop.example"}}}
		script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, {Text: `{{output "browser"}}`}}}}}
		srv, client := newServer(t, script, &openaitest.Options{SignIn: true})
		ctx := t.Context()
		sess := startSession(t, client, nil, nil, "Buy it")
		a := sess.RequiredActions[0]
		if a.Type != "computer_use_approval_request" || a.Request.Type != "browser_authentication" || a.Request.CredentialOrigin != "https://shop.example" || len(a.Request.Fields) != 2 {
			t.Fatalf("required action = %s, want a sign-in request", a.RawJSON())
		}
		answer := func(resp oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion) error {
			return client.Beta.Agents.Sessions.Events.New(ctx, sess.ID, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{{
				OfParamAgentSessionInputComputerUseApprovalRequestResult: &oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResult{
					RequestID: a.RequestID, Response: resp}}}})
		}
		if err := answer(oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion{
			OfBrowserAuthenticationSubmit: &oai.AgentBrowserAuthenticationSubmitParam{Fields: []oai.AgentBrowserAuthenticationSubmitParamField{{FieldID: "username", Value: "ann"}}}}); err == nil {
			t.Fatal("a submit without the password was taken")
		}
		resp := oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion{OfBrowserAuthenticationCancel: &oai.AgentBrowserAuthenticationCancelParam{}}
		want := coretest.Delivered{CallID: a.RequestID, Name: "browser", Failed: true, Error: "cancelled"}
		if submit {
			resp = oai.AgentSessionInputParamAgentSessionInputComputerUseApprovalRequestResultResponseUnion{
				OfBrowserAuthenticationSubmit: &oai.AgentBrowserAuthenticationSubmitParam{Fields: []oai.AgentBrowserAuthenticationSubmitParamField{
					{FieldID: "username", Value: "ann"}, {FieldID: "password", Value: "s3cret"}}}}
			want = coretest.Delivered{CallID: a.RequestID, Name: "browser", Output: "signed in"}
		}
		if err := answer(resp); err != nil {
			t.Fatal(err)
		}
		var got []coretest.Delivered
		for _, r := range srv.Received() {
			got = append(got, r.Results...)
		}
		if diff := cmp.Diff([]coretest.Delivered{want}, got); diff != "" {
			t.Errorf("submit %v: delivered (-want +got):\n%s", submit, diff)
		}
	}
}
