package core

import (
	"context"
	"runtime/pprof"
	"sync"
	"sync/atomic"
)

// workers are the goroutines a runner keeps for the calls of its steps
// that run side by side (see stepRun.runCalls). A goroutine's stack starts
// small and is copied each time it doubles; a call, with its arguments'
// validation (jsonschema's recursive walk) and the journal's encoding,
// grows it several times, which cost more than a quarter of the CPU time
// of a step of eight calls (runtime.newstack in a profile of
// BenchmarkTracingCalls/calls=8/off). A call run by a worker that ran one
// before starts on the stack that call grew.
//
// A worker waits for its next call until the runner is closed; at most
// max are kept: two for each call the runner's Concurrency lets run at
// once (the call's, and its handler's: see Tool.invoke), bounded by
// maxWorkers. A call that finds none idle and the bound reached runs on a
// goroutine of its own, as before.
type workers struct {
	work chan job // unbuffered: a send succeeds only to an idle worker
	done chan struct{}
	once sync.Once
	n    atomic.Int32 // workers alive
	max  int32
}

// maxWorkers bounds the goroutines a runner keeps, whatever its
// Concurrency.
const maxWorkers = 64

func newWorkers(concurrency int) *workers {
	return &workers{work: make(chan job), done: make(chan struct{}), max: int32(min(2*concurrency, maxWorkers))}
}

// do runs f on a worker: an idle one, a new one if fewer than max are
// alive, else a goroutine that ends with f. The goroutine's profiler
// labels are ctx's (see pprof.Do), as a goroutine started where ctx is
// has them.
func (w *workers) do(ctx context.Context, f func()) {
	select {
	case w.work <- job{ctx, f}:
		return
	case <-w.done:
		go f()
		return
	default:
	}
	if w.n.Add(1) <= w.max {
		go w.loop(f)
		return
	}
	w.n.Add(-1)
	go f()
}

// A job is a call handed to an idle worker, with the context whose
// profiler labels it runs under.
type job struct {
	ctx context.Context
	f   func()
}

// loop runs f, then the jobs handed to the worker, until the runner is
// closed.
func (w *workers) loop(f func()) {
	defer w.n.Add(-1)
	for {
		f()
		select {
		case j := <-w.work:
			pprof.SetGoroutineLabels(j.ctx)
			f = j.f
		case <-w.done:
			return
		}
	}
}

// close lets the idle workers end, and the others once their call has;
// calls after it run on goroutines of their own.
func (w *workers) close() {
	w.once.Do(func() { close(w.done) })
}
