package journal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/toolrelay/toolrelay/journal/driver"
)

// A Pruner prunes a journal periodically; see [StartPruning].
type Pruner struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// PruneEvery returns how often a [Pruner] keeping entries for retention
// prunes: a tenth of retention, but at least a minute and at most an hour
// apart.
func PruneEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Minute), time.Hour)
}

// StartPruning prunes j of the entries finished longer than retention ago
// (see [driver.Journal.Prune]): at once, then every [PruneEvery](retention),
// until the Pruner is closed. Failures go to logger (nil means
// slog.Default()); pruning goes on at the next tick.
func StartPruning(j driver.Journal, retention time.Duration, logger *slog.Logger) *Pruner {
	if logger == nil {
		logger = slog.Default()
	}
	p := &Pruner{stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-p.stop
		cancel()
	}()
	go func() {
		defer close(p.done)
		t := time.NewTicker(PruneEvery(retention))
		defer t.Stop()
		for {
			n, err := j.Prune(ctx, time.Now().Add(-retention))
			if err != nil && ctx.Err() == nil {
				logger.Warn("toolrelay: journal pruning failed", "error", err)
			} else if n > 0 {
				logger.Debug("toolrelay: journal pruned", "entries", n, "retention", retention)
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p
}

// Close stops the pruning, interrupting a Prune under way, and returns
// once it has stopped. It always returns nil.
func (p *Pruner) Close() error {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	return nil
}
