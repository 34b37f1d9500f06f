package realtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/temporal"
)

// Shape of the worker-death test.
const (
	deathRuns     = 120
	deathWorkers  = 3
	deathParallel = 12 // runs in flight at once
	deathPeriod   = 2 * time.Second
)

// TestWorkerDeath runs the weather flow 120 times on three worker
// processes of a real Temporal server, the third call appending to an
// effects log (not idempotent, no Verify hook), while every 2 s a random
// worker is killed (SIGKILL) and started again. Every run must complete
// with the answer, or with the weather call reported in doubt; no side
// effect may happen twice. Takeover time (from a kill to the next attempt
// of an activity the dead worker held, on another worker) is reported.
//
// It runs in both modes: in the local one, every step but the streamed
// and every call runs as a local activity on the worker that runs the
// workflow task, the weather call claimed before it takes effect.
func TestWorkerDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if m.local && os.Getenv(localDeathEnv) == "" {
				// No effect has run twice in any run of it; but about one
				// run in four had one turn of 120 end with the service
				// refusing a result it had accepted (a workflow task that
				// timed out on a live worker, the 1 s timeout under load,
				// ran its submit again: MODES.md). Open (issue 48, item 2).
				t.Skip("the local mode under worker kills is not yet reliable (one turn in ~480 fails; no effect twice): set " + localDeathEnv + "=1 to run it")
			}
			workerDeath(t, m.local)
		})
	}
}

// localDeathEnv, set, runs TestWorkerDeath's local mode.
const localDeathEnv = "TOOLRELAY_TEST_LOCAL_DEATH"

func workerDeath(t *testing.T, local bool) {
	srv := openaitest.NewServer(weatherScript, nil)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	queue := newQueue(t)
	env := map[string]string{queueEnv: queue, fakeEnv: srv.URL, effectsEnv: filepath.Join(dir, "effects.log"), attemptsEnv: filepath.Join(dir, "attempts.log")}
	if local {
		env[localEnv] = "1"
	}
	var (
		mu    sync.Mutex
		procs = make([]*exec.Cmd, deathWorkers)
		kills []time.Time
	)
	for i := range procs {
		procs[i] = spawn(t, "worker", env)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
	})
	c := dial(t)
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, WorkflowTaskTimeout: time.Second, Loop: localSettings(temporal.LoopOptions{Heartbeat: time.Second, Idle: time.Minute}, local)})

	stop := make(chan struct{})
	chaos := sync.WaitGroup{}
	chaos.Go(func() {
		tick := time.NewTicker(deathPeriod)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			i := rand.IntN(deathWorkers)
			procs[i].Process.Kill()
			procs[i].Wait()
			kills = append(kills, time.Now())
			procs[i] = spawn(t, "worker", env)
			mu.Unlock()
		}
	})

	type outcome struct {
		res *core.Result
		err error
	}
	outs := make([]outcome, deathRuns)
	sem := make(chan struct{}, deathParallel)
	var runs sync.WaitGroup
	t0 := time.Now()
	for i := range deathRuns {
		sem <- struct{}{}
		runs.Go(func() {
			defer func() { <-sem }()
			res, err := r.Run(t.Context(), fmt.Sprintf("run %d: what's the weather like in my favorite city?", i), nil)
			outs[i] = outcome{res, err}
		})
	}
	runs.Wait()
	close(stop)
	chaos.Wait()
	elapsed := time.Since(t0)

	inDoubt, answered := 0, 0
	for i, o := range outs {
		switch {
		case o.err != nil:
			t.Errorf("run %d: %v", i, o.err)
		case o.res.Text == weatherAnswer:
			answered++
		case strings.Contains(o.res.Text, "unknown: it may or may not have taken effect"):
			inDoubt++
		default:
			t.Errorf("run %d answered %q", i, o.res.Text)
		}
		if o.err == nil && o.res.Text != weatherAnswer {
			if n := len(o.res.Calls); n == 0 || o.res.Calls[n-1].Outcome != core.InDoubt {
				t.Errorf("run %d: an answer without the weather, but its call is not in doubt: %+v", i, o.res.Calls)
			}
		}
	}
	effects := lines(t, env[effectsEnv])
	seen := map[string]int{}
	for _, id := range effects {
		seen[id]++
	}
	twice := 0
	for id, n := range seen {
		if n > 1 {
			twice++
			t.Errorf("call %s took effect %d times", id, n)
		}
	}
	if len(effects) < answered {
		t.Errorf("%d effects for %d answers with the weather", len(effects), answered)
	}
	// Takeover: from each kill to the first retried attempt after it.
	var attempts []time.Time
	for _, l := range lines(t, env[attemptsEnv]) {
		ns, err := strconv.ParseInt(strings.Fields(l)[0], 10, 64)
		if err == nil {
			attempts = append(attempts, time.Unix(0, ns))
		}
	}
	slices.SortFunc(attempts, func(a, b time.Time) int { return a.Compare(b) })
	mu.Lock()
	ks := slices.Clone(kills)
	mu.Unlock()
	var takeovers []time.Duration
	for i, k := range ks {
		next := time.Time{}
		if i+1 < len(ks) {
			next = ks[i+1]
		}
		for _, a := range attempts {
			if a.After(k) && (next.IsZero() || a.Before(next)) {
				takeovers = append(takeovers, a.Sub(k))
				break
			}
		}
	}
	slices.Sort(takeovers)
	median, worst := time.Duration(0), time.Duration(0)
	if n := len(takeovers); n > 0 {
		median, worst = takeovers[n/2], takeovers[n-1]
	}
	t.Logf("%d runs in %v on %d workers: %d kills, %d answered, %d in doubt, %d effects, %d twice; %d retried attempts; takeover after a kill: %d measured, median %v, worst %v",
		deathRuns, elapsed.Round(time.Millisecond), deathWorkers, len(ks), answered, inDoubt, len(effects), twice, len(attempts), len(takeovers), median.Round(time.Millisecond), worst.Round(time.Millisecond))
	if len(ks) < 3 {
		t.Errorf("only %d kills during the runs: the test proves little", len(ks))
	}
}
