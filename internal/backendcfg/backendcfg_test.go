package backendcfg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/backendcfg"
)

type options struct{ instructions string }

var errRefused = errors.New("refused")

// opened are the options the test backends were opened with, by name.
var opened = map[string]*options{}

func init() {
	open := func(name string) func(context.Context, *core.Toolbox, *options) (*coretest.Backend, error) {
		return func(_ context.Context, tools *core.Toolbox, o *options) (*coretest.Backend, error) {
			if tools == nil {
				return nil, errors.New("no tools")
			}
			opened[name] = o
			return coretest.NewBackend(nil, nil), nil
		}
	}
	backendcfg.Register("backendcfg-ok", func(req *adapter.OpenRequest) (*options, error) {
		return &options{instructions: req.Settings.Instructions}, nil
	}, open("backendcfg-ok"))
	backendcfg.Register("backendcfg-refused", func(*adapter.OpenRequest) (*options, error) {
		return nil, errRefused
	}, open("backendcfg-refused"))
}

func TestRegister(t *testing.T) {
	t.Setenv(adapter.SettingsFileEnv, "")
	r, err := adapter.Open(t.Context(), nil, &adapter.Options{Settings: adapter.Settings{Backend: "backendcfg-ok", Instructions: "be brief"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if o := opened["backendcfg-ok"]; o == nil || o.instructions != "be brief" {
		t.Errorf("opened with %+v, want the instructions of the settings", o)
	}
	if _, err := adapter.Open(t.Context(), nil, &adapter.Options{Settings: adapter.Settings{Backend: "backendcfg-refused"}}); !errors.Is(err, errRefused) {
		t.Errorf("Open with options refused: %v, want the refusal", err)
	}
	if o, ok := opened["backendcfg-refused"]; ok {
		t.Errorf("opened with %+v after the options were refused", o)
	}
}

func TestLimits(t *testing.T) {
	s := &adapter.Settings{MaxResponseBytes: 1, MaxEventBytes: -1, IdleTimeout: adapter.Duration(time.Second), MaxSilence: adapter.Duration(-time.Minute)}
	resp, event, idle, silence := backendcfg.Limits(s)
	if resp != 1 || event != -1 || idle != time.Second || silence != -time.Minute {
		t.Errorf("Limits = %d, %d, %v, %v; want 1, -1, 1s, -1m0s", resp, event, idle, silence)
	}
}
