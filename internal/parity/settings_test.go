package parity_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/responses"
)

// shared is what the shared settings give a backend's options.
type shared struct {
	Instructions                    string
	MaxResponseBytes, MaxEventBytes int
	IdleTimeout, MaxSilence         time.Duration
}

// clearBackendEnv empties the variables the backends and the adapter
// read, so that only what a test sets is in effect.
func clearBackendEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TOOLRELAY_") && k != "TOOLRELAY_TEST_POSTGRES" || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "AZURE_") || k == "FOUNDRY_PROJECT_ENDPOINT" || k == "AGENT_TOKEN" {
			t.Setenv(k, "")
		}
	}
}

// TestSharedSettings sets every shared setting a backend takes (the
// instructions, and the service's limits: response and event size, idle
// time, silence) and checks that each reaches the options of every
// backend (OptionsFor of openai, foundry and responses), and, on the
// fakes (fake-openai, fake-foundry, fake-responses, which open the same
// backends), that each limit takes effect and the instructions reach the
// service.
func TestSharedSettings(t *testing.T) {
	clearBackendEnv(t)
	s := &adapter.Settings{Instructions: "Answer in one word.", MaxResponseBytes: 101, MaxEventBytes: 102,
		IdleTimeout: adapter.Duration(103 * time.Second), MaxSilence: adapter.Duration(104 * time.Second)}
	want := shared{"Answer in one word.", 101, 102, 103 * time.Second, 104 * time.Second}
	req := &adapter.OpenRequest{Settings: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		name string
		get  func() (shared, error)
	}{
		{"openai", func() (shared, error) {
			o, err := openai.OptionsFor(req)
			if err != nil {
				return shared{}, err
			}
			return shared{o.Instructions, o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence}, nil
		}},
		{"foundry", func() (shared, error) {
			o, err := foundry.OptionsFor(req)
			if err != nil {
				return shared{}, err
			}
			var instr string
			if o.Definition != nil {
				instr = o.Definition.Instructions
			}
			return shared{instr, o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence}, nil
		}},
		{"responses", func() (shared, error) {
			o, err := responses.OptionsFor(req)
			if err != nil {
				return shared{}, err
			}
			return shared{o.Instructions, o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.get()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("OptionsFor: the shared settings in the options (-want +got):\n%s", diff)
			}
		})
	}

	// On the fakes: each limit, set low, fails the run (or the open)
	// with its code; the instructions reach the service.
	limits := []struct {
		name     string
		settings adapter.Settings
		stream   bool
		code     errcode.Code
	}{
		{"max_response_bytes", adapter.Settings{MaxResponseBytes: 100}, false, errcode.ResourceExhausted},
		{"max_event_bytes", adapter.Settings{MaxEventBytes: 10}, true, errcode.ResourceExhausted},
		{"idle_timeout", adapter.Settings{IdleTimeout: adapter.Duration(time.Nanosecond)}, false, errcode.DeadlineExceeded},
		// The script pauses 300 ms before each piece of its answer.
		{"max_silence", adapter.Settings{MaxSilence: adapter.Duration(50 * time.Millisecond)}, true, errcode.DeadlineExceeded},
	}
	t.Run("fakes", func(t *testing.T) {
		for _, fake := range []string{"fake-openai", "fake-foundry", "fake-responses"} {
			for _, l := range limits {
				t.Run(fake+"/"+l.name, func(t *testing.T) {
					t.Parallel()
					s := l.settings
					s.Backend = fake
					_, err := runFake(t, s, l.stream)
					if errcode.Of(err) != l.code {
						t.Errorf("Run with %s = %v, want an error of code %v", l.name, err, l.code)
					}
				})
			}
			t.Run(fake+"/instructions", func(t *testing.T) {
				t.Parallel()
				bodies, err := runFake(t, adapter.Settings{Backend: fake, Instructions: "Answer in one word."}, false)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(bodies, `"Answer in one word."`) {
					t.Errorf("no request to the fake holds the instructions:\n%s", bodies)
				}
			})
		}
	})
}

// runFake runs one turn on a fake with settings s, its answer streamed
// if stream (as openai's always is; the openai backend then resumes no
// stream that went silent), and returns the bodies of the requests the
// fake received, and the open's or the run's error.
func runFake(t *testing.T, s adapter.Settings, stream bool) (string, error) {
	t.Helper()
	tool, err := core.NewTool("get_weather", "Gets the weather.", func(context.Context, struct{}) (string, error) { return "sunny", nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	script := coretest.Simple("get_weather", `{}`, `It is {{output "get_weather"}}.`)
	if s.MaxSilence > 0 {
		script.DeltaSize, script.DeltaPauseMS = 3, 300
	}
	backend := []any{coretest.FakeSettings{Script: script}}
	if stream {
		backend = append(backend, foundry.Settings{Delivery: "streaming"}, responses.Settings{Delivery: "streaming"}, openai.Settings{MaxReconnects: -1})
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := adapter.Open(t.Context(), tools, &adapter.Options{
		Settings:        s,
		BackendSettings: backend,
		Runner:          core.Options{Logger: quiet},
	})
	if err != nil {
		return "", err
	}
	defer r.Close()
	_, err = r.Run(t.Context(), "What is the weather?", nil)
	var bodies strings.Builder
	switch b := r.Backend().(type) {
	case interface{ Server() *openaitest.Server }:
		for _, req := range b.Server().Requests() {
			bodies.Write(req.Body)
			bodies.WriteByte('\n')
		}
	case interface{ Server() *foundrytest.Server }:
		for _, req := range b.Server().Requests() {
			bodies.Write(req.Body)
			bodies.WriteByte('\n')
		}
	default:
		t.Fatalf("backend %T does not give its fake", b)
	}
	return bodies.String(), err
}
