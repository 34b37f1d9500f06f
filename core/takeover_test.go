package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// deadJournal is the journal as a worker that stopped sees it: its lease
// renewals never reach the store.
type deadJournal struct{ *journaldriver.Memory }

func (deadJournal) Renew(context.Context, journaldriver.Key, string, time.Duration) error { return nil }
func (deadJournal) RenewRun(context.Context, string, string, string, time.Duration) error {
	return nil
}

// TestTakeOver: a run whose worker stopped renewing its lease (here: stuck
// in a handler, its renewals lost, as a killed process's would be) is
// found by another worker sharing the journal, without being named, and
// finished there; the first worker's late result is refused; the records
// say who finished it; a second TakeOver finds nothing.
func TestTakeOver(t *testing.T) {
	mem := journaldriver.NewMemory()
	release := make(chan struct{})
	var runs atomic.Int32
	book := mustTool(t)(core.NewTool("book", "Books a table.", func(ctx context.Context, _ struct{}) (string, error) {
		if runs.Add(1) == 1 {
			<-release // the first worker is stuck here
		}
		return "booked", nil
	}, &core.ToolOptions{Idempotent: true}))
	tools, _ := core.NewToolbox(book)
	backend := coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "book", Arguments: json.RawMessage(`{}`)}}},
		{Text: `{{output "book"}}`},
	}}}}, &coretest.BackendOptions{Tools: tools})
	const lease = 300 * time.Millisecond // far longer than a run takes to reach its handler, even under -race
	dead := core.NewRunner(backend, tools, &core.Options{Journal: deadJournal{mem}, Owner: "dead", Lease: lease, Logger: quiet})
	alive := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "alive", Lease: lease, Logger: quiet})

	firstDone := make(chan error, 1)
	go func() {
		_, err := dead.Run(context.Background(), "book a table", nil)
		firstDone <- err
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if got, _ := alive.TakeOver(t.Context()); len(got) != 0 {
		t.Fatalf("TakeOver while the lease holds took %d runs (the first on thread %s), want none: worker alive stole a run worker dead holds, its lease live", len(got), got[0].Thread)
	}
	time.Sleep(lease + 20*time.Millisecond)
	got, err := alive.TakeOver(t.Context())
	if err != nil || len(got) != 1 || got[0].Text != "booked" {
		t.Fatalf("TakeOver = %+v, %v; want the run finished here", got, err)
	}
	close(release)
	if err := <-firstDone; !errors.Is(err, journaldriver.ErrLeaseLost) {
		t.Errorf("the stuck worker's run = %v, want its late result refused (lease lost)", err)
	}
	list, _ := mem.ListRuns(t.Context(), backend.Name(), "", 10)
	if len(list) != 1 || list[0].State != journaldriver.RunFinished || list[0].Owner != "alive" {
		t.Errorf("run records %+v, want one, finished by alive", list)
	}
	if again, err := alive.TakeOver(t.Context()); err != nil || len(again) != 0 {
		t.Errorf("a second TakeOver = %d runs, %v; want none", len(again), err)
	}
}

// stuckStart is a backend whose first Start waits for gate before it
// creates the thread, as a worker stuck (or killed) before its thread
// exists would.
type stuckStart struct {
	*coretest.Backend
	first         atomic.Bool
	entered, gate chan struct{}
}

func (b *stuckStart) Start(ctx context.Context, req *driver.StartRequest) (*driver.Step, error) {
	if b.first.CompareAndSwap(false, true) {
		close(b.entered)
		<-b.gate
	}
	return b.Backend.Start(ctx, req)
}

