package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
)

// eightCalls is a script of turns whose one step asks for 8 calls of
// tool, then answers.
func eightCalls(turns int, tool string) *coretest.Script {
	s := &coretest.Script{}
	for range turns {
		step := coretest.Step{}
		for range 8 {
			step.Calls = append(step.Calls, coretest.Call{Name: tool, Arguments: json.RawMessage(`{}`)})
		}
		s.Turns = append(s.Turns, coretest.Turn{Steps: []coretest.Step{step, {Text: "done"}}})
	}
	return s
}

// TestWorkersEnd: the goroutines a runner keeps for its calls (see
// workers.go) end when it is closed, whatever its Concurrency: a program
// that closes its runners leaves no goroutine behind.
func TestWorkersEnd(t *testing.T) {
	for _, concurrency := range []int{1, 3, 16, 100} {
		t.Run(fmt.Sprint(concurrency), func(t *testing.T) {
			noop, _ := core.NewTool("noop", "", func(context.Context, struct{}) (string, error) { return "ok", nil }, nil)
			tools, _ := core.NewToolbox(noop)
			before := runtime.NumGoroutine()
			r := core.NewRunner(coretest.NewBackend(eightCalls(3, "noop"), &coretest.BackendOptions{Tools: tools}), tools, &core.Options{Concurrency: concurrency, Logger: quiet})
			for range 3 {
				res, err := r.Run(context.Background(), "go", nil)
				if err != nil || len(res.Calls) != 8 {
					t.Fatalf("Run: %d calls, %v", len(res.Calls), err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<16)
				t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// TestWorkersLabels: a handler runs under the profiler labels of the run
// that called it (pprof.Do around Run), as it did on a goroutine of its
// own, though the goroutine it runs on was started by an earlier run
// under other labels.
func TestWorkersLabels(t *testing.T) {
	started, release := make(chan struct{}, 8), make(chan struct{})
	wait, _ := core.NewTool("wait", "", func(ctx context.Context, _ struct{}) (string, error) {
		started <- struct{}{}
		<-release
		return "ok", nil
	}, nil)
	tools, _ := core.NewToolbox(wait)
	r := core.NewRunner(coretest.NewBackend(eightCalls(2, "wait"), &coretest.BackendOptions{Tools: tools}), tools, &core.Options{Logger: quiet})
	defer r.Close()
	for _, run := range []string{"first", "second"} {
		errc := make(chan error, 1)
		go pprof.Do(context.Background(), pprof.Labels("run", run), func(ctx context.Context) {
			_, err := r.Run(ctx, "go", nil)
			errc <- err
		})
		for range 8 {
			<-started
		}
		var prof bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&prof, 1)
		// debug=1 groups goroutines by stack, each group's labels on a
		// line of its own before the stack.
		var handlers int
		for _, group := range strings.Split(prof.String(), "\n\n") {
			if !strings.Contains(group, "core_test.TestWorkersLabels.func1") {
				continue
			}
			handlers++
			if want := fmt.Sprintf(`# labels: {"run":%q}`, run); !strings.Contains(group, want) {
				t.Errorf("run %s: handlers' goroutines lack %s:\n%s", run, want, group)
			}
		}
		if handlers == 0 {
			t.Fatalf("run %s: no handler in the goroutine profile:\n%s", run, prof.String())
		}
		for range 8 {
			release <- struct{}{}
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
