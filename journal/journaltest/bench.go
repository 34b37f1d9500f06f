package journaltest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/journal/driver"
)

// Benchmark measures what the runner's journal writes cost per call: Claim
// before the handler runs, Finish before the result is sent, MarkSubmitted
// once the service accepted it. Each iteration (op) is one call, with a key
// of its own. Its sub-benchmarks:
//
//   - Call: steps of one call, one after the other.
//   - Step8: steps of eight calls, claimed and finished concurrently (as
//     the runner runs the calls of a step), then marked submitted together.
//   - Parallel: steps of one call from many goroutines at once
//     (b.RunParallel, eight per GOMAXPROCS), as concurrent runs make them;
//     ns/op is then wall time divided by calls.
//   - CallFenced: Call, each claim fenced by a run's record
//     ([driver.Fenced]), as the runner claims the calls of a recorded run;
//     only for journals that keep runs and fence claims. Call is its
//     baseline.
func Benchmark(b *testing.B, j driver.Journal) {
	thread := "bench-" + rand.Text()
	var next atomic.Int64
	newKey := func() driver.Key {
		return driver.Key{Backend: "journaltest", Thread: thread, Turn: "turn-1", Call: "call-" + strconv.FormatInt(next.Add(1), 10)}
	}
	result := textResult(`{"location":"Paris","temperature":21,"unit":"C"}`)
	fenced, _ := j.(driver.Fenced)
	fence := "" // the thread of the run whose record fences the claims, if any
	call := func(ctx context.Context, k driver.Key) error {
		d := digest(k)
		claim := func() (driver.Entry, bool, error) {
			return j.Claim(ctx, k, d, driver.IdempotencyKey(k, d), "bench-owner", core.DefaultLease)
		}
		if fence != "" {
			claim = func() (driver.Entry, bool, error) {
				return fenced.ClaimFenced(ctx, driver.ClaimRequest{Key: k, Digest: d, IdempotencyKey: driver.IdempotencyKey(k, d), Owner: "bench-owner", Lease: core.DefaultLease, Run: fence})
			}
		}
		if _, created, err := claim(); err != nil || !created {
			return fmt.Errorf("Claim = %v, %v; want created", created, err)
		}
		if err := j.Finish(ctx, k, "bench-owner", result); err != nil {
			return fmt.Errorf("Finish: %w", err)
		}
		return nil
	}
	// run makes the journal writes of one step, its calls concurrently.
	run := func(ctx context.Context, keys []driver.Key) error {
		if len(keys) == 1 {
			if err := call(ctx, keys[0]); err != nil {
				return err
			}
		} else {
			errs := make([]error, len(keys))
			var wg sync.WaitGroup
			for i, k := range keys {
				wg.Go(func() { errs[i] = call(ctx, k) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return err
			}
		}
		if err := j.MarkSubmitted(ctx, keys); err != nil {
			return fmt.Errorf("MarkSubmitted: %w", err)
		}
		return nil
	}

	b.Run("Call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := run(b.Context(), []driver.Key{newKey()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Step8", func(b *testing.B) {
		b.ReportAllocs()
		keys := make([]driver.Key, 0, 8)
		for i := 0; i < b.N; i += len(keys) {
			keys = keys[:0]
			for range min(8, b.N-i) {
				keys = append(keys, newKey())
			}
			if err := run(b.Context(), keys); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := run(b.Context(), []driver.Key{newKey()}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	runs, ok := j.(driver.Runs)
	if fenced == nil || !ok {
		return
	}
	b.Run("CallFenced", func(b *testing.B) {
		b.ReportAllocs()
		err := runs.PutRun(b.Context(), driver.Run{Backend: "journaltest", Thread: thread, State: driver.RunRunning, Owner: "bench-owner", LeaseUntil: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		fence = thread
		defer func() { fence = "" }()
		for b.Loop() {
			if err := run(b.Context(), []driver.Key{newKey()}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