// TestTakeOverStart: a run whose worker stopped before its thread existed
// is recorded all the same (its input kept), and another worker, not told
// of it, starts it again on a thread of its own; the stopped worker, if it
// goes on after all, finds its run taken over, and runs nothing.
func TestTakeOverStart(t *testing.T) {
	mem := journaldriver.NewMemory()
	var runs atomic.Int32
	book := mustTool(t)(core.NewTool("book", "Books a table.", func(ctx context.Context, _ struct{}) (string, error) {
		runs.Add(1)
		return "booked", nil
	}, nil))
	tools, _ := core.NewToolbox(book)
	turn := coretest.Turn{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "book", Arguments: json.RawMessage(`{}`)}}},
		{Text: `{{output "book"}}`},
	}}
	backend := &stuckStart{
		Backend: coretest.NewBackend(&coretest.Script{Turns: []coretest.Turn{turn, turn}}, &coretest.BackendOptions{Tools: tools}),
		entered: make(chan struct{}), gate: make(chan struct{}),
	}
	const lease = 300 * time.Millisecond
	dead := core.NewRunner(backend, tools, &core.Options{Journal: deadJournal{mem}, Owner: "dead", Lease: lease, Logger: quiet})

	firstDone := make(chan error, 1)
	go func() {
		_, err := dead.Run(context.Background(), "book a table", &core.RunOptions{MaxSteps: 7})
		firstDone <- err
	}()
	<-backend.entered
	list, _ := mem.ListRuns(t.Context(), backend.Name(), "", 10)
	if len(list) != 1 || !strings.HasPrefix(list[0].Thread, "toolrelay-start:") || !strings.Contains(list[0].Options, `"input":"book a table"`) {
		t.Fatalf("records before the thread exists = %+v, want one start record keeping the input", list)
	}
	time.Sleep(lease + 20*time.Millisecond)
	var recovered []bool
	alive := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "alive", Lease: lease, Logger: quiet, Hooks: &core.Hooks{
		Run: func(ctx context.Context, info *core.RunInfo) (context.Context, func(*core.Result, error)) {
			recovered = append(recovered, info.TakenOver && !info.Resume)
			return ctx, nil
		}}})
	got, err := alive.TakeOver(t.Context())
	if err != nil || len(got) != 1 || got[0].Text != "booked" {
		t.Fatalf("TakeOver = %+v, %v; want the run started again and finished here", got, err)
	}
	if diff := cmp.Diff([]bool{true}, recovered); diff != "" {
		t.Errorf("RunInfo.TakenOver of a start taken over (-want +got):\n%s", diff)
	}
	close(backend.gate)
	if err := <-firstDone; !errors.Is(err, journaldriver.ErrLeaseLost) {
		t.Errorf("the stuck worker's run = %v, want it refused (lease lost)", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once (the stuck worker's thread must not go on)", n)
	}
	list, _ = mem.ListRuns(t.Context(), backend.Name(), "", 10)
	if len(list) != 1 || list[0].Thread != got[0].Thread || list[0].State != journaldriver.RunFinished || list[0].Owner != "alive" || strings.Contains(list[0].Options, "input") {
		t.Errorf("run records %+v, want one, on the new thread, finished by alive, its input dropped", list)
	}
}

// TestBlockedReaderTimeLimit (issue 30, item 8): a stream's reader that
// stops reading (it neither reads on nor breaks out) does not hold its run
// past the run's time limit: from then on the runner renews neither the
// run's lease nor its calls', so that another worker takes the run over
// at most a lease after the limit and finishes it, each call run once;
// the reader, when it reads again, gets the time limit's error, its late
// end refused.
func TestBlockedReaderTimeLimit(t *testing.T) {
	for _, at := range []core.EventKind{core.EventToolCall, core.EventCallStarted} {
		t.Run(at.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const (
					limit = 2 * time.Second
					lease = 3 * time.Second
				)
				mem := journaldriver.NewMemory()
				var runs atomic.Int32
				book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) {
					runs.Add(1)
					return "booked", nil
				}, &core.ToolOptions{Idempotent: true}))
				tools, _ := core.NewToolbox(book)
				backend := coretest.NewBackend(coretest.Simple("book", `{}`, "{{result 0}}"), &coretest.BackendOptions{Tools: tools})
				reader := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "reader", Lease: lease, RunTimeout: limit, Logger: quiet})
				defer reader.Close()
				other := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "other", Lease: lease, Logger: quiet})
				defer other.Close()

				blocked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
				unblock := sync.OnceFunc(func() { close(release) })
				defer unblock()
				go func() {
					st := reader.Stream(context.Background(), "book a table", nil)
					for ev := range st.Events() {
						if ev.Kind == at {
							close(blocked)
							<-release // the reader stops reading
						}
					}
					_, err := st.Result()
					done <- err
				}()
				<-blocked
				start := time.Now()
				var got []*core.Result
				for len(got) == 0 {
					if time.Since(start) > limit+2*lease {
						t.Fatalf("no other worker could take the run over %v after its time limit (%v; lease %v)", time.Since(start)-limit, limit, lease)
					}
					time.Sleep(lease / 10)
					var err error
					if got, err = other.TakeOver(t.Context()); err != nil {
						t.Fatalf("TakeOver: %v", err)
					}
				}
				if d := time.Since(start); d > limit+lease+lease/10 {
					t.Errorf("the run was taken over %v after it began, want at most the time limit and a lease (%v)", d, limit+lease)
				}
				if len(got) != 1 || got[0].Text != "booked" {
					t.Fatalf("TakeOver = %+v, want the run finished here", got)
				}
				unblock()
				if err := <-done; errcode.Of(err) != errcode.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the blocked reader's run = %v (code %v), want its time limit's error (DeadlineExceeded)", err, errcode.Of(err))
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want once", n)
				}
				list, _ := mem.ListRuns(t.Context(), backend.Name(), "", 10)
				if len(list) != 1 || list[0].State != journaldriver.RunFinished || list[0].Owner != "other" {
					t.Errorf("run records %+v, want one, finished by other", list)
				}
			})
		})
	}
}

