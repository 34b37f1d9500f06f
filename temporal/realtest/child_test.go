package realtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/temporal"
)

// roleEnv names the role a copy of the test binary plays as a worker or a
// client process of a test (see child); unset, it runs the tests. The
// other variables are the role's settings.
const (
	roleEnv      = "TOOLRELAY_REALTEST_ROLE"
	hostPortEnv  = "TOOLRELAY_REALTEST_HOSTPORT"
	namespaceEnv = "TOOLRELAY_REALTEST_NAMESPACE"
	queueEnv     = "TOOLRELAY_REALTEST_QUEUE"
	fakeEnv      = "TOOLRELAY_REALTEST_FAKE"    // the fake Agents API's URL
	effectsEnv   = "TOOLRELAY_REALTEST_EFFECTS" // the side effects' log
	attemptsEnv  = "TOOLRELAY_REALTEST_ATTEMPTS"
	argEnv       = "TOOLRELAY_REALTEST_ARG"
	runsEnv      = "TOOLRELAY_REALTEST_RUNS"    // the Run hook's log
	noCacheEnv   = "TOOLRELAY_REALTEST_NOCACHE" // set: no workflow cache, every workflow task replays
	localEnv     = "TOOLRELAY_REALTEST_LOCAL"   // set: the tools' time limit is localToolTimeout (short: local activities)
)

// child plays the role named by roleEnv and returns the exit code.
func child(role string) int {
	var err error
	switch role {
	case "worker":
		err = workerProcess()
	case "decide", "collect", "stream":
		err = clientProcess(role)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// spawn starts a copy of the test binary in role, with env.
func spawn(t testing.TB, role string, env map[string]string) *exec.Cmd {
	return startChildOut(t, role, env, env[argEnv], nil)
}

// weatherScript chains the weather bot's three calls; the third has a
// side effect.
var weatherScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
	{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
	{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
	{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`},
}}}}

const weatherAnswer = "Your favorite city, Seattle, WA, is also known as The Emerald City. The current weather there is 70f."

type locationArgs struct {
	Location string `json:"location"`
}

// weatherTools are the weather bot's tools: two lookups (idempotent), and
// getCurrentWeatherAtLocation, which takes effectDelay and appends its
// call id to the effects log (not idempotent, no Verify hook: a second
// attempt is in doubt). approval, if set, makes every weather call need a
// person's decision.
func weatherTools(effects string, effectDelay time.Duration, approval bool) (*core.Toolbox, error) {
	city, err := core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", func(context.Context, struct{}) (string, error) {
		return "Seattle, WA", nil
	}, &core.ToolOptions{Idempotent: true})
	if err != nil {
		return nil, err
	}
	nickname, err := core.NewTool("getCityNickname", "Gets the nickname of a city.", func(_ context.Context, in locationArgs) (string, error) {
		return "The Emerald City", nil
	}, &core.ToolOptions{Idempotent: true})
	if err != nil {
		return nil, err
	}
	opts := &core.ToolOptions{}
	if approval {
		opts.Approval = core.ApprovalAlways("the weather costs money")
	}
	weather, err := core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a location.", func(ctx context.Context, in locationArgs) (string, error) {
		time.Sleep(effectDelay)
		call, _ := core.CallFromContext(ctx)
		f, err := os.OpenFile(effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(call.ID + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		if afterEffect != nil {
			afterEffect()
		}
		return "70f", nil
	}, opts)
	if err != nil {
		return nil, err
	}
	return core.NewToolbox(city, nickname, weather)
}

// afterEffect, if set, runs in getCurrentWeatherAtLocation's handler once
// its effect is written (see TestDieAfterEffect).
var afterEffect func()

// workerProcess is a worker of the loop over the sessions backend on the
// fake named by fakeEnv, until it is killed (or interrupted). Each
// activity attempt after the first (another worker's, taken over) is
// noted in the attempts log, with the time it began.
func workerProcess() error {
	ctx := context.Background()
	c, err := dialEnv()
	if err != nil {
		return err
	}
	defer c.Close()
	tools, err := weatherTools(os.Getenv(effectsEnv), 150*time.Millisecond, os.Getenv(argEnv) == "approval")
	if err != nil {
		return err
	}
	b, err := openai.Open(ctx, tools, &openai.Options{BaseURL: os.Getenv(fakeEnv), APIKey: "test-key", Keep: true, Logger: quiet})
	if err != nil {
		return err
	}
	if marker, ok := strings.CutPrefix(os.Getenv(argEnv), "exit-after-effect "); ok {
		afterEffect = func() {
			// The first worker to get here dies, its effect taken, its
			// result not yet returned.
			if f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				f.Close()
				os.Exit(dieExit)
			}
		}
	}
	attempts := os.Getenv(attemptsEnv)
	note := func(ctx context.Context, what string) {
		if attempts == "" || !activity.IsActivity(ctx) {
			return
		}
		if info := activity.GetInfo(ctx); info.Attempt > 1 {
			appendLine(attempts, fmt.Sprintf("%d %s %d", time.Now().UnixNano(), what, info.Attempt))
		}
	}
	hooks := &core.Hooks{
		Run: func(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
			runs := os.Getenv(runsEnv)
			if runs == "" {
				return ctx, nil
			}
			appendLine(runs, fmt.Sprintf("begin thread=%q resume=%v", info.Thread, info.Resume))
			return ctx, func(res *core.Result, err error) {
				appendLine(runs, fmt.Sprintf("end %q %v", res.Text, err))
			}
		},
		Step: func(ctx context.Context, info *core.StepInfo) (context.Context, func(*driver.Step, error)) {
			note(ctx, "step:"+info.Op)
			return ctx, func(*driver.Step, error) {}
		},
		Call: func(ctx context.Context, info *core.CallInfo) (context.Context, func(*core.CallEnd)) {
			note(ctx, "call:"+info.Call.Name)
			return ctx, func(*core.CallEnd) {}
		},
	}
	opts := &core.Options{Logger: quiet, Hooks: hooks}
	if os.Getenv(localEnv) != "" {
		opts.ToolTimeout = localToolTimeout
	}
	r := core.NewRunner(b, tools, opts)
	if os.Getenv(noCacheEnv) != "" {
		worker.SetStickyWorkflowCacheSize(0)
	}
	w := worker.New(c, os.Getenv(queueEnv), worker.Options{StickyScheduleToStartTimeout: time.Second})
	temporal.Register(w, r)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	if err := w.Start(); err != nil {
		return err
	}
	<-stop
	w.Stop()
	return r.Close()
}

// appendLine appends a line to a file, in one write.
func appendLine(name, line string) {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	f.WriteString(line + "\n")
	f.Close()
}

// lines returns a file's lines.
func lines(t testing.TB, name string) []string {
	b, err := os.ReadFile(name)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
