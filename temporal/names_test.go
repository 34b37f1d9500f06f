package temporal

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
)

// TestResultNames: a turn's result names the thread as this runner knows
// it (the workflow id, for Resume, Decide and the next turn) and the
// service's turn, as core's Runner's Result does with its own thread.
func TestResultNames(t *testing.T) {
	res, err := result("wf-1", &turnResult{Done: true, Thread: "svc_thread", ServiceTurn: "turn_7", Turn: 3, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&core.Result{Text: "hi", Thread: "wf-1", Turn: "turn_7"}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// TestLoopOptions: Options.Loop are the loop's options of the threads a
// runner starts; the deprecated Settings apply only when Loop is zero.
func TestLoopOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want LoopOptions
	}{
		{"loop", Options{Loop: LoopOptions{MaxSteps: 3}}, LoopOptions{MaxSteps: 3}},
		{"deprecated settings", Options{Settings: Settings{Idle: time.Second}}, LoopOptions{Idle: time.Second}},
		{"loop wins", Options{Loop: LoopOptions{MaxSteps: 3}, Settings: Settings{Idle: time.Second}}, LoopOptions{MaxSteps: 3}},
		{"none", Options{}, LoopOptions{}},
	} {
		if diff := cmp.Diff(c.want, c.opts.loop()); diff != "" {
			t.Errorf("%s: loop options (-want +got):\n%s", c.name, diff)
		}
	}
}
