package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
)

// plan is the answer of TestFormat.
type plan struct {
	Name  string `json:"name"`
	Price int    `json:"price"`
}

// TestFormat (issue 31, item 9): a run's format goes with the session it
// creates, as the agent.text override ({"format":{"type":"json_schema",
// "schema":…}}), over the backend's agent or an existing one, and
// core.Decode reads the answer; a later run on the session may ask for
// the same format, or none, but not another (InvalidArgument, nothing
// sent).
func TestFormat(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(map[bool]string{false: "agent made", true: "existing agent"}[existing], func(t *testing.T) {
			answer := coretest.Step{Text: `{"name":"pro","price":20}`}
			s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{answer}}, {Steps: []coretest.Step{answer}}, {Steps: []coretest.Step{{Text: "plain"}}}}}
			h := start(t, setup{script: s})
			b := h.backend
			if existing {
				client := oai.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey("k"))
				agent, err := client.Beta.Agents.New(t.Context(), oai.BetaAgentNewParams{Model: "m"})
				if err != nil {
					t.Fatal(err)
				}
				b = h.open(openai.Options{Agent: agent.ID})
			}
			if !b.Capabilities().ResponseFormat {
				t.Error("Capabilities().ResponseFormat = false")
			}
			r := core.NewRunner(b, h.tools, &core.Options{Logger: discard()})
			format, err := core.NewFormat[plan]("plan", &core.ToolOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context(), "price?", &core.RunOptions{Format: format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := core.Decode[plan](format, res)
			if err != nil || got != (plan{Name: "pro", Price: 20}) {
				t.Errorf("Decode = %+v, %v", got, err)
			}
			var body struct {
				Agent struct {
					Text struct {
						Format struct {
							Type   string          `json:"type"`
							Schema json.RawMessage `json:"schema"`
						} `json:"format"`
					} `json:"text"`
				} `json:"agent"`
			}
			for _, q := range h.srv.Requests() {
				if q.Method == "POST" && q.Path == "agents/sessions" {
					json.Unmarshal(q.Body, &body)
				}
			}
			if f := body.Agent.Text.Format; f.Type != "json_schema" || !sameJSON(t, f.Schema, format.Schema()) {
				t.Errorf("the session's agent.text.format = %s %s, want json_schema and the format's schema", f.Type, f.Schema)
			}
			// The same format again on the session.
			if _, err := r.Run(t.Context(), "again", &core.RunOptions{Format: format, Thread: res.Thread}); err != nil {
				t.Errorf("a run on the session with its format: %v", err)
			}
			// Another format is refused, before anything is sent.
			other, err := core.NewFormat[struct {
				City string `json:"city"`
			}]("city", nil)
			if err != nil {
				t.Fatal(err)
			}
			n := len(h.srv.Requests())
			_, err = r.Run(t.Context(), "city?", &core.RunOptions{Format: other, Thread: res.Thread})
			if errcode.Of(err) != errcode.InvalidArgument {
				t.Errorf("another format on the session: %v, want InvalidArgument", err)
			}
			for _, q := range h.srv.Requests()[n:] {
				if q.Method != "GET" {
					t.Errorf("sent %s %s for a refused format", q.Method, q.Path)
				}
			}
			// No format: the session answers in its own.
			if res, err := r.Run(t.Context(), "plain?", &core.RunOptions{Thread: res.Thread}); err != nil || res.Text != "plain" {
				t.Errorf("a run without a format = %+v, %v", res, err)
			}
			var formats []string
			for _, rec := range h.srv.Received() {
				formats = append(formats, rec.Format)
			}
			if diff := cmp.Diff([]string{"json_schema", "json_schema", "json_schema"}, formats); diff != "" {
				t.Errorf("formats the fake received (-want +got):\n%s", diff)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return cmp.Equal(x, y)
}
