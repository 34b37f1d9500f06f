package realtest

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/temporal"
)

// TestRunHookOnReplay: a worker without a workflow cache replays each
// thread's history at every workflow task, yet its Run hook begins each
// run once and ends it once, with the answer, as core's runner calls it.
func TestRunHookOnReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a worker process")
	}
	srv := openaitest.NewServer(weatherScript, nil)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	queue := newQueue(t)
	runs := filepath.Join(dir, "runs.log")
	p := spawn(t, "worker", map[string]string{queueEnv: queue, fakeEnv: srv.URL, effectsEnv: filepath.Join(dir, "effects.log"), runsEnv: runs, noCacheEnv: "1"})
	t.Cleanup(func() { p.Process.Signal(syscall.SIGTERM); p.Wait() })
	r := temporal.NewRunner(dial(t), &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Heartbeat: 5 * time.Second, Idle: time.Minute}})
	var want []string
	for i := range 2 {
		res, err := r.Run(t.Context(), fmt.Sprintf("weather %d", i), nil)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if res.Steps != 3 {
			t.Fatalf("run %d took %d steps, want the weather flow's 3", i, res.Steps)
		}
		want = append(want, `begin thread="" resume=false`, fmt.Sprintf("end %q <nil>", res.Text))
	}
	if diff := cmp.Diff(want, lines(t, runs)); diff != "" {
		t.Errorf("the Run hook's calls (-want +got):\n%s", diff)
	}
}
