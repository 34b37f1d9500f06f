package crashtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// The test binary doubles as the worker process: with CRASH_PHASE set, it
// runs one worker (see worker) instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("CRASH_PHASE") != "" {
		if err := worker(); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The points at which the first worker is killed, in the order a call
// meets them.
const (
	// beforeThread: the service created the thread; the run's record
	// (written before, with its input) has not moved to it yet.
	beforeThread = "before-thread"
	afterClaim   = "after-claim"  // the call is claimed; its handler starts
	afterEffect  = "after-effect" // the side effect happened; no result saved
	afterRecord  = "after-record" // the result is in the journal; not sent
	afterSubmit  = "after-submit" // the service accepted the result; not marked
)

// What the side-effecting tool declares.
const (
	sideEffects = "side-effects" // the default: not idempotent, no Verify hook
	verifies    = "verify"       // a Verify hook that checks the effects file
	idempotent  = "idempotent"   // safe to run again
)

const question = "What's the weather like in my favorite city?"

// script chains the weather bot's three calls; the third is the one with a
// side effect.
var script = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
	{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`},
}}}}

const answer = "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f."

// TestCrash kills a worker running the weather flow at each point of the
// side-effecting call's life, on each backend, for each declaration the
// tool can make; a second worker then resumes the thread from the SQLite
// journal file.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	tests := []struct {
		point, decl string
		effects     int  // how often the side effect happens in all
		inDoubt     bool // the model is told the outcome is unknown
	}{
		{afterClaim, sideEffects, 0, true},
		{afterClaim, verifies, 1, false},   // verified not done: run again
		{afterClaim, idempotent, 1, false}, // run again
		{afterEffect, sideEffects, 1, true},
		{afterEffect, verifies, 1, false},   // verified done: its result is sent
		{afterEffect, idempotent, 2, false}, // run again, as declared safe
		{afterRecord, sideEffects, 1, false},
		{afterRecord, verifies, 1, false},
		{afterRecord, idempotent, 1, false},
		{afterSubmit, sideEffects, 1, false},
		{afterSubmit, verifies, 1, false},
		{afterSubmit, idempotent, 1, false},
	}
	for _, backend := range []string{"openai", "foundry"} {
		for _, tt := range tests {
			t.Run(backend+"/"+tt.point+"/"+tt.decl, func(t *testing.T) {
				t.Parallel()
				env := serve(t, backend)
				env["CRASH_POINT"], env["CRASH_DECL"] = tt.point, tt.decl

				err := spawn(t, "run", env, nil)
				wantKilled(t, "the first worker, at "+tt.point, err)
				var out bytes.Buffer
				if err := spawn(t, "resume", env, &out); err != nil {
					t.Fatalf("the resuming worker failed: %v", err)
				}
				checkOutcome(t, env, out.String(), tt.inDoubt, tt.effects)
			})
		}
	}
}

// TestCrashTakeOver kills the worker at each point of the side-effecting
// call's life, as TestCrash does, and also once the service created the
// thread but before the run's record moved to it; a second worker, which
// is not told the thread, takes the run over from the SQLite journal's run
// records once the first's lease expired (Runner.TakeOver) and finishes it
// (the last case: starts it again, on a new thread): the side effect
// happens at most once, and is reported in doubt where the tool cannot
// tell. It logs how long the takeover took after the kill.
func TestCrashTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	tests := []struct {
		point   string
		effects int
		inDoubt bool
	}{
		{beforeThread, 1, false}, // started again, on a new thread
		{afterClaim, 0, true},
		{afterEffect, 1, true},
		{afterRecord, 1, false},
		{afterSubmit, 1, false},
	}
	for _, backend := range []string{"openai", "foundry"} {
		for _, tt := range tests {
			t.Run(backend+"/"+tt.point, func(t *testing.T) {
				t.Parallel()
				env := serve(t, backend)
				env["CRASH_POINT"], env["CRASH_DECL"] = tt.point, sideEffects
				err := spawn(t, "run", env, nil)
				killed := time.Now()
				wantKilled(t, "the first worker, at "+tt.point, err)
				var out bytes.Buffer
				if err := spawn(t, "recover", env, &out); err != nil {
					t.Fatalf("the recovering worker failed: %v", err)
				}
				t.Logf("taken over and finished %v after the kill (lease 300ms)", time.Since(killed).Round(time.Millisecond))
				checkOutcome(t, env, out.String(), tt.inDoubt, tt.effects)
			})
		}
	}
}

// wantKilled fails the test unless err says the worker was SIGKILLed.
func wantKilled(t *testing.T, who string, err error) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s was not killed: %v", who, err)
	}
}

// inDoubtAnswer reports whether the answer completed the turn with the
// weather's outcome unknown.
func inDoubtAnswer(text string) bool {
	return strings.Contains(text, "is unknown") && strings.Contains(text, "The Emerald City")
}

// checkOutcome checks the answer the last worker printed (the weather in
// doubt, or the whole answer) and how often the side effect happened.
func checkOutcome(t *testing.T, env map[string]string, out string, inDoubt bool, effects int) {
	t.Helper()
	text := strings.TrimSpace(out)
	if inDoubt {
		if !inDoubtAnswer(text) {
			t.Errorf("answer %q: want the turn completed with the weather's outcome unknown", text)
		}
	} else if text != answer {
		t.Errorf("answer %q, want %q", text, answer)
	}
	b, _ := os.ReadFile(env["CRASH_EFFECTS"])
	if n := strings.Count(string(b), "\n"); n != effects {
		t.Errorf("the side effect happened %d times, want %d", n, effects)
	}
}

// The points of TestCrashApproval at which a worker is killed.
const (
	whilePaused   = "while-paused"   // the run paused for approval
	afterDecision = "after-decision" // the approval was recorded; not resumed
)

// TestCrashApproval kills the worker whose run paused for the approval of
// the side-effecting call, and then the worker that approved it right
// after the decision (or lets it exit); a third worker resumes the thread
// from the SQLite journal. The approved call's effect happens exactly once.
func TestCrashApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	for _, backend := range []string{"openai", "foundry"} {
		for _, point := range []string{whilePaused, afterDecision} {
			t.Run(backend+"/"+point, func(t *testing.T) {
				t.Parallel()
				env := serve(t, backend)
				env["CRASH_APPROVAL"], env["CRASH_POINT"], env["CRASH_DECL"] = "1", point, sideEffects
				wantKilled(t, "the run worker", spawn(t, "run", env, nil))
				err := spawn(t, "decide", env, nil)
				if point == afterDecision {
					wantKilled(t, "the decide worker", err)
				} else if err != nil {
					t.Fatalf("the deciding worker failed: %v", err)
				}
				var out bytes.Buffer
				if err := spawn(t, "resume", env, &out); err != nil {
					t.Fatalf("the resuming worker failed: %v", err)
				}
				if text := strings.TrimSpace(out.String()); text != answer {
					t.Errorf("answer %q, want %q", text, answer)
				}
				effects, _ := os.ReadFile(env["CRASH_EFFECTS"])
				if n := strings.Count(string(effects), "\n"); n != 1 {
					t.Errorf("the approved call took effect %d times, want once", n)
				}
			})
		}
	}
}

// serve starts a fake of backend for one test and returns the workers'
// environment: where the fake and the files are.
func serve(t *testing.T, backend string) map[string]string {
	dir := t.TempDir()
	env := map[string]string{
		"CRASH_BACKEND": backend,
		"CRASH_JOURNAL": filepath.Join(dir, "journal.db"),
		"CRASH_EFFECTS": filepath.Join(dir, "effects.log"),
		"CRASH_THREAD":  filepath.Join(dir, "thread"),
	}
	switch backend {
	case "openai":
		srv := openaitest.NewServer(script, nil)
		t.Cleanup(srv.Close)
		env["CRASH_URL"] = srv.URL
	case "foundry":
		srv := foundrytest.NewServer(script, nil)
		t.Cleanup(srv.Close)
		cert := filepath.Join(dir, "cert.pem")
		if err := os.WriteFile(cert, srv.CertificatePEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		env["CRASH_URL"], env["CRASH_CERT"] = srv.ProjectEndpoint(), cert
	}
	return env
}

// spawn runs one worker process in phase and waits for it.
func spawn(t *testing.T, phase string, env map[string]string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), "CRASH_PHASE="+phase)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s worker's stderr:\n%s", phase, stderr.String())
	}
	return err
}

// worker is the worker process: it runs the weather flow (phase "run"),
// killing itself at CRASH_POINT, or resumes the thread the first worker
// left (phase "resume") and prints the answer.
func worker() error {
	ctx := context.Background()
	phase, point := os.Getenv("CRASH_PHASE"), os.Getenv("CRASH_POINT")
	if phase == "fleet" {
		return fleetWorker()
	}
	if phase != "run" {
		point = ""
	}
	sj, err := sqlitejournal.Open(ctx, os.Getenv("CRASH_JOURNAL"), nil)
	if err != nil {
		return err
	}
	defer sj.Close()
	tools, err := weatherTools(point, os.Getenv("CRASH_DECL"), os.Getenv("CRASH_EFFECTS"))
	if err != nil {
		return err
	}
	b, err := openBackend(ctx, tools)
	if err != nil {
		return err
	}
	threadFile := os.Getenv("CRASH_THREAD")
	r := core.NewRunner(b, tools, &core.Options{
		Journal: &killingJournal{Journal: sj, point: point},
		Lease:   300 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e core.Event) {
			if e.Kind == core.EventStepStarted && e.Step == 1 {
				os.WriteFile(threadFile, []byte(e.Thread), 0o600)
			}
		},
	})
	var res *core.Result
	switch phase {
	case "run":
		res, err = r.Run(ctx, question, nil)
		if errors.Is(err, core.ErrAwaitingApproval) {
			os.WriteFile(threadFile, []byte(res.Thread), 0o600)
			die() // paused for approval: the process goes away
		}
	case "decide":
		thread, rerr := os.ReadFile(threadFile)
		if rerr != nil {
			return rerr
		}
		list, err := r.Approvals(ctx, string(thread))
		if err != nil {
			return err
		}
		if len(list) != 1 {
			return fmt.Errorf("%d approvals, want 1", len(list))
		}
		if err := r.Decide(ctx, string(thread), list[0].Key.Call, core.Decision{Approved: true, Actor: "crash test"}); err != nil {
			return err
		}
		if os.Getenv("CRASH_POINT") == afterDecision {
			die()
		}
		return nil
	case "recover":
		// Without the thread: the journal's run records name it once the
		// dead worker's lease expired.
		for deadline := time.Now().Add(20 * time.Second); res == nil; time.Sleep(20 * time.Millisecond) {
			got, rerr := r.TakeOver(ctx)
			switch {
			case rerr != nil:
				return rerr
			case len(got) > 0:
				res = got[0]
			case time.Now().After(deadline):
				return errors.New("no run to recover")
			}
		}
	default:
		thread, rerr := os.ReadFile(threadFile)
		if rerr != nil {
			return rerr
		}
		res, err = r.Resume(ctx, string(thread), nil)
	}
	if err != nil {
		return err
	}
	fmt.Println(res.Text)
	return nil
}

func openBackend(ctx context.Context, tools *core.Toolbox) (driver.Backend, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CRASH_BACKEND") == "openai" {
		return openai.Open(ctx, tools, &openai.Options{BaseURL: os.Getenv("CRASH_URL"), APIKey: "test-key", Keep: true, Logger: quiet})
	}
	pem, err := os.ReadFile(os.Getenv("CRASH_CERT"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return foundry.Open(ctx, tools, &foundry.Options{
		Endpoint: os.Getenv("CRASH_URL"), Token: "test-token", Keep: true, Logger: quiet,
		Definition: &foundry.AgentDefinition{Name: "weather", Model: "gpt-4.1-mini"},
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	})
}

// die kills the process at once, as a crash would.
func die() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// killingJournal kills the process after a result is recorded, or once the
// service accepted it, for the side-effecting call.
type killingJournal struct {
	*sqlitejournal.Journal
	point string
}

func (j *killingJournal) Finish(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	return j.recorded(ctx, key, j.Journal.Finish(ctx, key, owner, r))
}

// FinishUnsynced records the result of an idempotent tool's call, without
// a sync: the kill after it checks that such a write survives a kill.
func (j *killingJournal) FinishUnsynced(ctx context.Context, key journaldriver.Key, owner string, r journaldriver.Result) error {
	return j.recorded(ctx, key, j.Journal.FinishUnsynced(ctx, key, owner, r))
}

// recorded kills the process once the side-effecting call's result is
// recorded, at afterRecord; else it returns err, the recording's.
func (j *killingJournal) recorded(ctx context.Context, key journaldriver.Key, err error) error {
	if j.point == afterRecord && isWeather(ctx, j, key) {
		die()
	}
	return err
}

// MoveRun kills the process at beforeThread, as the run's record is to
// move to the thread the service created.
func (j *killingJournal) MoveRun(ctx context.Context, backend, from, to, owner, options string) error {
	if j.point == beforeThread {
		die()
	}
	return j.Journal.MoveRun(ctx, backend, from, to, owner, options)
}

func (j *killingJournal) MarkSubmitted(ctx context.Context, keys []journaldriver.Key) error {
	for _, k := range keys {
		if j.point == afterSubmit && isWeather(ctx, j, k) {
			die()
		}
	}
	return j.Journal.MarkSubmitted(ctx, keys)
}

// isWeather reports whether key is the side-effecting call: the only one
// whose result mentions the weather.
func isWeather(ctx context.Context, j *killingJournal, key journaldriver.Key) bool {
	e, ok, err := j.Get(ctx, key)
	return err == nil && ok && e.Result != nil && e.Result.Output.Text == "70f"
}

type locationArgs struct {
	Location string `json:"location"`
}

// weatherTools returns the weather bot's tools. getCurrentWeatherAtLocation
// records a line in the effects file each time it takes effect, declares
// decl, and kills the process at point.
func weatherTools(point, decl, effects string) (*core.Toolbox, error) {
	city, err := core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", func(context.Context, struct{}) (string, error) {
		return "Seattle, WA", nil
	}, &core.ToolOptions{Idempotent: true}) // a lookup
	if err != nil {
		return nil, err
	}
	nickname, err := core.NewTool("getCityNickname", "Gets the nickname of a city.", func(_ context.Context, in locationArgs) (string, error) {
		if in.Location != "Seattle, WA" {
			return "", core.ModelErrorf("no nickname for %s", in.Location)
		}
		return "The Emerald City", nil
	}, &core.ToolOptions{Idempotent: true}) // a lookup
	if err != nil {
		return nil, err
	}
	opts := &core.ToolOptions{Idempotent: decl == idempotent}
	if os.Getenv("CRASH_APPROVAL") != "" {
		opts.Approval = core.ApprovalAlways("the weather costs money")
	}
	if decl == verifies {
		opts.Verify = func(ctx context.Context, call core.Call) (any, bool, error) {
			b, err := os.ReadFile(effects)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, false, err
			}
			return "70f", strings.Contains(string(b), call.ID+"\n"), nil
		}
	}
	delay, _ := time.ParseDuration(os.Getenv("CRASH_EFFECT_DELAY"))
	weather, err := core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a location.", func(ctx context.Context, in locationArgs) (string, error) {
		if point == afterClaim {
			die()
		}
		time.Sleep(delay)
		if err := takeEffect(ctx, effects); err != nil {
			return "", err
		}
		if point == afterEffect {
			die()
		}
		return "70f", nil
	}, opts)
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(city, nickname, weather)
}

// takeEffect is the side effect of the call of ctx: a line with its id
// appended to the effects file.
func takeEffect(ctx context.Context, effects string) error {
	call, _ := core.CallFromContext(ctx)
	f, err := os.OpenFile(effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(call.ID + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
