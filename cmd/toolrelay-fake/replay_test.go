package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	_ "github.com/toolrelay/toolrelay/openai" // the openai backend
)

// TestReplayCassette serves the customer example's cassette with
// -replay, runs the customer flow on the openai backend against it (no
// cassette in the client: the fake serves it), and sends a request the
// cassette does not hold, which gets 400 with the difference.
func TestReplayCassette(t *testing.T) {
	s := start(t, "-replay", "../../examples/customer/testdata/customer.yaml")
	for k, v := range map[string]string{"TOOLRELAY_CONFIG": "", "TOOLRELAY_REPLAY": "", "TOOLRELAY_BACKEND": "openai",
		"OPENAI_API_KEY": "any-key", "OPENAI_BASE_URL": s["BASE_URL"] + "/v1"} {
		t.Setenv(k, v)
	}
	type args struct {
		CustomerID string `json:"customer_id" jsonschema:"The customer's ID."`
	}
	type customer struct {
		Name string `json:"name"`
		Plan string `json:"plan"`
	}
	type lookup struct {
		Found    bool      `json:"found"`
		Customer *customer `json:"customer"`
	}
	tool, err := core.NewTool("get_customer", "Look up a customer by ID.", func(_ context.Context, a args) (lookup, error) {
		return lookup{Found: true, Customer: &customer{Name: "Example Customer", Plan: "pro"}}, nil
	}, &core.ToolOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	r, err := adapter.Open(t.Context(), tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), "Look up customer 123 and tell me their name and plan.", nil)
	r.Close()
	if err != nil {
		t.Fatalf("run on the served cassette: %v", err)
	}
	if want := `Here is what I found for customer 123: {"found":true,"customer":{"name":"Example Customer","plan":"pro"}}`; res.Text != want {
		t.Errorf("answer %q, want %q", res.Text, want)
	}

	resp, err := http.Post(s["BASE_URL"]+"/v1/agents", "application/json", strings.NewReader(`{"model":"another"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Type, Message string }
	}
	json.Unmarshal(b, &e)
	if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "replay_mismatch" || !strings.Contains(e.Error.Message, "POST /v1/agents is not recorded") {
		t.Errorf("a request not recorded: %d %s", resp.StatusCode, b)
	}
}
