package crashtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math/big"
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

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/internal/pgtest"
	"github.com/toolrelay/toolrelay/journal"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"     // postgres:// for the fleet
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite:// for the fleet
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// Shape of the fleet tests.
const (
	fleetRuns   = 200
	fleetLease  = time.Second
	fleetEffect = 150 * time.Millisecond // how long the side-effecting call takes
)

// TestFleet runs 200 weather-flow runs (the third call has a side effect)
// on a fleet of worker processes sharing one journal: 4 on PostgreSQL (when
// TOOLRELAY_TEST_POSTGRES names a database), 2 on one SQLite file. Every
// ~2 s a random worker is killed (SIGKILL) and started again. Each worker
// starts the runs of its share that no one started, and recovers the runs
// whose worker died (Runner.KeepTakingOver). Every run must complete;
// every side effect must happen once, or be reported in doubt (the tool is
// not idempotent and has no Verify hook); the longest takeover (from a kill
// to the recovery of the run it interrupted) is logged and must stay under
// the lease plus a second.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	fleets := []struct {
		name    string
		workers int
		journal func(t *testing.T, dir string) string
	}{
		{"sqlite", 2, func(_ *testing.T, dir string) string { return "sqlite://" + filepath.Join(dir, "journal.db") }},
		{"postgres", 4, func(t *testing.T, _ string) string {
			u := os.Getenv(postgresEnv)
			if u == "" {
				return ""
			}
			return pgtest.FreshTable(t, u, "fleet")
		}},
	}
	for _, fl := range fleets {
		t.Run(fl.name, func(t *testing.T) {
			dir := t.TempDir()
			url := fl.journal(t, dir)
			if url == "" {
				t.Skipf("%s is not set: the PostgreSQL fleet is not tried", postgresEnv)
			}
			srv := openaitest.NewServer(script, nil)
			t.Cleanup(srv.Close)
			env := map[string]string{"CRASH_URL": srv.URL, "FLEET_JOURNAL": url, "FLEET_DIR": dir, "CRASH_EFFECTS": filepath.Join(dir, "effects.log"),
				"CRASH_EFFECT_DELAY": fleetEffect.String()}
			f := &fleet{t: t, env: env, dir: dir, procs: make([]*exec.Cmd, fl.workers)}
			for w := range fl.workers {
				f.start(w)
			}
			kills := f.chaos(2*time.Second, 90*time.Second)
			f.stop()
			f.check(srv, kills)
		})
	}
}

// A fleet is the worker processes of a TestFleet.
type fleet struct {
	t     *testing.T
	env   map[string]string
	dir   string
	mu    sync.Mutex
	procs []*exec.Cmd
	exits sync.WaitGroup
}

// start starts worker w (again), with its share of the runs.
func (f *fleet) start(w int) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CRASH_PHASE=fleet", "FLEET_WORKER="+strconv.Itoa(w), "FLEET_WORKERS="+strconv.Itoa(len(f.procs)))
	for k, v := range f.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log, err := os.OpenFile(filepath.Join(f.dir, fmt.Sprintf("worker%d.log", w)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.procs[w] = cmd
	f.mu.Unlock()
	f.exits.Add(1)
	go func() {
		defer f.exits.Done()
		cmd.Wait()
		log.Close()
	}()
}

// A kill is a worker killed, and when.
type kill struct {
	worker int
	at     time.Time
}

// chaos kills a random worker every period (and starts it again) until
// every run is done, or every run was started and none finished for ten
// seconds (runs lost: check says which), or the time limit passes.
func (f *fleet) chaos(period, limit time.Duration) []kill {
	var kills []kill
	deadline := time.Now().Add(limit)
	next := time.Now().Add(period)
	last, since := 0, time.Now()
	for f.done() < fleetRuns {
		if n := f.done(); n != last {
			last, since = n, time.Now()
		}
		started, _ := filepath.Glob(filepath.Join(f.dir, "start-*"))
		if time.Now().After(deadline) || len(started) == fleetRuns && time.Since(since) > 10*time.Second {
			f.t.Logf("%d of %d runs done; chaos stops", f.done(), fleetRuns)
			return kills
		}
		if time.Now().After(next) {
			n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(f.procs))))
			w := int(n.Int64())
			f.mu.Lock()
			p := f.procs[w]
			f.mu.Unlock()
			p.Process.Signal(syscall.SIGKILL)
			kills = append(kills, kill{w, time.Now()})
			time.Sleep(10 * time.Millisecond)
			f.start(w)
			next = time.Now().Add(period)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return kills
}