// TestEnqueue (issue 30, item 12): a run recorded with Enqueue, by a
// process that then exits without running it, is started by another
// worker's TakeOver, not told of it, over the same store, with the
// enqueued step limit kept; its handler runs once, its record ends finished
// on its thread; the runs Enqueue cannot record are refused with a code.
func TestEnqueue(t *testing.T) {
	for name, open := range sharedStores("enqueue") {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) {
				runs.Add(1)
				return "booked", nil
			}, nil))
			tools, _ := core.NewToolbox(book)
			backend := coretest.NewBackend(coretest.Simple("book", `{}`, "{{result 0}}"), &coretest.BackendOptions{Tools: tools})
			j1, j2 := open(t)

			front := core.NewRunner(backend, tools, &core.Options{Journal: j1, Owner: "front", Logger: quiet})
			name, err := front.Enqueue(t.Context(), "book a table", &core.RunOptions{MaxSteps: 3})
			if err != nil {
				t.Fatal(err)
			}
			front.Close() // the process exits, having run nothing
			if got := backend.Received(); len(got) != 0 || runs.Load() != 0 {
				t.Fatalf("Enqueue sent %+v and ran %d handlers, want nothing", got, runs.Load())
			}
			list, _ := j2.(journaldriver.Runs).ListRuns(t.Context(), backend.Name(), "", 10)
			if len(list) != 1 || list[0].Thread != name || list[0].State != journaldriver.RunRunning || !strings.Contains(list[0].Options, `"max_steps":3,"input":"book a table"`) {
				t.Fatalf("records after Enqueue = %+v, want %s, running, keeping its input and step limit", list, name)
			}

			worker := core.NewRunner(backend, tools, &core.Options{Journal: j2, Owner: "worker", Logger: quiet})
			defer worker.Close()
			got, err := worker.TakeOver(t.Context())
			if err != nil || len(got) != 1 || got[0].Text != "booked" {
				t.Fatalf("TakeOver = %+v, %v; want the enqueued run started and finished here", got, err)
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want once", n)
			}
			list, _ = j2.(journaldriver.Runs).ListRuns(t.Context(), backend.Name(), "", 10)
			if len(list) != 1 || list[0].Thread != got[0].Thread || list[0].State != journaldriver.RunFinished || list[0].Owner != "worker" {
				t.Errorf("records after TakeOver = %+v, want one, on the run's thread, finished by worker", list)
			}
			if again, err := worker.TakeOver(t.Context()); err != nil || len(again) != 0 {
				t.Errorf("a second TakeOver = %d runs, %v; want none", len(again), err)
			}
		})
	}

	backend := coretest.NewBackend(coretest.Simple("book", `{}`, "{{result 0}}"), nil)
	own := core.NewRunner(backend, nil, &core.Options{Logger: quiet})
	if _, err := own.Enqueue(t.Context(), "book", nil); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("Enqueue over the runner's own journal = %v, want FailedPrecondition", err)
	}
	shared := core.NewRunner(backend, nil, &core.Options{Logger: quiet, Journal: journaldriver.NewMemory()})
	for _, opts := range []*core.RunOptions{{Thread: "thread_1"}, {Parts: []core.Part{core.ImagePart("https://example.com/a.png")}}} {
		if _, err := shared.Enqueue(t.Context(), "book", opts); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("Enqueue(%+v) = %v, want InvalidArgument", opts, err)
		}
	}
}

