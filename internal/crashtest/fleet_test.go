package crashtest

import (
	"context"
	"crypto/rand"
	"errors"
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
	"github.com/toolrelay/toolrelay/core/coretest"
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
	// approvalRuns are the runs of TestFleetApproval by default;
	// fleetKillsEnv asks it for about so many kills per fleet instead
	// (twenty runs a kill, a kill every half second).
	approvalRuns  = 40
	fleetKillsEnv = "TOOLRELAY_FLEET_KILLS"
)

// fleets are the fleets a fleet test runs: 2 workers on one SQLite file,
// and 4 on PostgreSQL when TOOLRELAY_TEST_POSTGRES names a database.
var fleets = []struct {
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
	runFleets(t, &fleet{runs: fleetRuns, answer: answer, inDoubt: inDoubtAnswer}, script, 2*time.Second, 90*time.Second)
}

// runFleets runs each of fleets as shape says (its runs, answers and
// environment) on a fake playing script, killing a worker every period
// until the runs are done (or limit passed), and checks the outcome.
func runFleets(t *testing.T, shape *fleet, script *coretest.Script, period, limit time.Duration) {
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
				"CRASH_EFFECT_DELAY": fleetEffect.String(), "FLEET_RUNS": strconv.Itoa(shape.runs)}
			for k, v := range shape.env {
				env[k] = v
			}
			f := &fleet{t: t, srv: srv, env: env, dir: dir, procs: make([]*exec.Cmd, fl.workers), runs: shape.runs, answer: shape.answer, inDoubt: shape.inDoubt}
			for w := range fl.workers {
				f.start(w)
			}
			kills := f.chaos(period, limit)
			f.settle(settleLimit)
			f.stop()
			f.check(kills)
		})
	}
}

