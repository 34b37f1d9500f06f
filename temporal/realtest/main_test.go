package realtest

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/common/dynamicconfig"
	temporalserver "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/temporal"
)

// server is the Temporal server of the test binary, started once by
// TestMain; hostPort and namespace name it to the worker processes.
var (
	server    *temporaltest.TestServer
	hostPort  string
	namespace string
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(child(role))
	}
	server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: tlog.NewStructuredLogger(quiet)}),
		temporaltest.WithBaseServerOptions(temporalserver.WithDynamicConfigClient(serverConfig)))
	hostPort, namespace = server.GetFrontendHostPort(), server.GetDefaultNamespace()
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// Limits of the test server's histories, lowered from the defaults
// (51,200 events; continuing as new suggested at 4,096) so that
// TestLongTurn passes them in seconds; no other test comes near them.
const (
	historyCountError   = 2000
	historyCountSuggest = 500
)

// serverConfig is the test server's dynamic config: temporaltest's own
// (search attributes read through), and the lowered history limits.
var serverConfig = dynamicconfig.StaticClient{
	dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
	dynamicconfig.HistoryCountLimitError.Key():                  []dynamicconfig.ConstrainedValue{{Value: historyCountError}},
	dynamicconfig.HistoryCountSuggestContinueAsNew.Key():        []dynamicconfig.ConstrainedValue{{Value: historyCountSuggest}},
}

var queues atomic.Int64

// newQueue returns a task queue no other test uses.
func newQueue(t testing.TB) string {
	return fmt.Sprintf("%s-%d", t.Name(), queues.Add(1))
}

// dial returns a client of the test server.
func dial(t testing.TB) client.Client {
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: namespace, Logger: tlog.NewStructuredLogger(quiet)})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// startWorker runs a worker of the loop over r on queue, in this process,
// until the test ends.
func startWorker(t testing.TB, c client.Client, queue string, r *core.Runner) worker.Worker {
	return startWorkerWith(t, c, queue, r, worker.Options{})
}

// startWorkerWith is startWorker with the worker's options o.
func startWorkerWith(t testing.TB, c client.Client, queue string, r *core.Runner, o worker.Options) worker.Worker {
	w := worker.New(c, queue, o)
	temporal.Register(w, r)
	if err := w.Start(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// fastSettings are the loop's settings of the conformance suite: a 5 s
// heartbeat (the worker-death test uses 1 s). The SDK sends an attempt's
// heartbeats at most every 0.8 × the timeout, so at 1 s a pause of 200 ms
// on a loaded machine takes a working worker for dead, and retries its
// activity. A retried submit on a chain no longer sends the results again
// once the service named its response (TestChainSubmitRetried), but a
// blocking chain names it only when the model is done: there the retry
// still makes the model answer twice (Capabilities.LostAnswersRerun).
func fastSettings(o *core.Options) temporal.LoopOptions {
	s := temporal.LoopOptions{Heartbeat: 5 * time.Second, Idle: time.Minute}
	if o != nil {
		s.MaxSteps, s.Concurrency, s.RunTimeout, s.ApprovalTimeout, s.Budget = o.MaxSteps, o.Concurrency, o.RunTimeout, o.ApprovalTimeout, o.Budget
	}
	return s
}