// done counts the runs done.
func (f *fleet) done() int {
	m, _ := filepath.Glob(filepath.Join(f.dir, "done-*"))
	return len(m)
}

// stop asks every worker to stop, and waits for them.
func (f *fleet) stop() {
	os.WriteFile(filepath.Join(f.dir, "stop"), nil, 0o600)
	f.exits.Wait()
}

// check verifies the outcome: every run done, with the answer (or the
// weather in doubt), every side effect once, no session left waiting, and
// the takeovers' latency.
func (f *fleet) check(srv *openaitest.Server, kills []kill) {
	t := f.t
	unsent := 0
	// The runs by their input ("run i"), and their threads.
	threads := map[int][]string{}
	for _, r := range srv.Received() {
		var i int
		if r.Kind == "input" {
			if _, err := fmt.Sscanf(r.Input, "run %d", &i); err == nil {
				threads[i] = append(threads[i], r.Thread)
			}
		}
	}
	inDoubt, undelivered := 0, 0
	for i := range fleetRuns {
		var text string
		for _, th := range threads[i] {
			if b, err := os.ReadFile(filepath.Join(f.dir, "done-"+th)); err == nil {
				text = string(b)
			}
		}
		if text == "" && len(threads[i]) > 0 {
			// The run may have finished with its worker killed before it
			// handed the answer on (after the run's record ended, so that
			// nobody takes it over): the thread's answer is there for the
			// asking, as Resume gives it, running nothing.
			if text = f.lastAnswer(srv, threads[i][len(threads[i])-1]); text != "" {
				undelivered++
				t.Logf("run %d: finished, its worker killed before it handed the answer on", i)
			}
		}
		switch {
		case text == "" && len(threads[i]) == 0:
			// The worker died before its first request: the run never
			// reached the service (a job queue would hand it out again;
			// this test's workers skip a run once they marked it started).
			unsent++
			t.Logf("run %d: never reached the service", i)
		case text == "":
			t.Errorf("run %d (threads %v): not done", i, threads[i])
		case text == answer:
		case inDoubtAnswer(text):
			inDoubt++
		default:
			t.Errorf("run %d: answer %q", i, text)
		}
		if len(threads[i]) > 1 {
			t.Logf("run %d was started %d times (its worker died before its thread was recorded: the run was taken over from its start record)", i, len(threads[i]))
		}
	}
	effects, _ := os.ReadFile(f.env["CRASH_EFFECTS"])
	seen := map[string]bool{}
	for _, line := range strings.Fields(string(effects)) {
		if seen[line] {
			t.Errorf("the side effect of call %s happened twice", line)
		}
		seen[line] = true
	}
	if len(seen)+inDoubt+unsent < fleetRuns {
		t.Errorf("%d side effects and %d in doubt for %d runs", len(seen), inDoubt, fleetRuns)
	}
	// A session left waiting is an error, unless its run was started
	// again on another thread and done there: its worker died between
	// the service creating it and the run's record moving to it, and
	// nothing names it (none of its calls ran).
	restartedOn := map[string]bool{}
	for i := range fleetRuns {
		if len(threads[i]) > 1 {
			for _, th := range threads[i] {
				restartedOn[th] = true
			}
		}
	}
	parked, orphans := 0, 0
	client := oai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test-key"))
	pages := client.Beta.Agents.Sessions.ListAutoPaging(t.Context(), oai.BetaAgentSessionListParams{Limit: oai.Int(100)})
	for pages.Next() {
		s := pages.Current()
		switch {
		case s.Status == "idle":
		case restartedOn[s.ID]:
			orphans++
			t.Logf("session %s left %s: its run was started again elsewhere", s.ID, s.Status)
		default:
			parked++
			t.Logf("session %s left %s", s.ID, s.Status)
		}
	}
	if err := pages.Err(); err != nil {
		t.Errorf("sessions.list: %v", err)
	}
	// The latency of each takeover: from a kill to the first recovery
	// after it (kills are two seconds apart; a takeover takes about the
	// lease).
	recovered := f.recoveries()
	worst := time.Duration(0)
	for _, k := range kills {
		first := time.Time{}
		for _, at := range recovered {
			if at.After(k.at) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if !first.IsZero() && first.Sub(k.at) < 2*time.Second {
			worst = max(worst, first.Sub(k.at))
		}
	}
	t.Logf("%d runs, %d kills, %d runs taken over, %d in doubt, %d side effects, %d sessions left waiting, %d orphaned by a start taken over, %d never sent, %d finished but not handed on; worst takeover %v (lease %v)",
		fleetRuns, len(kills), len(recovered), inDoubt, len(seen), parked, orphans, unsent, undelivered, worst.Round(time.Millisecond), fleetLease)
	if parked > 0 {
		t.Errorf("%d sessions left waiting", parked)
	}
	if t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(f.dir, "worker*.log"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			t.Logf("%s:\n%s", filepath.Base(p), b)
		}
	}
	if worst > fleetLease+time.Second {
		t.Errorf("worst takeover %v, want at most the lease (%v) plus 1s", worst, fleetLease)
	}
}