// approvalScript is the weather flow whose side-effecting call comes with
// a second one, in the same step, that needs a person's approval (booking
// a trip): the weather is fetched (and journaled) before the run pauses,
// and sent only once the trip is decided.
var approvalScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
	{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Calls: []coretest.Call{
		{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)},
		{Name: "bookTrip", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)},
	}},
	{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}. Trip: {{output "bookTrip"}}.`},
}}}}

const approvalAnswer = "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f. Trip: booked."

// approvalInDoubt reports whether an answer of approvalScript completed
// the turn with the outcome of a side effect (the weather, the trip)
// unknown.
func approvalInDoubt(text string) bool {
	return strings.Contains(text, "is unknown") && strings.Contains(text, "The Emerald City")
}

// TestFleetApproval is TestFleet with approvals, and pruning: each run
// fetches the weather (a side effect) and pauses for the approval of a
// trip's booking (another) in the same step; every worker also decides
// the trips of the runs it finds paused (any worker's) and resumes them,
// and prunes the journal every 200 ms with no retention at all. A random
// worker is killed every second; TOOLRELAY_FLEET_KILLS=N asks for about
// N kills per fleet instead: 20N runs, a kill every half second. Half the
// runs are started with Run, half recorded with Enqueue for a worker's
// TakeOver to start (none of those may be lost). Every run must
// complete; no side effect may happen twice (pruning must keep what live
// runs need), and once every call is decided no run is left parked: no
// session waiting, no run record running or awaiting approval.
func TestFleetApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	runs, period, kills := approvalRuns, time.Second, 0
	if v := os.Getenv(fleetKillsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a number of kills", fleetKillsEnv, v)
		}
		runs, period, kills = 20*n, 500*time.Millisecond, n
	}
	shape := &fleet{env: map[string]string{"FLEET_APPROVAL": "1"}, runs: runs, answer: approvalAnswer, inDoubt: approvalInDoubt}
	runFleets(t, shape, approvalScript, period, max(3*time.Minute, 10*time.Duration(kills)*period))
}

// A fleet is the worker processes of a TestFleet.
type fleet struct {
	t     *testing.T
	srv   *openaitest.Server
	env   map[string]string
	dir   string
	mu    sync.Mutex
	procs []*exec.Cmd
	exits sync.WaitGroup
	// runs counts the runs; answer is a run's answer, and inDoubt tells
	// an answer with the outcome of a side effect unknown.
	runs    int
	answer  string
	inDoubt func(string) bool
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
	for n := f.done(); n < f.runs; n = f.done() {
		if n != last {
			last, since = n, time.Now()
		}
		started, _ := filepath.Glob(filepath.Join(f.dir, "start-*"))
		if time.Now().After(deadline) || len(started) == f.runs && time.Since(since) > 10*time.Second {
			f.t.Logf("%d of %d runs done; chaos stops", n, f.runs)
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

// done counts the runs done: those with an answer on one of their
// threads. It counts runs, not answers: a run enqueued twice (its worker
// killed between Enqueue and marking it started) has two threads, each
// answered, and a fleet that counted answers would stop while another run
// is still going.
func (f *fleet) done() int {
	answered := map[string]bool{}
	m, _ := filepath.Glob(filepath.Join(f.dir, "done-*"))
	for _, p := range m {
		answered[strings.TrimPrefix(filepath.Base(p), "done-")] = true
	}
	n := 0
	for _, threads := range f.threads() {
		if slices.ContainsFunc(threads, func(th string) bool { return answered[th] }) {
			n++
		}
	}
	return n
}

// threads returns the threads of each run, by its index: the sessions the
// service received its input on ("run i").
func (f *fleet) threads() map[int][]string {
	threads := map[int][]string{}
	for _, r := range f.srv.Received() {
		var i int
		if r.Kind == "input" {
			if _, err := fmt.Sscanf(r.Input, "run %d", &i); err == nil {
				threads[i] = append(threads[i], r.Thread)
			}
		}
	}
	return threads
}

// settleLimit bounds how long a fleet whose runs are done is given to
// settle: a run record that a killed worker left running (one it had
// taken again to read a thread already answered, say) is taken over by
// a live worker a lease after the kill.
const settleLimit = 30 * time.Second

// settle waits, the workers running and none killed any more, until no
// run record is running or awaiting approval (then the fleet is at rest:
// every run ended), or limit passes (check then reports what is left).
func (f *fleet) settle(limit time.Duration) {
	if f.env["FLEET_APPROVAL"] == "" {
		return // only the approval fleet checks the records
	}
	st, err := journal.Open(f.t.Context(), f.env["FLEET_JOURNAL"])
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	for time.Since(t0) < limit {
		live := 0
		for _, state := range []journaldriver.RunState{journaldriver.RunRunning, journaldriver.RunAwaiting} {
			runs, err := st.(journaldriver.Runs).ListRuns(f.t.Context(), "", state, 100)
			if err != nil {
				f.t.Fatal(err)
			}
			live += len(runs)
		}
		if live == 0 {
			f.t.Logf("the fleet settled %v after its runs were done", time.Since(t0).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Logf("the fleet did not settle within %v of its runs being done", limit)
}

// stop asks every worker to stop, and waits for them.
func (f *fleet) stop() {
	os.WriteFile(filepath.Join(f.dir, "stop"), nil, 0o600)
	f.exits.Wait()
}

// check verifies the outcome: every run done, with the answer (or the
// weather in doubt), every side effect once, no session left waiting, and
// the takeovers' latency.
func (f *fleet) check(kills []kill) {
	t, srv := f.t, f.srv
	unsent := 0
	threads := f.threads()
	inDoubt, undelivered := 0, 0
	for i := range f.runs {
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
			if f.env["FLEET_APPROVAL"] != "" && i%2 == 0 {
				t.Errorf("run %d, enqueued, never reached the service", i)
			}
		case text == "":
			t.Errorf("run %d (threads %v): not done", i, threads[i])
		case text == f.answer:
		case f.inDoubt(text):
			inDoubt++
		default:
			t.Errorf("run %d: answer %q", i, text)
		}
		if len(threads[i]) > 1 {
			t.Logf("run %d was started %d times (its worker died before its thread was recorded: the run was taken over from its start record)", i, len(threads[i]))
		}
	}
	effects, _ := os.ReadFile(f.env["CRASH_EFFECTS"])
	seen, twice := map[string]bool{}, 0
	for _, line := range strings.Fields(string(effects)) {
		if seen[line] {
			twice++
			t.Errorf("the side effect of call %s happened twice", line)
		}
		seen[line] = true
	}
	if len(seen)+inDoubt+unsent < f.runs {
		t.Errorf("%d side effects and %d in doubt for %d runs", len(seen), inDoubt, f.runs)
	}
	// A session left waiting is an error, unless its run was started
	// again on another thread and done there: its worker died between
	// the service creating it and the run's record moving to it, and
	// nothing names it (none of its calls ran).
	restartedOn := map[string]bool{}
	for i := range f.runs {
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
	t.Logf("%d runs, %d kills, %d runs taken over, %d in doubt, %d side effects (%d twice), %d sessions left waiting, %d orphaned by a start taken over, %d never sent, %d finished but not handed on; worst takeover %v (lease %v)",
		f.runs, len(kills), len(recovered), inDoubt, len(seen), twice, parked, orphans, unsent, undelivered, worst.Round(time.Millisecond), fleetLease)
	if parked > 0 {
		t.Errorf("%d sessions left waiting", parked)
	}
	if f.env["FLEET_APPROVAL"] != "" {
		f.checkRecords()
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
		if runs, err := st.(journaldriver.Runs).ListRuns(f.t.Context(), "openai", "", 1<<20); err == nil {
			// A record pruned ended before; one there must have ended
			// finished.
			if slices.ContainsFunc(runs, func(r journaldriver.Run) bool { return r.Thread == thread && r.State != journaldriver.RunFinished }) {
				return "" // the run's record did not end finished
			}
			if f.env["FLEET_APPROVAL"] == "" && !slices.ContainsFunc(runs, func(r journaldriver.Run) bool { return r.Thread == thread }) {
				return "" // no pruning: a run's record stays
			}
		}
	}
	tools, err := fleetTools(filepath.Join(f.dir, "not-run.log"), f.env["FLEET_APPROVAL"] != "")
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
	runs := fleetRuns
	if v := os.Getenv("FLEET_RUNS"); v != "" {
		runs, _ = strconv.Atoi(v)
	}
	approval := os.Getenv("FLEET_APPROVAL") != ""
	store, err := journal.Open(ctx, os.Getenv("FLEET_JOURNAL"))
	if err != nil {
		return err
	}
	defer store.Close()
	tools, err := fleetTools(os.Getenv("CRASH_EFFECTS"), approval)
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
	opts := &core.Options{Journal: store, Owner: owner, Lease: fleetLease, Logger: quiet, Hooks: adopted}
	if approval {
		// The worker's log (shown when the test fails) tells the calls'
		// lives, and what the runner logs.
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		opts.OnEvent = func(e core.Event) {
			switch e.Kind {
			case core.EventCallStarted, core.EventCallFinished, core.EventCallReused, core.EventCallInDoubt:
				fmt.Fprintf(os.Stderr, "%s %s %s %s/%s %s %v\n", time.Now().Format("15:04:05.000"), owner, e.Kind, e.Thread, e.Call.ID, e.Outcome, e.Err)
			}
		}
	}
	r := core.NewRunner(b, tools, opts)
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
			if len(res.Pending) == 0 { // else paused for approval
				write("done-"+res.Thread, res.Text)
			}
		})
	})
	if approval {
		wg.Go(func() { decideAndPrune(ctx, r, store, stop, write) })
	}
	for i := w; i < runs; i += n {
		if exists(fmt.Sprintf("start-%d", i)) {
			continue // started before: done, or recovered by someone
		}
		input := fmt.Sprintf("run %d", i)
		if approval && i%2 == 0 {
			// Recorded first, then marked: a worker killed in between
			// enqueues it again (two runs of one input, each once), never
			// none; a worker's TakeOver runs it.
			if _, err := r.Enqueue(ctx, input, nil); err != nil {
				fmt.Fprintf(os.Stderr, "enqueue %d: %v\n", i, err)
				continue
			}
			write(fmt.Sprintf("start-%d", i), "")
			continue
		}
		write(fmt.Sprintf("start-%d", i), "")
		res, err := r.Run(ctx, input, nil)
		if errors.Is(err, core.ErrAwaitingApproval) {
			continue // a worker decides, and resumes it
		}
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
// file. With approval, bookTrip joins them: it needs a person's approval,
// and records its call id in the effects file too.
func fleetTools(effects string, approval bool) (*core.Toolbox, error) {
	tb, err := weatherTools("", sideEffects, effects)
	if err != nil || !approval {
		return tb, err
	}
	trip, err := core.NewTool("bookTrip", "Books a trip to a location.", func(ctx context.Context, in locationArgs) (string, error) {
		if err := takeEffect(ctx, effects); err != nil {
			return "", err
		}
		return "booked", nil
	}, &core.ToolOptions{Approval: core.ApprovalAlways("a trip costs money")})
	if err != nil {
		return nil, err
	}
	return tb, tb.Add(trip)
}

// decideAndPrune is the approval fleet's person and operator, in every
// worker: every 20 ms it approves the calls of the runs it finds paused
// (any worker's) and resumes them (a run whose calls a killed worker
// decided, too), and every 200 ms it prunes the journal with no
// retention, until stop is closed.
func decideAndPrune(ctx context.Context, r *core.Runner, store journaldriver.Journal, stop chan struct{}, write func(name, text string)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-stop; cancel() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(pruned) >= 200*time.Millisecond {
			if _, err := store.Prune(ctx, time.Now()); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "prune: %v\n", err)
			}
			pruned = time.Now()
		}
		paused, err := store.(journaldriver.Runs).ListRuns(ctx, "openai", journaldriver.RunAwaiting, 10)
		if err != nil {
			continue
		}
		for _, run := range paused {
			list, err := r.Approvals(ctx, run.Thread)
			if err != nil {
				continue
			}
			for _, a := range list {
				if a.Decision == nil {
					r.Decide(ctx, run.Thread, a.Key.Call, core.Decision{Approved: true, Actor: "fleet"}) // a second decider is refused
				}
			}
			res, err := r.Resume(ctx, run.Thread, nil)
			switch {
			case err == nil:
				write("done-"+res.Thread, res.Text)
			case ctx.Err() == nil && !errors.Is(err, core.ErrAwaitingApproval):
				fmt.Fprintf(os.Stderr, "resume %s: %v\n", run.Thread, err)
			}
		}
	}
}

// checkRecords fails the test if a run record is left running or awaiting
// approval, once every call was decided and every run done.
func (f *fleet) checkRecords() {
	st, err := journal.Open(f.t.Context(), f.env["FLEET_JOURNAL"])
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	for _, state := range []journaldriver.RunState{journaldriver.RunRunning, journaldriver.RunAwaiting} {
		runs, err := st.(journaldriver.Runs).ListRuns(f.t.Context(), "", state, 100)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range runs {
			f.t.Errorf("run %s left %s (owner %s)", r.Thread, r.State, r.Owner)
		}
		f.t.Logf("%d run records left %s", len(runs), state)
	}
}
