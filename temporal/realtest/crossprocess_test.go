package realtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/temporal"
)

// clientProcess is a client of the loop in a process of its own: "decide"
// decides a call (argEnv: thread, call id and "approve" or "deny"; exit
// code 3 when the decision was refused as a second one), "collect" waits
// for a thread's turn and prints its answer.
func clientProcess(role string) error {
	c, err := dialEnv()
	if err != nil {
		return err
	}
	defer c.Close()
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: os.Getenv(queueEnv)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := strings.Fields(os.Getenv(argEnv))
	switch role {
	case "decide":
		err := r.Decide(ctx, args[0], args[1], core.Decision{Approved: args[2] == "approve", Actor: fmt.Sprintf("pid %d", os.Getpid()), Reason: args[2]})
		if errcode.Of(err) == errcode.FailedPrecondition {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		return err
	case "collect":
		res, err := r.Resume(ctx, args[0], nil)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return fmt.Errorf("unknown role %q", role)
}

// TestApprovalsAcrossProcesses: a turn paused on a call awaiting approval
// (this process) is decided by a second process and collected by a third;
// then, on another turn, two processes race to decide: exactly one wins,
// the other is refused, and the answer is the winner's.
func TestApprovalsAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := openaitest.NewServer(&coretest.Script{Turns: []coretest.Turn{weatherScript.Turns[0], weatherScript.Turns[0]}}, nil)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	queue := newQueue(t)
	env := map[string]string{queueEnv: queue, fakeEnv: srv.URL, effectsEnv: filepath.Join(dir, "effects.log"), argEnv: "approval"}
	w := spawn(t, "worker", env)
	t.Cleanup(func() { w.Process.Signal(syscall.SIGTERM); w.Wait() })
	r := temporal.NewRunner(dial(t), &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{Heartbeat: time.Second, Idle: time.Minute}})

	res, err := r.Run(t.Context(), "weather?", nil)
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("Run = %+v, %v; want a pause on the weather call", res, err)
	}
	thread, call := res.Thread, res.Pending[0].Key.Call
	if code := runChild(t, "decide", env, thread+" "+call+" approve", nil); code != 0 {
		t.Fatalf("the deciding process exited %d", code)
	}
	var out strings.Builder
	if code := runChild(t, "collect", env, thread, &out); code != 0 {
		t.Fatalf("the collecting process exited %d", code)
	}
	var got core.Result
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || got.Text != weatherAnswer {
		t.Fatalf("the third process collected %q (%v), want the answer", out.String(), err)
	}

	// Two deciders race on the second turn.
	res, err = r.Run(t.Context(), "again?", &core.RunOptions{Thread: thread})
	if !errors.Is(err, core.ErrAwaitingApproval) || len(res.Pending) != 1 {
		t.Fatalf("second Run = %+v, %v; want a pause", res, err)
	}
	call = res.Pending[0].Key.Call
	a, d := startChild(t, "decide", env, thread+" "+call+" approve"), startChild(t, "decide", env, thread+" "+call+" deny")
	ca, cd := exitCode(a.Wait()), exitCode(d.Wait())
	if !(ca == 0 && cd == 3 || ca == 3 && cd == 0) {
		t.Fatalf("racing deciders exited %d (approve) and %d (deny), want one 0 and the other 3 (refused)", ca, cd)
	}
	fin, err := r.Resume(t.Context(), thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	approved := ca == 0
	if approved != (fin.Text == weatherAnswer) || !approved && !strings.Contains(fin.Text, "a person denied this call: deny") {
		t.Errorf("the %v decision won, but the answer is %q", map[bool]string{true: "approving", false: "denying"}[approved], fin.Text)
	}
	t.Logf("the racing deciders: approve exited %d, deny exited %d; answer %q", ca, cd, fin.Text)
}

