package foundry_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// city is the answer of TestFormat.
type city struct {
	Name     string `json:"name"`
	Nickname string `json:"nickname"`
}

// TestFormat (issue 31, item 9): a run's format goes into the agent
// version the backend makes (its definition's text.format), every request
// of the run names that version, and core.Decode reads the answer; a run
// without a format names the version without one; processes share the
// version of a format as any other; Close deletes them all. With an
// existing agent a format is refused before anything is sent.
func TestFormat(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			s := weatherScript()
			s.Turns[0].Steps[3].Text = `{"name":"{{output "getUserFavoriteCity"}}","nickname":"{{output "getCityNickname"}}"}`
			s.Turns = append(s.Turns, coretest.Turn{Steps: []coretest.Step{{Text: "plain text"}}})
			srv := newFake(t, s, nil)
			tools := toolbox(t, &counter{})
			b := open(t, tools, options(srv, mode, false))
			format, err := core.NewFormat[city]("city", &core.ToolOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			r := newRunner(b, tools, nil)
			res, err := r.Run(context.Background(), "weather?", &core.RunOptions{Format: format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := core.Decode[city](format, res)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(city{Name: "Seattle, WA", Nickname: "The Emerald City"}, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			// The version of the format: its definition carries it.
			versions := srv.AgentVersions("test-agent")
			if len(versions) != 2 {
				t.Fatalf("versions %v, want the one Open made and the format's", versions)
			}
			var def struct {
				Text struct {
					Format struct {
						Type   string          `json:"type"`
						Name   string          `json:"name"`
						Schema json.RawMessage `json:"schema"`
						Strict bool            `json:"strict"`
					} `json:"format"`
				} `json:"text"`
			}
			if err := json.Unmarshal(srv.AgentDefinition("test-agent", versions[1]), &def); err != nil {
				t.Fatal(err)
			}
			if f := def.Text.Format; f.Type != "json_schema" || f.Name != "city" || !f.Strict || string(f.Schema) != string(format.Schema()) {
				t.Errorf("the format version's text.format = %+v, want json_schema city, strict, the format's schema", f)
			}
			var refs []string
			for _, q := range srv.Requests() {
				if q.Op != "responses.create" {
					continue
				}
				var m struct {
					Ref struct {
						Version string `json:"version"`
					} `json:"agent_reference"`
					Text json.RawMessage `json:"text"`
				}
				json.Unmarshal(q.Body, &m)
				if m.Text != nil {
					t.Errorf("a request that names an agent sent text %s", m.Text)
				}
				refs = append(refs, m.Ref.Version)
			}
			if diff := cmp.Diff([]string{versions[1], versions[1], versions[1], versions[1]}, refs); diff != "" {
				t.Errorf("versions the requests named (-want +got):\n%s", diff)
			}
			for _, rec := range srv.Received() {
				if rec.Format != "city" {
					t.Errorf("the fake received a %s with format %q, want city", rec.Kind, rec.Format)
				}
			}
			// A second process uses the same versions.
			second := open(t, tools, options(srv, mode, false))
			if _, err := newRunner(second, tools, nil).Run(context.Background(), "weather?", &core.RunOptions{Format: format}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(versions, srv.AgentVersions("test-agent")); diff != "" {
				t.Errorf("versions after a second process ran with the format (-want +got):\n%s", diff)
			}
			// A run without a format names the version without one.
			res, err = r.Run(context.Background(), "again", &core.RunOptions{Thread: res.Thread})
			if err != nil || res.Text != "plain text" {
				t.Fatalf("a run without a format = %+v, %v", res, err)
			}
			reqs := srv.Requests()
			var last struct {
				Ref struct {
					Version string `json:"version"`
				} `json:"agent_reference"`
			}
			json.Unmarshal(reqs[len(reqs)-1].Body, &last)
			if last.Ref.Version != versions[0] {
				t.Errorf("a run without a format named version %q, want %q", last.Ref.Version, versions[0])
			}
			for _, b := range []*foundry.Backend{b, second} {
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if got := srv.Versions(); len(got) != 0 {
				t.Errorf("versions left after Close: %v", got)
			}
		})
	}
}

// TestFormatExistingAgent: an existing agent answers in its own
// definition's format; a run's format is refused (InvalidArgument) before
// anything is sent.
func TestFormatExistingAgent(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	srv.AddAgent("weather-bot", "gpt-4.1-mini")
	tools := toolbox(t, &counter{})
	o := options(srv, foundry.Conversation, false)
	o.Definition, o.Agent = nil, "weather-bot"
	b := open(t, tools, o)
	format, err := core.NewFormat[city]("city", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(srv.Requests())
	_, err = newRunner(b, tools, nil).Run(context.Background(), "weather?", &core.RunOptions{Format: format})
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("a format with an existing agent: %v, want InvalidArgument", err)
	}
	if got := srv.Requests()[n:]; len(got) != 0 {
		t.Errorf("%d requests sent for a refused format", len(got))
	}
}

// BenchmarkOffer measures what naming the agent version costs a request
// with a format: "memo" is the backend's way (the version recalled by the
// toolbox's version and the format), "digest" the baseline of finding it
// by the digest of the definition (a marshal and a SHA-256 per request).
func BenchmarkOffer(b *testing.B) {
	srv := foundrytest.NewServer(weatherScript(), nil)
	defer srv.Close()
	tools := toolbox(b, &counter{})
	fb, err := foundry.Open(context.Background(), tools, options(srv, foundry.Conversation, false))
	if err != nil {
		b.Fatal(err)
	}
	defer fb.Close()
	f, err := core.NewFormat[city]("city", nil)
	if err != nil {
		b.Fatal(err)
	}
	format := &driver.Format{Name: f.Name(), Schema: f.Schema(), Strict: f.Strict()}
	for _, bc := range []struct {
		name  string
		offer func(*foundry.Backend, *driver.Format) (map[string]any, error)
	}{{"memo", foundry.OfferForTest}, {"digest", foundry.DigestOfferForTest}} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := bc.offer(fb, format); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.offer(fb, format); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