// TestTakeOverOneAtATime: a TakeOver claims one run at a time, and runs
// it before it claims the next: while a worker is busy with a run (here,
// a handler that takes three leases), the run it works on stays its own
// (its lease renewed), and another worker's TakeOver takes the next one
// meanwhile; each run is run once. (A TakeOver that claimed every run due
// at once held a backlog it was not working on: a worker killed in its
// first run stranded them all for another lease, and under a kill a
// second a fleet took 3 minutes to finish 6 of 40 runs.)
func TestTakeOverOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		mem := journaldriver.NewMemory()
		release := make(chan struct{})
		var runs atomic.Int32
		book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) {
			if runs.Add(1) == 1 {
				<-release
			}
			return "booked", nil
		}, nil))
		tools, _ := core.NewToolbox(book)
		script := coretest.Simple("book", `{}`, "{{result 0}}")
		script.Turns = append(script.Turns, script.Turns[0])
		backend := coretest.NewBackend(script, &coretest.BackendOptions{Tools: tools})
		front := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "front", Logger: quiet})
		for range 2 {
			if _, err := front.Enqueue(t.Context(), "book a table", nil); err != nil {
				t.Fatal(err)
			}
		}
		first := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "first", Lease: lease, Logger: quiet})
		defer first.Close()
		other := core.NewRunner(backend, tools, &core.Options{Journal: mem, Owner: "other", Lease: lease, Logger: quiet})
		defer other.Close()
		done := make(chan []*core.Result, 1)
		go func() {
			got, err := first.TakeOver(t.Context())
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		synctest.Wait() // first has claimed a run, and waits in its handler
		time.Sleep(3 * lease)
		got, err := other.TakeOver(t.Context())
		if err != nil || len(got) != 1 || got[0].Text != "booked" {
			t.Errorf("another worker's TakeOver = %+v (%v), want the run the first worker is not working on, finished", got, err)
		}
		close(release)
		if got := <-done; len(got) != 1 || got[0].Text != "booked" {
			t.Errorf("the first worker's TakeOver = %+v, want the one run it claimed, finished", got)
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want twice (once a run)", n)
		}
	})
}

// TestHandOver (issue 46, item 7): a run that fails with an error its
// RunOptions.HandOver says true of (here the service unavailable as its
// results are sent) is left running in the shared journal, its lease
// ended, and another worker's TakeOver finishes it, the call's handler not
// run again; without HandOver, or when it says false, the run is recorded
// failed and TakeOver finds nothing.
func TestHandOver(t *testing.T) {
	unavailable := func(err error) bool { return errcode.Of(err) == errcode.Unavailable }
	tests := []struct {
		name     string
		handOver func(error) bool
		want     journaldriver.RunState // the record after the failure
	}{
		{"handed over", unavailable, journaldriver.RunRunning},
		{"no HandOver", nil, journaldriver.RunFailed},
		{"HandOver says false", func(error) bool { return false }, journaldriver.RunFailed},
	}
	for name, open := range sharedStores("handover") {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				var runs atomic.Int32
				book := mustTool(t)(core.NewTool("book", "Books a table.", func(context.Context, struct{}) (string, error) {
					runs.Add(1)
					return "booked", nil
				}, nil))
				tools, _ := core.NewToolbox(book)
				var down atomic.Bool
				down.Store(true)
				backend := coretest.NewBackend(coretest.Simple("book", `{}`, "{{result 0}}"), &coretest.BackendOptions{Tools: tools,
					Fault: func(op string, _ int) error {
						if op == "submit" && down.Load() {
							return &errcode.Error{Code: errcode.Unavailable, Op: "coretest: submit", Err: errors.New("503 Service Unavailable")}
						}
						return nil
					}})
				j1, j2 := open(t)
				first := core.NewRunner(backend, tools, &core.Options{Journal: j1, Owner: "first", Logger: quiet})
				defer first.Close()
				res, err := first.Run(t.Context(), "book a table", &core.RunOptions{HandOver: tc.handOver})
				if errcode.Of(err) != errcode.Unavailable || res == nil {
					t.Fatalf("Run = %+v, %v; want Unavailable, with its thread", res, err)
				}
				list, _ := j2.(journaldriver.Runs).ListRuns(t.Context(), backend.Name(), "", 10)
				if len(list) != 1 || list[0].Thread != res.Thread || list[0].State != tc.want || (tc.want == journaldriver.RunRunning && list[0].LeaseUntil.After(time.Now())) {
					t.Fatalf("records after the failure = %+v, want one on %s, %s (running: its lease ended)", list, res.Thread, tc.want)
				}
				down.Store(false)
				worker := core.NewRunner(backend, tools, &core.Options{Journal: j2, Owner: "worker", Logger: quiet})
				defer worker.Close()
				got, err := worker.TakeOver(t.Context())
				if tc.want == journaldriver.RunFailed {
					if err != nil || len(got) != 0 {
						t.Errorf("TakeOver of a run recorded failed = %+v, %v; want nothing", got, err)
					}
					return
				}
				if err != nil || len(got) != 1 || got[0].Thread != res.Thread || got[0].Text != "booked" {
					t.Fatalf("TakeOver = %+v, %v; want the run of %s finished here", got, err, res.Thread)
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want once (its result journaled before the failure)", n)
				}
				list, _ = j2.(journaldriver.Runs).ListRuns(t.Context(), backend.Name(), "", 10)
				if len(list) != 1 || list[0].State != journaldriver.RunFinished || list[0].Owner != "worker" {
					t.Errorf("records after TakeOver = %+v, want one, finished by worker", list)
				}
			})
		}
	}
}
