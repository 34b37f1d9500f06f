package coretest_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core/coretest"
)

const weatherScript = `{"turns": [{"expect": "What's the weather like in my favorite city?", "steps": [
  {"calls": [{"name": "getUserFavoriteCity"}]},
  {"calls": [{"name": "getCityNickname", "arguments": {"location": "{{output \"getUserFavoriteCity\"}}"}}]},
  {"calls": [{"name": "getCurrentWeatherAtLocation", "arguments": "{\"location\": {{output \"getUserFavoriteCity\" | json}}, \"unit\": \"f\"}", "as_string": true}]},
  {"text": "Your favorite city, {{output \"getUserFavoriteCity\"}}, is also known as {{output \"getCityNickname\"}}. The current weather there is {{output \"getCurrentWeatherAtLocation\"}}."}
]}]}`

func TestModelPlaysScript(t *testing.T) {
	s, err := coretest.ParseScript([]byte(weatherScript))
	if err != nil {
		t.Fatal(err)
	}
	m := s.NewModel()
	if err := m.Begin("What's the weather like in my favorite city?"); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"getUserFavoriteCity":         "Seattle, WA",
		"getCityNickname":             "The Emerald City",
		"getCurrentWeatherAtLocation": "70f",
	}
	var got []coretest.ActionCall
	var text string
	for {
		a, err := m.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Calls) == 0 {
			text = a.Text
			break
		}
		got = append(got, a.Calls...)
		var ds []coretest.Delivered
		for _, c := range a.Calls {
			ds = append(ds, coretest.Delivered{CallID: "x", Output: outputs[c.Name]})
		}
		if err := m.Deliver(ds); err != nil {
			t.Fatal(err)
		}
	}
	want := []coretest.ActionCall{
		{Name: "getUserFavoriteCity", Arguments: "{}"},
		{Name: "getCityNickname", Arguments: `{"location":"Seattle, WA"}`},
		{Name: "getCurrentWeatherAtLocation", Arguments: `{"location": "Seattle, WA", "unit": "f"}`, AsString: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if wantText := "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f."; text != wantText {
		t.Errorf("text = %q, want %q", text, wantText)
	}
	if err := m.Begin("again"); err == nil {
		t.Error("Begin after the last turn succeeded")
	}
}

func TestModelErrors(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		input   string
		wantErr string
	}{
		{"unexpected input", `{"turns":[{"expect":"hi","steps":[{"text":"x"}]}]}`, "hello", `expected input "hi", got "hello"`},
		{"deferred tool without search", `{"turns":[{"steps":[{"calls":[{"name":"lookup_item"}]}]}]}`, "go", "deferred and no tool search loaded it"},
		{"output of a tool not called", `{"turns":[{"steps":[{"text":"{{output \"nope\"}}"}]}]}`, "go", `no result of "nope" yet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := coretest.ParseScript([]byte(tt.script))
			if err != nil {
				t.Fatal(err)
			}
			m := s.NewModel()
			m.SetTools([]coretest.ToolInfo{{Name: "lookup_item", Description: "Look up a catalog item", Deferred: true}})
			err = m.Begin(tt.input)
			if err == nil {
				_, err = m.Next()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestModelToolSearch(t *testing.T) {
	s, err := coretest.ParseScript([]byte(`{"turns":[{"steps":[
		{"search":"catalog","calls":[{"name":"lookup_item","arguments":{"item_id":"A1"}}]},
		{"text":"{{result 0}}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := s.NewModel()
	m.SetTools([]coretest.ToolInfo{{Name: "lookup_item", Description: "Look up a catalog item", Deferred: true}, {Name: "other", Deferred: true}})
	if err := m.Begin("go"); err != nil {
		t.Fatal(err)
	}
	a, err := m.Next()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"lookup_item"}, a.Loaded); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	if err := m.Deliver([]coretest.Delivered{{Failed: true, Error: "no such item"}}); err != nil {
		t.Fatal(err)
	}
	if a, _ := m.Next(); a.Text != "no such item" {
		t.Errorf("text = %q, want the failure message", a.Text)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct{ script, wantErr string }{
		{`{"turns":[{"steps":[]}]}`, "has no steps"},
		{`{"turns":[{"steps":[{"calls":[{"name":"a"}],"text":"b"}]}]}`, "either calls or answers"},
		{`{"turns":[{"steps":[{"calls":[{}]}]}]}`, "no name"},
		{`{"turns":[{"steps":[{"text":"{{output"}]}]}`, "text"},
		{`{"turns":[{"stepz":[]}]}`, "unknown field"},
	}
	for _, tt := range tests {
		if _, err := coretest.ParseScript([]byte(tt.script)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseScript(%s) error = %v, want %q", tt.script, err, tt.wantErr)
		}
	}
}
