package group

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type testWrite struct {
	Op
	name string
}

func (*testWrite) Err() error { return nil }

// recorder is a queue whose Run records its batches' writes, holding the
// first batch until release is closed.
type recorder struct {
	q       Queue[*testWrite]
	mu      sync.Mutex
	batches [][]string
	started chan struct{}
	release chan struct{}
}

func newRecorder(max int) *recorder {
	r := &recorder{started: make(chan struct{}), release: make(chan struct{})}
	first := true
	r.q = Queue[*testWrite]{Max: max, Run: func(batch []*testWrite) {
		if first {
			first = false
			close(r.started)
			<-r.release
		}
		var names []string
		for _, w := range batch {
			names = append(names, w.name)
		}
		r.mu.Lock()
		r.batches = append(r.batches, names)
		r.mu.Unlock()
	}, Empty: func() *testWrite { return &testWrite{name: "empty"} }}
	return r
}

// TestQueue checks the batches: the writes queued behind one under way go
// together into the next (Later's first, at most Max from the queue), a
// withdrawn write is never made, Settle waits for the writes handed to
// Later, and Close fails the writes still queued.
func TestQueue(t *testing.T) {
	r := newRecorder(2)
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	do := func(ctx context.Context, name string) {
		wg.Go(func() {
			err := r.q.Do(ctx, &testWrite{name: name})
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	waitLen := func(n int) {
		for r.q.Len() < n {
			runtime.Gosched()
		}
	}
	do(t.Context(), "held")
	<-r.started
	ctx, cancel := context.WithCancel(t.Context())
	do(t.Context(), "a")
	waitLen(1)
	withdrawn := make(chan error, 1)
	go func() { withdrawn <- r.q.Do(ctx, &testWrite{name: "withdrawn"}) }()
	waitLen(2)
	for i, name := range []string{"b", "c"} {
		do(t.Context(), name)
		waitLen(3 + i)
	}
	cancel()
	if err := <-withdrawn; !errors.Is(err, context.Canceled) {
		t.Errorf("withdrawn write: %v, want context.Canceled", err)
	}
	r.q.Later(&testWrite{name: "later"})
	close(r.release)
	wg.Wait()
	want := [][]string{{"held"}, {"later", "a", "b"}, {"c"}}
	if diff := cmp.Diff(want, r.batches); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	for _, name := range []string{"held", "a", "b", "c"} {
		if errs[name] != nil {
			t.Errorf("%s: %v", name, errs[name])
		}
	}

	// Settle: a write handed to Later is made before Settle returns, in a
	// batch of its own (with the empty write) when none comes.
	r.q.Later(&testWrite{name: "settled"})
	if err := r.q.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"settled", "empty"}, r.batches[len(r.batches)-1]); diff != "" {
		t.Errorf("batch made by Settle (-want +got):\n%s", diff)
	}

	// Close: the batch under way ends; the queued write fails; later ones too.
	r2 := newRecorder(10)
	wg.Go(func() { r2.q.Do(t.Context(), &testWrite{name: "held"}) })
	<-r2.started
	queued := make(chan error, 1)
	go func() { queued <- r2.q.Do(t.Context(), &testWrite{name: "queued"}) }()
	for r2.q.Len() < 1 {
		runtime.Gosched()
	}
	closed := make(chan struct{})
	go func() { r2.q.Close(); close(closed) }()
	for !r2.q.Closed() {
		runtime.Gosched()
	}
	close(r2.release)
	<-closed
	wg.Wait()
	if err := <-queued; !errors.Is(err, ErrClosed) {
		t.Errorf("write queued at Close: %v, want ErrClosed", err)
	}
	if err := r2.q.Do(t.Context(), &testWrite{name: "late"}); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	if diff := cmp.Diff([][]string{{"held"}}, r2.batches); diff != "" {
		t.Errorf("batches after Close (-want +got):\n%s", diff)
	}
}
