package realtest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/temporal"
)

// dieExit is the exit code of a worker that TestDieAfterEffect makes die.
const dieExit = 3

// TestDieAfterEffect: the worker running the weather call (not
// idempotent, no Verify hook) dies right after the call took effect,
// before its result is returned; another worker goes on. In both modes the
// effect happens once and the call is reported in doubt: an activity's
// second attempt, and a local activity run again whose claim the history
// holds (LoopOptions.LocalActivities), are decided alike.
func TestDieAfterEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := openaitest.NewServer(weatherScript, nil)
			t.Cleanup(srv.Close)
			dir := t.TempDir()
			queue := newQueue(t)
			env := map[string]string{queueEnv: queue, fakeEnv: srv.URL, effectsEnv: filepath.Join(dir, "effects.log"), argEnv: "exit-after-effect " + filepath.Join(dir, "died")}
			if m.local {
				env[localEnv] = "1"
			}
			first := spawn(t, "worker", env)
			c := dial(t)
			r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, WorkflowTaskTimeout: time.Second,
				Loop: localSettings(temporal.LoopOptions{Heartbeat: time.Second, Idle: time.Minute}, m.local)})
			type outcome struct {
				res *core.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := r.Run(t.Context(), "what's the weather like in my favorite city?", nil)
				done <- outcome{res, err}
			}()
			if code := exitCode(first.Wait()); code != dieExit {
				t.Fatalf("the first worker exited with %d, want %d (it dies after the effect)", code, dieExit)
			}
			second := spawn(t, "worker", env)
			t.Cleanup(func() { second.Process.Kill(); second.Wait() })
			o := <-done
			if o.err != nil {
				t.Fatal(o.err)
			}
			if !strings.Contains(o.res.Text, "unknown: it may or may not have taken effect") {
				t.Errorf("answered %q, want the weather call's outcome unknown", o.res.Text)
			}
			if n := len(o.res.Calls); n == 0 || o.res.Calls[n-1].Outcome != core.InDoubt {
				t.Errorf("the weather call's outcome is not in doubt: %+v", o.res.Calls)
			}
			if effects := lines(t, env[effectsEnv]); len(effects) != 1 {
				t.Errorf("the weather call took effect %d times (%q), want once", len(effects), effects)
			}
		})
	}
}
