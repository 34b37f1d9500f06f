package foundry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// TestResponses runs the weather chain on the plain Responses API backend
// against the fake in plain mode: no agent; the model, the instructions
// and the tools go with every request; the API key is a bearer token.
// Each mode links the requests its way: a chain by previous_response_id,
// a conversation by its id, and stateless mode by neither, every request
// saying store: false (the fake records what it received: a request that
// lost its store: false would have the service keep the conversation).
func TestResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode foundry.Mode
		env  bool // base URL and key from OPENAI_BASE_URL and OPENAI_API_KEY
	}{
		{"chain", "", false},
		{"chain from the environment", "", true},
		{"conversation", foundry.Conversation, false},
		{"stateless", trresponses.Stateless, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFake(t, weatherScript(), &foundrytest.Options{Plain: true, Token: "sk-test", Reasoning: true})
			var c counter
			tools := toolbox(t, &c)
			opts := &trresponses.Options{
				BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test", Model: "gpt-4.1-mini", Instructions: "You are a weather bot.",
				Mode: tc.mode, HTTPClient: srv.Client(), RequestOptions: fast, Logger: discard,
			}
			if tc.env {
				t.Setenv("OPENAI_BASE_URL", srv.OpenAIBaseURL())
				t.Setenv("OPENAI_API_KEY", "sk-test")
				opts.BaseURL, opts.APIKey = "", ""
			}
			b, err := trresponses.Open(context.Background(), tools, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if b.Name() != "responses" {
				t.Errorf("Name = %q", b.Name())
			}
			res, err := newRunner(b, tools, nil).Run(context.Background(), "What's the weather like in my favorite city?", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != weatherAnswer {
				t.Errorf("answer = %q", res.Text)
			}
			var names []string
			for _, tool := range tools.Tools() {
				names = append(names, tool.Name())
			}
			n := 0
			for _, r := range srv.Requests() {
				if r.Op != foundrytest.OpCreateResponse {
					continue
				}
				n++
				var m struct {
					Model        string            `json:"model"`
					Instructions string            `json:"instructions"`
					Ref          json.RawMessage   `json:"agent_reference"`
					Previous     string            `json:"previous_response_id"`
					Conversation string            `json:"conversation"`
					Store        *bool             `json:"store"`
					Tools        []json.RawMessage `json:"tools"`
				}
				if err := json.Unmarshal(r.Body, &m); err != nil {
					t.Fatal(err)
				}
				if m.Model != "gpt-4.1-mini" || m.Instructions != "You are a weather bot." || m.Ref != nil {
					t.Errorf("request %d: model %q, instructions %q, agent_reference %s", n, m.Model, m.Instructions, m.Ref)
				}
				if tc.mode == "" && (n == 1) != (m.Previous == "") {
					t.Errorf("request %d: previous_response_id = %q", n, m.Previous)
				}
				if tc.mode == foundry.Conversation && m.Conversation == "" {
					t.Errorf("request %d: no conversation", n)
				}
				if stateless := tc.mode == trresponses.Stateless; stateless != (m.Store != nil && !*m.Store) ||
					stateless && (m.Previous != "" || m.Conversation != "") {
					t.Errorf("request %d in mode %q: store %s, previous_response_id %q, conversation %q; want store: false, and neither, only in stateless mode",
						n, tc.mode, storeText(m.Store), m.Previous, m.Conversation)
				}
				var got []string
				for i, raw := range m.Tools {
					var tool struct {
						Type, Name string
						Parameters json.RawMessage
						Strict     bool
					}
					json.Unmarshal(raw, &tool)
					got = append(got, tool.Name)
					want := tools.Tools()[i]
					if tool.Type != "function" || string(tool.Parameters) != string(want.Parameters()) || tool.Strict != want.Strict() {
						t.Errorf("request %d tool %d = %s", n, i, raw)
					}
				}
				if diff := cmp.Diff(names, got); diff != "" {
					t.Errorf("request %d tools mismatch (-want +got):\n%s", n, diff)
				}
				if r.Header.Get("Authorization") != "Bearer sk-test" {
					t.Errorf("request %d Authorization = %q", n, r.Header.Get("Authorization"))
				}
			}
			if n != 4 {
				t.Errorf("%d response requests, want 4", n)
			}
			checkNoRefusals(t, srv)

			// The chain resumes from its last response in a fresh backend.
			if tc.mode == "" {
				b2, err := trresponses.Open(context.Background(), tools, opts)
				if err != nil {
					t.Fatal(err)
				}
				got, err := newRunner(b2, tools, nil).Resume(context.Background(), res.Thread, nil)
				if err != nil || got.Text != weatherAnswer {
					t.Errorf("Resume = %+v, %v", got, err)
				}
			}
		})
	}
}

// storeText is a request's store, as sent.
func storeText(p *bool) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}

// TestResponsesNeedsModel checks that OpenResponses refuses to open
// without a model.
func TestResponsesNeedsModel(t *testing.T) {
	_, err := trresponses.Open(context.Background(), nil, &trresponses.Options{APIKey: "k"})
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("OpenResponses = %v, want InvalidArgument", err)
	}
}
