package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // postgres: journals
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite: journals
)

func writeConfig(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toolrelay.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadPrecedence checks that code wins over the environment, which
// wins over the file, both ways: each pair of places sets a setting that
// the other does too (a planted bug that lets the environment override
// code, or the file the environment, fails it), and a setting made in one
// place only is kept; a price table is one setting, taken whole from the
// place that wins (code's replaces the environment's and the file's).
func TestLoadPrecedence(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, writeConfig(t, map[string]any{
		"backend": "from-file", "instructions": "from-file", "max_steps": 3, "concurrency": 2, "max_output_bytes": 300,
		"test":   map[string]any{"region": "file", "zone": "file"},
		"prices": map[string]any{"a": map[string]any{"input": 1, "output": 1}, "b": map[string]any{"input": 1, "output": 1}, "c": map[string]any{"input": 1, "output": 1}},
	}))
	t.Setenv("TOOLRELAY_BACKEND", "from-env")         // file, env, code: code
	t.Setenv("TOOLRELAY_INSTRUCTIONS", "from-env")    // file, env: env
	t.Setenv("TOOLRELAY_TOOL_TIMEOUT", "7s")          // env, code: code
	t.Setenv("TOOLRELAY_RUN_TIMEOUT", "9m")           // env only
	t.Setenv("TOOLRELAY_CONCURRENCY", "")             // empty: not set
	t.Setenv("TOOLRELAY_MAX_ARGUMENT_BYTES", "70000") // env only
	// A price table: file, env, code: code's, whole.
	t.Setenv("TOOLRELAY_PRICES", `{"b": {"input": 2, "output": 2}, "c": {"input": 2, "output": 2}}`)
	got, err := adapter.Load(&adapter.Settings{
		Backend: "from-code", MaxSteps: 5, ToolTimeout: adapter.Duration(time.Second), TruncateOutput: true,
		Prices: adapter.Prices{"c": {Input: 3, Output: 3}, "d": {Input: 3, Output: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &adapter.Settings{
		Backend:          "from-code",                       // code over env and file
		Instructions:     "from-env",                        // env over file
		MaxSteps:         5,                                 // code over file
		ToolTimeout:      adapter.Duration(time.Second),     // code over env
		RunTimeout:       adapter.Duration(9 * time.Minute), // env alone
		Concurrency:      2,                                 // file alone (the env var is empty)
		MaxOutputBytes:   300,                               // file alone
		MaxArgumentBytes: 70000,                             // env alone
		TruncateOutput:   true,                              // code alone

		// A price table: code's over the environment's and the file's, whole.
		Prices: adapter.Prices{"c": {Input: 3, Output: 3}, "d": {Input: 3, Output: 3}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

// testSettings are the settings of the test backends, in section "test".
type testSettings struct {
	Region   string           `json:"region,omitempty" env:"TOOLRELAY_TEST_REGION"`
	Zone     string           `json:"zone,omitempty" env:"TOOLRELAY_TEST_ZONE"`
	Interval adapter.Duration `json:"interval,omitempty" env:"TOOLRELAY_TEST_INTERVAL"`
	Retries  int              `json:"retries,omitempty" env:"TOOLRELAY_TEST_RETRIES" min:"none"`
	Workers  int              `json:"workers,omitempty" env:"TOOLRELAY_TEST_WORKERS" min:"2"`
}

// TestSettingsPrecedence checks that a backend's settings come from its
// section of the file, overlaid by the environment, overlaid by a value of
// its settings type in code, both ways: each pair of places sets a setting
// the other does too.
func TestSettingsPrecedence(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, writeConfig(t, map[string]any{
		"backend": "test-script",
		"test":    map[string]any{"region": "file", "zone": "file", "interval": "2s", "workers": 3},
		"other":   map[string]any{"anything": true}, // another backend's section: not read
	}))
	t.Setenv("TOOLRELAY_TEST_ZONE", "env")    // file, env, code: code
	t.Setenv("TOOLRELAY_TEST_INTERVAL", "3s") // file, env: env
	t.Setenv("TOOLRELAY_TEST_RETRIES", "-1")  // env, code: code
	req, err := adapter.NewRequest(nil, &adapter.Options{BackendSettings: []any{"unrelated",
		&testSettings{Zone: "code", Retries: 4, Workers: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var got testSettings
	if err := req.BackendSettings("test", &got); err != nil {
		t.Fatal(err)
	}
	want := testSettings{
		Region:   "file",                            // file alone
		Zone:     "code",                            // code over env and file
		Interval: adapter.Duration(3 * time.Second), // env over file
		Retries:  4,                                 // code over env
		Workers:  5,                                 // code over file
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
}

// TestSettingsErrors checks that a backend's settings that do not decode,
// parse or fall in range fail with InvalidArgument, naming the key or
// variable and never the value.
func TestSettingsErrors(t *testing.T) {
	const secret = "SECRET-77ab"
	tests := []struct {
		name    string
		file    map[string]any
		env     map[string]string
		wantErr string
	}{
		{"unknown key in the section", map[string]any{"test": map[string]any{"regoin": secret}}, nil, `test: json: unknown field "regoin"`},
		{"wrong type in the section", map[string]any{"test": map[string]any{"region": 5}}, nil, "test: json: cannot unmarshal number"},
		{"bad duration in the section", map[string]any{"test": map[string]any{"interval": secret}}, nil, "test: interval: not a Go duration"},
		{"bad duration in the environment", nil, map[string]string{"TOOLRELAY_TEST_INTERVAL": secret}, "TOOLRELAY_TEST_INTERVAL: not a Go duration"},
		{"negative duration", nil, map[string]string{"TOOLRELAY_TEST_INTERVAL": "-1s"}, "test.interval (TOOLRELAY_TEST_INTERVAL): -1s is negative"},
		{"under the minimum", map[string]any{"test": map[string]any{"workers": 1}}, nil, "test.workers (TOOLRELAY_TEST_WORKERS): 1 is under the minimum, 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(adapter.SettingsFileEnv, "")
			if tt.file != nil {
				t.Setenv(adapter.SettingsFileEnv, writeConfig(t, tt.file))
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			req, err := adapter.NewRequest(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var s testSettings
			err = req.BackendSettings("test", &s)
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Settings error = %v, want InvalidArgument saying %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Settings error repeats a value: %v", err)
			}
		})
	}
}

// TestLoadErrors checks that a configuration that cannot be read, decoded
// or parsed, or that holds a value out of range, fails with
// InvalidArgument, naming the variable or key, and that no error repeats a
// value, whatever variable it was set in: secrets are planted in every
// credential setting, and in settings where they do not belong.
func TestLoadErrors(t *testing.T) {
	const secret = "SECRET-4f1d"
	credentials := map[string]string{
		"OPENAI_API_KEY": secret + "-openai", "AGENT_TOKEN": secret + "-token", "TOOLRELAY_FOUNDRY_API_KEY": secret + "-foundry",
		"TOOLRELAY_JOURNAL": "postgres://u:" + secret + "@127.0.0.1:5432/db",
	}
	file := func(doc string) map[string]string {
		path := filepath.Join(t.TempDir(), "toolrelay.json")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return map[string]string{adapter.SettingsFileEnv: path}
	}
	tests := []struct {
		name    string
		env     map[string]string
		code    *adapter.Settings
		wantErr string
	}{
		{"missing file", map[string]string{adapter.SettingsFileEnv: "/nonexistent/toolrelay.json"}, nil, "config file /nonexistent/toolrelay.json"},
		{"unknown key", file(`{"backnd":"x"}`), nil, `unknown setting "backnd"`},
		{"trailing data", file(`{"backend":"x"} {}`), nil, "not valid JSON"},
		{"bad JSON", file(`{"openai":{"api_key":` + secret + `}}`), nil, "not valid JSON at byte 22"},
		{"cut JSON", file(`{"openai":{"api_key":"` + secret + `"`), nil, "unexpected end of JSON input"},
		{"wrong type in the file", file(`{"max_steps":"tenfold"}`), nil, "max_steps"},
		{"bad duration in the file", file(`{"run_timeout":"` + secret + `"}`), nil, "run_timeout: not a Go duration"},
		{"negative number in the file", file(`{"max_output_bytes":-1}`), nil, "max_output_bytes (TOOLRELAY_MAX_OUTPUT_BYTES): -1 is negative"},
		{"bad number", map[string]string{"TOOLRELAY_MAX_STEPS": "tenfold"}, nil, "TOOLRELAY_MAX_STEPS: not an integer"},
		{"secret in a number", map[string]string{"TOOLRELAY_CONCURRENCY": secret}, nil, "TOOLRELAY_CONCURRENCY: not an integer"},
		{"number out of range", map[string]string{"TOOLRELAY_MAX_OUTPUT_BYTES": "99999999999999999999"}, nil, "TOOLRELAY_MAX_OUTPUT_BYTES: out of range"},
		{"secret in a flag", map[string]string{"TOOLRELAY_TRUNCATE_OUTPUT": secret}, nil, "TOOLRELAY_TRUNCATE_OUTPUT: not true or false"},
		{"bad duration", map[string]string{"TOOLRELAY_TOOL_TIMEOUT": "5 parsecs"}, nil, "TOOLRELAY_TOOL_TIMEOUT: not a Go duration"},
		{"secret in a duration", map[string]string{"TOOLRELAY_RUN_TIMEOUT": secret}, nil, "TOOLRELAY_RUN_TIMEOUT: not a Go duration"},
		{"negative concurrency", map[string]string{"TOOLRELAY_CONCURRENCY": "-3"}, nil, "concurrency (TOOLRELAY_CONCURRENCY): -3 is negative"},
		{"negative step limit", map[string]string{"TOOLRELAY_MAX_STEPS": "-1"}, nil, "max_steps (TOOLRELAY_MAX_STEPS): -1 is negative"},
		{"negative argument limit", map[string]string{"TOOLRELAY_MAX_ARGUMENT_BYTES": "-5"}, nil, "max_argument_bytes (TOOLRELAY_MAX_ARGUMENT_BYTES): -5 is negative"},
		{"negative tool timeout", map[string]string{"TOOLRELAY_TOOL_TIMEOUT": "-5s"}, nil, "tool_timeout (TOOLRELAY_TOOL_TIMEOUT): -5s is negative"},
		{"negative run timeout", map[string]string{"TOOLRELAY_RUN_TIMEOUT": "-1m"}, nil, "run_timeout (TOOLRELAY_RUN_TIMEOUT): -1m0s is negative"},
		{"negative lease", map[string]string{"TOOLRELAY_JOURNAL_LEASE": "-1s"}, nil, "journal_lease (TOOLRELAY_JOURNAL_LEASE): -1s is under the minimum, 1s"},
		{"lease too short", map[string]string{"TOOLRELAY_JOURNAL_LEASE": "10ms"}, nil, "journal_lease (TOOLRELAY_JOURNAL_LEASE): 10ms is under the minimum, 1s"},
		{"negative retention", map[string]string{"TOOLRELAY_JOURNAL_RETENTION": "-720h"}, nil, "journal_retention (TOOLRELAY_JOURNAL_RETENTION): -720h0m0s is negative"},
		{"retention shorter than a run", map[string]string{"TOOLRELAY_JOURNAL_RETENTION": "10m"}, nil, "journal_retention (TOOLRELAY_JOURNAL_RETENTION): 10m0s is shorter than the run time limit (30m0s)"},
		{"retention shorter than the configured run", map[string]string{"TOOLRELAY_JOURNAL_RETENTION": "1h", "TOOLRELAY_RUN_TIMEOUT": "2h"}, nil, "1h0m0s is shorter than the run time limit (2h0m0s)"},
		{"negative value in code", nil, &adapter.Settings{MaxSteps: -2}, "max_steps (TOOLRELAY_MAX_STEPS): -2 is negative"},
		{"negative tool call budget", map[string]string{"TOOLRELAY_MAX_TOOL_CALLS": "-1"}, nil, "max_tool_calls (TOOLRELAY_MAX_TOOL_CALLS): -1 is negative"},
		{"bad cost", map[string]string{"TOOLRELAY_MAX_COST": secret}, nil, "TOOLRELAY_MAX_COST: not a number"},
		{"infinite cost", map[string]string{"TOOLRELAY_MAX_COST": "+Inf"}, nil, "TOOLRELAY_MAX_COST: not a number"},
		{"cost not a number", map[string]string{"TOOLRELAY_MAX_COST": "NaN"}, nil, "TOOLRELAY_MAX_COST: not a number"},
		{"negative cost", map[string]string{"TOOLRELAY_MAX_COST": "-0.5"}, nil, "max_cost (TOOLRELAY_MAX_COST): -0.5 is negative"},
		{"bad prices", map[string]string{"TOOLRELAY_PRICES": `{"gpt":` + secret + `}`}, nil, "TOOLRELAY_PRICES: not a JSON object of prices"},
		{"negative price in the file", file(`{"prices":{"gpt":{"input":-1,"output":2}}}`), nil, `prices (TOOLRELAY_PRICES): the price of "gpt" is -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range credentials {
				t.Setenv(k, v)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := adapter.Load(tt.code)
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load error = %v, want InvalidArgument saying %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "tenfold") || strings.Contains(err.Error(), "parsecs") {
				t.Errorf("Load error repeats a value: %v", err)
			}
			if _, err := adapter.Open(t.Context(), nil, &adapter.Options{Settings: derefConfig(tt.code), DefaultBackend: "test-script"}); errcode.Of(err) != errcode.InvalidArgument {
				t.Errorf("Open error = %v, want InvalidArgument", err)
			}
		})
	}
}

func derefConfig(c *adapter.Settings) adapter.Settings {
	if c == nil {
		return adapter.Settings{}
	}
	return *c
}

// TestLoadAcceptsRanges checks the edges of the ranges Load accepts: zero
// for the defaults, the floors themselves, and the negative values a
// setting documents.
func TestLoadAcceptsRanges(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, "")
	env := map[string]string{
		"TOOLRELAY_CONCURRENCY": "0", "TOOLRELAY_MAX_STEPS": "1", "TOOLRELAY_JOURNAL_LEASE": "1s",
		"TOOLRELAY_JOURNAL_RETENTION":  "30m",
		"TOOLRELAY_MAX_ARGUMENT_BYTES": "1", "TOOLRELAY_MAX_OUTPUT_BYTES": "1", "TOOLRELAY_TRUNCATE_OUTPUT": "true",
		"TOOLRELAY_RUN_TIMEOUT": "1ns", "TOOLRELAY_TOOL_TIMEOUT": "0s",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	got, err := adapter.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := adapter.Settings{
		MaxSteps: 1, JournalLease: adapter.Duration(time.Second), JournalRetention: adapter.Duration(30 * time.Minute),
		MaxArgumentBytes: 1, MaxOutputBytes: 1, TruncateOutput: true, RunTimeout: 1,
	}
	if diff := cmp.Diff(&want, got, cmpopts.IgnoreFields(adapter.Settings{}, "Journal", "Backend", "Instructions")); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

var registerOnce = func() bool {
	adapter.Register("test-script", func(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
		var fs coretest.FakeSettings
		if err := req.BackendSettings("fake", &fs); err != nil {
			return nil, err
		}
		script, err := fs.Load("test-script")
		if err != nil {
			return nil, err
		}
		return coretest.NewBackend(script, &coretest.BackendOptions{Tools: req.Tools}), nil
	})
	return true
}()

func TestOpenByName(t *testing.T) {
	tool, err := core.NewTool("get_horoscope", "", func(_ context.Context, in struct {
		Sign string `json:"sign"`
	}) (string, error) {
		return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := core.NewToolbox(tool)
	script := coretest.Simple("get_horoscope", `{"sign":"Aquarius"}`, `{{output "get_horoscope"}}`)

	t.Setenv("TOOLRELAY_BACKEND", "test-script")
	t.Setenv("TOOLRELAY_MAX_STEPS", "1")
	r, err := adapter.Open(t.Context(), tb, &adapter.Options{DefaultBackend: "does-not-matter", BackendSettings: []any{coretest.FakeSettings{Script: script}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Run(t.Context(), "What is my horoscope? I am an Aquarius.", nil)
	if err != nil || res.Text != "Aquarius: Next Tuesday you will befriend a baby otter." {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Setenv("TOOLRELAY_BACKEND", "")
	_, err := adapter.Open(t.Context(), nil, nil)
	if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "no backend configured") {
		t.Errorf("Open with no backend: %v", err)
	}
	_, err = adapter.Open(t.Context(), nil, &adapter.Options{Settings: adapter.Settings{Backend: "opneai"}})
	if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), `unknown backend "opneai" (registered: `) || !strings.Contains(err.Error(), "test-script") {
		t.Errorf("Open of an unknown backend: %v", err)
	}
	for name, pkg := range map[string]string{"openai": "github.com/toolrelay/toolrelay/openai", "fake-foundry": "github.com/toolrelay/toolrelay/foundry/foundrytest"} {
		_, err = adapter.Open(t.Context(), nil, &adapter.Options{Settings: adapter.Settings{Backend: name}})
		if !errors.Is(err, errcode.Unimplemented) || !strings.Contains(err.Error(), "not linked into this program: import _ \""+pkg+"\"") {
			t.Errorf("Open of %s, not linked: %v", name, err)
		}
	}
}

func TestRegisterPanics(t *testing.T) {
	open := func(context.Context, *adapter.OpenRequest) (driver.Backend, error) { return nil, nil }
	for _, name := range []string{"test-script", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			adapter.Register(name, open)
		}()
	}
}

// TestOpenAppliesLimits checks that the limit settings reach the runner
// Open returns.
func TestOpenAppliesLimits(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args string
		want string // what the model read of the call
	}{
		{"output limit", map[string]string{"TOOLRELAY_MAX_OUTPUT_BYTES": "100"}, `{"n":200}`, "output too large (200 bytes; the limit is 100)"},
		{"truncated output", map[string]string{"TOOLRELAY_MAX_OUTPUT_BYTES": "100", "TOOLRELAY_TRUNCATE_OUTPUT": "true"}, `{"n":200}`,
			strings.Repeat("x", 45) + "\n[output truncated: it was 200 bytes; the limit is 100]"},
		{"argument limit", map[string]string{"TOOLRELAY_MAX_ARGUMENT_BYTES": "8"}, `{"n":200}`, "arguments too large (9 bytes; the limit is 8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(adapter.SettingsFileEnv, "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tool, err := core.NewTool("repeat", "", func(_ context.Context, in struct {
				N int `json:"n"`
			}) (string, error) {
				return strings.Repeat("x", in.N), nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			tb, _ := core.NewToolbox(tool)
			r, err := adapter.Open(t.Context(), tb, &adapter.Options{DefaultBackend: "test-script", BackendSettings: []any{coretest.FakeSettings{Script: coretest.Simple("repeat", tt.args, "{{result 0}}")}}, Runner: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := r.Run(t.Context(), "go", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tt.want {
				t.Errorf("the model read %q, want %q", res.Text, tt.want)
			}
		})
	}
}

// TestOpenAppliesRunTimeout checks that TOOLRELAY_RUN_TIMEOUT bounds the
// runs of the runner Open returns.
func TestOpenAppliesRunTimeout(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, "")
	t.Setenv("TOOLRELAY_RUN_TIMEOUT", "90s")
	synctest.Test(t, func(t *testing.T) {
		tool, err := core.NewTool("wait", "", func(ctx context.Context, _ struct{}) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tb, _ := core.NewToolbox(tool)
		r, err := adapter.Open(t.Context(), tb, &adapter.Options{DefaultBackend: "test-script", BackendSettings: []any{coretest.FakeSettings{Script: coretest.Simple("wait", `{}`, "never")}}, Runner: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		start := time.Now()
		_, err = r.Run(t.Context(), "go", nil)
		if errcode.Of(err) != errcode.DeadlineExceeded || time.Since(start) != 90*time.Second {
			t.Errorf("Run = %v after %v, want DeadlineExceeded after 90s", err, time.Since(start))
		}
	})
}

// quiet returns runner options whose logger discards everything.
func quiet() core.Options {
	return core.Options{Logger: slog.New(slog.DiscardHandler)}
}

// TestBudgetSettings (issue 37, item 1): the budget's settings come from
// the file and the environment like the others (code over environment
// over file), and the runner Open makes stops a run on them: with one
// tool call allowed, the script's second step's call does not run.
func TestBudgetSettings(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, writeConfig(t, map[string]any{
		"max_tool_calls": 3, "max_input_tokens": 1000, "prices": map[string]any{"gpt-test": map[string]any{"input": 1.25, "output": 10}},
	}))
	t.Setenv("TOOLRELAY_MAX_TOOL_CALLS", "2")         // file, env, code: code
	t.Setenv("TOOLRELAY_MAX_TOTAL_TOKENS", "5000")    // env alone
	t.Setenv("TOOLRELAY_MAX_OUTPUT_TOKENS", "")       // empty: not set
	t.Setenv("TOOLRELAY_MAX_COST", "0.25")            // env alone
	t.Setenv("TOOLRELAY_PRICES", `{"*":{"input":2}}`) // env over file
	got, err := adapter.Load(&adapter.Settings{MaxToolCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := adapter.Settings{MaxToolCalls: 1, MaxInputTokens: 1000, MaxTotalTokens: 5000, MaxCost: 0.25,
		Prices: adapter.Prices{"*": {Input: 2}}}
	if diff := cmp.Diff(&want, got, cmpopts.IgnoreFields(adapter.Settings{}, "Journal", "Backend", "Instructions")); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}

	var runs atomic.Int64
	tool, err := core.NewTool("lookup", "", func(context.Context, struct{}) (string, error) {
		runs.Add(1)
		return "found", nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := core.NewToolbox(tool)
	step := coretest.Step{Calls: []coretest.Call{{Name: "lookup", Arguments: []byte(`{}`)}}}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, step, {Text: "done"}}}}}
	r, err := adapter.Open(t.Context(), tb, &adapter.Options{Settings: adapter.Settings{Backend: "test-script", MaxToolCalls: 1},
		BackendSettings: []any{coretest.FakeSettings{Script: script}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Run(t.Context(), "look it up twice", nil)
	if !errors.Is(err, core.ErrBudgetExceeded) || runs.Load() != 1 {
		t.Errorf("Run = %v after %d calls; want ErrBudgetExceeded after 1", err, runs.Load())
	}
}

// TestBudgetRefusedAtOpen (issue 46, item 2): a budget set in code that
// no runner may take (core.Budget.Check) is refused by Open, with
// InvalidArgument naming it, as the same values in the settings are;
// before, negative prices in Options.Runner.Budget were taken, and under
// a cost limit of 0.01 every step ran.
func TestBudgetRefusedAtOpen(t *testing.T) {
	neg := map[string]core.Price{"*": {Input: -1000, Output: -1000}}
	tests := []struct {
		name string
		opts adapter.Options
		says string
	}{
		{"negative prices", adapter.Options{Runner: core.Options{Budget: core.Budget{MaxCost: 0.01, Prices: neg}}}, `Options.Runner.Budget: core: budget: the price of "*" is -1000`},
		{"NaN price", adapter.Options{Runner: core.Options{Budget: core.Budget{Prices: map[string]core.Price{"m": {Output: math.NaN()}}}}}, `the price of "m" is NaN`},
		{"negative limit", adapter.Options{Runner: core.Options{Budget: core.Budget{MaxToolCalls: -3}}}, "MaxToolCalls is -3"},
		{"NaN cost limit", adapter.Options{Runner: core.Options{Budget: core.Budget{MaxCost: math.NaN()}}}, "MaxCost is NaN"},
		{"NaN cost setting in code", adapter.Options{Settings: adapter.Settings{MaxCost: math.NaN()}}, "max_cost (TOOLRELAY_MAX_COST): NaN is not a finite number"},
		{"negative price setting in code", adapter.Options{Settings: adapter.Settings{Prices: adapter.Prices(neg)}}, `prices (TOOLRELAY_PRICES): the price of "*" is -1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Settings.Backend = "test-script"
			o.BackendSettings = []any{coretest.FakeSettings{Script: coretest.Simple("lookup", `{}`, "done")}}
			r, err := adapter.Open(t.Context(), nil, &o)
			if err == nil {
				r.Close()
			}
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Open = %v, want InvalidArgument saying %q", err, tt.says)
			}
		})
	}
}
