package crashtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/journal/pgjournal"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

const postgresEnv = "TOOLRELAY_TEST_POSTGRES"

// TestWorkersShareCalls leaves 10 sessions each waiting for 100 calls (a
// worker crashed before running any), then lets four workers, each with
// its own backend and its own PostgreSQL pool on one journal, resume all
// of them at once. Every call's handler must run exactly once, and every
// session must complete with every call answered.
func TestWorkersShareCalls(t *testing.T) {
	url := os.Getenv(postgresEnv)
	if url == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL workers test (set it to a database URL, such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", postgresEnv)
	}
	const sessions, calls, workers = 10, 100, 4
	var step coretest.Step
	for i := range calls {
		step.Calls = append(step.Calls, coretest.Call{Name: "charge", Arguments: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
	}
	script := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{step, {Text: "charged {{result 0}} … {{result 99}}"}}}}}
	srv := openaitest.NewServer(script, nil)
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	runs := map[string]int{} // session/call → handler runs
	charge, err := core.NewTool("charge", "Charges a card.", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		call, _ := core.CallFromContext(ctx)
		mu.Lock()
		runs[call.Thread+"/"+call.ID]++
		mu.Unlock()
		return fmt.Sprintf("charge %d", in.N), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := core.NewToolbox(charge)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *openai.Backend {
		b, err := openai.Open(t.Context(), tools, &openai.Options{BaseURL: srv.URL, APIKey: "test-key", Keep: true, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}

	// The crashed worker: it started the sessions and ran nothing.
	first := open()
	var threads []string
	for range sessions {
		step, err := first.Start(t.Context(), &driver.StartRequest{Input: "charge them all"})
		if err != nil || len(step.Calls) != calls {
			t.Fatalf("Start = %v, %v; want %d pending calls", step, err, calls)
		}
		threads = append(threads, step.Thread)
	}

	schema := "toolrelay_workers_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(context.Background())
		}
	})
	type outcome struct {
		worker int
		thread string
		res    *core.Result
		err    error
	}
	results := make(chan outcome, workers*sessions)
	var ran, reused [workers]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		j, err := pgjournal.Open(t.Context(), url, &pgjournal.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		r := core.NewRunner(open(), tools, &core.Options{Journal: j, Owner: fmt.Sprintf("worker-%d", w), Logger: quiet, OnEvent: func(e core.Event) {
			switch e.Kind {
			case core.EventCallFinished:
				ran[w].Add(1)
			case core.EventCallReused:
				reused[w].Add(1)
			}
		}})
		for _, th := range threads {
			wg.Go(func() {
				res, err := r.Resume(t.Context(), th, nil)
				results <- outcome{w, th, res, err}
			})
		}
	}
	wg.Wait()
	close(results)

	done := map[string]bool{}
	for o := range results {
		if o.err != nil {
			t.Errorf("worker %d, session %s: %v", o.worker, o.thread, o.err)
			continue
		}
		if o.res.Text != "charged charge 0 … charge 99" {
			t.Errorf("worker %d, session %s: answer %q", o.worker, o.thread, o.res.Text)
		}
		done[o.thread] = true
	}
	for w := range workers {
		t.Logf("worker %d ran %d calls and sent %d results others ran", w, ran[w].Load(), reused[w].Load())
	}
	if len(done) != sessions {
		t.Errorf("%d of %d sessions completed", len(done), sessions)
	}
	if len(runs) != sessions*calls {
		t.Errorf("%d calls ran, want %d", len(runs), sessions*calls)
	}
	for k, n := range runs {
		if n != 1 {
			t.Errorf("call %s ran %d times", k, n)
		}
	}
	// Every call's result reached the service, with the same output each
	// time it was sent.
	got := map[string]string{}
	for _, rec := range srv.Received() {
		for _, d := range rec.Results {
			k := rec.Thread + "/" + d.CallID
			if prev, ok := got[k]; ok && prev != d.Output {
				t.Errorf("call %s answered %q, then %q", k, prev, d.Output)
			}
			got[k] = d.Output
		}
	}
	if len(got) != sessions*calls {
		t.Errorf("the service received results for %d calls, want %d", len(got), sessions*calls)
	}
}