// lastAnswer returns the answer of thread's last turn, if it is over, as
// Runner.Resume gives it (a runner of the test's own, over an empty
// journal: a turn that waits for results would fail, and runs nothing).
func (f *fleet) lastAnswer(srv *openaitest.Server, thread string) string {
	if st, err := journal.Open(f.t.Context(), f.env["FLEET_JOURNAL"]); err == nil {
		defer st.Close()
		if runs, err := st.(journaldriver.Runs).ListRuns(f.t.Context(), "openai", journaldriver.RunFinished, 1<<20); err == nil {
			if !slices.ContainsFunc(runs, func(r journaldriver.Run) bool { return r.Thread == thread }) {
				return "" // the run's record did not end finished
			}
		}
	}
	tools, err := fleetTools(filepath.Join(f.dir, "not-run.log"))
	if err != nil {
		f.t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := openai.Open(f.t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Keep: true, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	r := core.NewRunner(b, tools, &core.Options{Logger: quiet})
	defer r.Close()
	res, err := r.Resume(f.t.Context(), thread, nil)
	if err != nil {
		return ""
	}
	return res.Text
}

// recoveries reads when the workers took runs over (adopted them, before
// finishing them).
func (f *fleet) recoveries() []time.Time {
	m, _ := filepath.Glob(filepath.Join(f.dir, "recovered-*"))
	var out []time.Time
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			out = append(out, time.Unix(0, ns))
		}
	}
	return out
}

// fleetWorker is a worker of TestFleet: it starts the runs of its share
// that nobody started (a run is started once its start file exists) and
// recovers the runs of dead workers, until the stop file appears.
func fleetWorker() error {
	ctx := context.Background()
	dir := os.Getenv("FLEET_DIR")
	w, _ := strconv.Atoi(os.Getenv("FLEET_WORKER"))
	n, _ := strconv.Atoi(os.Getenv("FLEET_WORKERS"))
	store, err := journal.Open(ctx, os.Getenv("FLEET_JOURNAL"))
	if err != nil {
		return err
	}
	defer store.Close()
	tools, err := fleetTools(os.Getenv("CRASH_EFFECTS"))
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := openai.Open(ctx, tools, &openai.Options{BaseURL: os.Getenv("CRASH_URL"), APIKey: "test-key", Keep: true, Logger: quiet})
	if err != nil {
		return err
	}
	owner := fmt.Sprintf("worker%d-%d", w, os.Getpid())
	write := func(name, text string) { os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600) }
	// A recovered run is a resume: the Run hook notes when it was adopted.
	adopted := &core.Hooks{Run: func(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
		if info.TakenOver {
			write("recovered-"+info.Thread, strconv.FormatInt(time.Now().UnixNano(), 10))
		}
		return ctx, nil
	}}
	r := core.NewRunner(b, tools, &core.Options{Journal: store, Owner: owner, Lease: fleetLease, Logger: quiet, Hooks: adopted})
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithCancel(ctx)
		go func() { <-stop; cancel() }()
		r.KeepTakingOver(ctx, 100*time.Millisecond, func(res *core.Result, err error) {
			if err != nil || res == nil {
				fmt.Fprintf(os.Stderr, "recover: %v\n", err)
				return
			}
			write("done-"+res.Thread, res.Text)
		})
	})
	for i := w; i < fleetRuns; i += n {
		if exists(fmt.Sprintf("start-%d", i)) {
			continue // started before: done, or recovered by someone
		}
		write(fmt.Sprintf("start-%d", i), "")
		res, err := r.Run(ctx, fmt.Sprintf("run %d", i), nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "run %d: %v\n", i, err)
			continue
		}
		write("done-"+res.Thread, res.Text)
	}
	for !exists("stop") {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	return r.Close()
}

// fleetTools are the weather bot's tools; the side-effecting one takes
// fleetEffect (CRASH_EFFECT_DELAY) and records its call id in the effects
// file.
func fleetTools(effects string) (*core.Toolbox, error) {
	return weatherTools("", sideEffects, effects)
}