// TestStreamAcrossProcesses: this process reads a turn's stream that
// worker processes run; the worker in the middle of the message is killed
// (SIGKILL) and another takes the step over: the pieces still join to the
// answer's text, nothing repeated. The other worker starts late (as on a
// loaded machine, where a process takes seconds to start), so that for
// longer than the client's 10 s a request no worker answers the reader's
// queries (the server offers them to the dead worker's queue for 5 s,
// then waits for another): the reader asks again, and the stream goes on.
func TestStreamAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	s := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{{Text: text}}}}, DeltaSize: 8, DeltaPauseMS: 40}
	srv := openaitest.NewServer(s, nil)
	t.Cleanup(srv.Close)
	queue := newQueue(t)
	env := map[string]string{queueEnv: queue, fakeEnv: srv.URL, effectsEnv: filepath.Join(t.TempDir(), "effects.log")}
	w := spawn(t, "worker", env)
	var (
		mu       sync.Mutex
		second   *exec.Cmd
		startErr error
		ended    bool // the test ended: no worker starts
	)
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		for _, p := range []*exec.Cmd{w, second} {
			if p != nil {
				p.Process.Signal(syscall.SIGTERM)
				p.Wait()
			}
		}
	})
	r := temporal.NewRunner(dial(t), &temporal.Options{TaskQueue: queue, WorkflowTaskTimeout: time.Second, Loop: temporal.LoopOptions{Heartbeat: time.Second, Idle: time.Minute}})
	st := r.Stream(t.Context(), "Tell me about the fox", nil)
	var (
		pieces strings.Builder
		n      int
		dones  []string
		killed bool
	)
	for ev, err := range st.Events() {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch ev.Kind {
		case core.EventTextDelta:
			pieces.WriteString(ev.Text)
			if n++; n == 5 && !killed {
				// In the middle of the message: the worker dies; a new one,
				// started late, takes the step over.
				w.Process.Kill()
				w.Wait()
				killed = true
				time.AfterFunc(lateStart, func() {
					mu.Lock()
					defer mu.Unlock()
					if !ended {
						cmd := childCmd("worker", env, env[argEnv], nil)
						if startErr = cmd.Start(); startErr == nil {
							second = cmd
						}
					}
				})
			}
		case core.EventTextDone:
			dones = append(dones, ev.Text)
		}
	}
	res, err := st.Result()
	if err != nil {
		t.Fatal(err)
	}
	if !killed {
		t.Fatal("the message ended before the worker could be killed")
	}
	mu.Lock()
	if second == nil {
		t.Errorf("the second worker did not start: %v", startErr)
	}
	mu.Unlock()
	if pieces.String() != text || len(dones) != 1 || dones[0] != text || res.Text != text {
		t.Errorf("pieces make %q (%d pieces), done %q, answer %q; want the text once", pieces.String(), n, dones, res.Text)
	}
	t.Logf("%d pieces; the worker was killed after the 5th", n)
}

// runChild runs a client process with arg and returns its exit code.
func runChild(t *testing.T, role string, env map[string]string, arg string, stdout *strings.Builder) int {
	cmd := startChildOut(t, role, env, arg, stdout)
	return exitCode(cmd.Wait())
}

func startChild(t *testing.T, role string, env map[string]string, arg string) *exec.Cmd {
	return startChildOut(t, role, env, arg, nil)
}

func startChildOut(t testing.TB, role string, env map[string]string, arg string, stdout *strings.Builder) *exec.Cmd {
	cmd := childCmd(role, env, arg, stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// lateStart is how late TestStreamAcrossProcesses starts its second
// worker: past the client's 10 s a request.
const lateStart = 12 * time.Second

// childCmd returns, not started, a copy of the test binary playing role
// with env and arg (stdout, if set, takes its output).
func childCmd(role string, env map[string]string, arg string, stdout *strings.Builder) *exec.Cmd {
	e := map[string]string{argEnv: arg}
	for k, v := range env {
		if k != argEnv {
			e[k] = v
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, hostPortEnv+"="+hostPort, namespaceEnv+"="+namespace)
	for k, v := range e {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	return cmd
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// TestContinueAsNew: a thread whose history passes MaxHistoryEvents
// continues as new between turns; the next turn goes on on the same
// service thread, and Resume still returns the last answer.
func TestContinueAsNew(t *testing.T) {
	s := &coretest.Script{Turns: []coretest.Turn{weatherScript.Turns[0], weatherScript.Turns[0]}}
	srv := openaitest.NewServer(s, nil)
	t.Cleanup(srv.Close)
	tools, err := weatherTools(filepath.Join(t.TempDir(), "effects.log"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := openai.Open(t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	queue := newQueue(t)
	startWorker(t, c, queue, core.NewRunner(b, tools, &core.Options{Logger: quiet}))
	r := temporal.NewRunner(c, &temporal.Options{TaskQueue: queue, Loop: temporal.LoopOptions{MaxHistoryEvents: 20, Idle: time.Minute}})
	first, err := r.Run(t.Context(), "weather?", nil)
	if err != nil {
		t.Fatal(err)
	}
	run1 := c.GetWorkflow(t.Context(), first.Thread, "").GetRunID()
	second, err := r.Run(t.Context(), "again?", &core.RunOptions{Thread: first.Thread})
	if err != nil {
		t.Fatal(err)
	}
	run2 := c.GetWorkflow(t.Context(), first.Thread, "").GetRunID()
	if run1 == run2 {
		t.Errorf("the workflow did not continue as new (run %s)", run1)
	}
	if second.Text != weatherAnswer || second.Calls[0].Call.Thread != first.Calls[0].Call.Thread {
		t.Errorf("second turn %q on service thread %s, want the answer on %s", second.Text, second.Calls[0].Call.Thread, first.Calls[0].Call.Thread)
	}
	last, err := r.Resume(t.Context(), first.Thread, nil)
	if err != nil || last.Text != weatherAnswer {
		t.Errorf("Resume = %+v, %v", last, err)
	}
}
