package journaltest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

// Race has one owner per journal in journals race for the same n calls,
// as workers that resume the same threads after a crash do, and checks that
// each call is won by exactly one owner and that every call ends finished
// with its winner's result. The journals must share one store: pass several
// handles on it (separate connections or pools, as separate processes would
// have), or the same journal several times.
//
// Half of the calls are fresh, so the owners race to Claim them; the other
// half were claimed by an owner that died (their lease has expired), so the
// owners race to TakeOver them. Each owner finishes the calls it wins and
// then marks them submitted, all in one MarkSubmitted; the marks are
// checked through the winner's journal, which may write them later, but
// before its next read.
func Race(t *testing.T, journals []driver.Journal, n int) {
	t.Helper()
	ctx := t.Context()
	keys := make([]driver.Key, n)
	for i := range keys {
		keys[i] = driver.Key{Backend: "journaltest", Thread: fmt.Sprintf("race-thread-%d", i%7), Turn: "turn-1", Call: fmt.Sprintf("call-%04d", i)}
		if i%2 == 0 {
			k := keys[i]
			if _, _, err := journals[0].Claim(ctx, k, digest(k), idem(k), "dead-owner", expired); err != nil {
				t.Fatalf("Claim by the dead owner: %v", err)
			}
		}
	}

	var mu sync.Mutex
	wins := make([][]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w, j := range journals {
		owner := fmt.Sprintf("worker-%d", w)
		wg.Go(func() {
			<-start
			var won []driver.Key
			for step := range n {
				// Even workers go up the list, odd ones down, so that every call
				// is raced for by owners arriving at once and from both sides.
				i := step
				if w%2 == 1 {
					i = n - 1 - step
				}
				k := keys[i]
				e, created, err := j.Claim(ctx, k, digest(k), idem(k), owner, live)
				if err != nil {
					t.Errorf("%s: Claim(%s): %v", owner, k.Call, err)
					return
				}
				if e.Digest != digest(k) {
					t.Errorf("%s: Claim(%s) returned digest %q, want %q", owner, k.Call, e.Digest, digest(k))
				}
				ok := created
				if !created && e.State == driver.Started && !time.Now().Before(e.LeaseUntil) {
					if ok, err = j.TakeOver(ctx, k, owner, live); err != nil {
						t.Errorf("%s: TakeOver(%s): %v", owner, k.Call, err)
						return
					}
				}
				if !ok {
					continue
				}
				mu.Lock()
				wins[i] = append(wins[i], owner)
				mu.Unlock()
				if err := j.Finish(ctx, k, owner, textResult(owner)); err != nil {
					t.Errorf("%s: Finish(%s) of a call it won: %v", owner, k.Call, err)
					return
				}
				won = append(won, k)
			}
			if err := j.MarkSubmitted(ctx, won); err != nil {
				t.Errorf("%s: MarkSubmitted of %d calls: %v", owner, len(won), err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	perOwner := map[string]int{}
	for i, k := range keys {
		if len(wins[i]) != 1 {
			t.Errorf("%s won by %v, want exactly one owner", k.Call, wins[i])
			continue
		}
		winner := wins[i][0]
		perOwner[winner]++
		var w int
		fmt.Sscanf(winner, "worker-%d", &w)
		e := mustGet(t, journals[w], k)
		if e.State != driver.Submitted || e.Owner != winner || e.Result == nil || e.Result.Output.Text != winner {
			t.Errorf("%s at the end: state %v, owner %q, result %+v; want submitted, %s's result", k.Call, e.State, e.Owner, e.Result, winner)
		}
	}
	t.Logf("%d calls won per owner: %v", n, perOwner)
}
