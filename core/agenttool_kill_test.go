package core_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/journal/sqlitejournal"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// killRoleEnv, when set, makes TestAgentToolKilled the worker it kills:
// its value is the JSON of a killSetup.
const killRoleEnv = "TOOLRELAY_AGENTTOOL_KILL_WORKER"

// killLease is the lease of the runners' claims and runs: the dead
// worker's are taken over once it has passed.
const killLease = 500 * time.Millisecond

// killToken is the static bearer token of the Foundry fake.
const killToken = "kill-test-token"

// killSetup is what the worker process needs: where the journal, the
// effects file and the fakes are.
type killSetup struct {
	Journal, Effects string
	OpenAIURL        string // the child's fake, OpenAI sessions
	FoundryURL       string // the parent's fake, a Foundry project
	FoundryCA        string // a PEM file with the Foundry fake's certificate
	// Before kills the worker before the refund's effect, not after it;
	// Verify gives the refund tool a Verify hook that reads the effects.
	Before, Verify bool
}

// killOrder is the child's refund tool's arguments.
type killOrder struct {
	Order string `json:"order"`
}

// killScripts are the parent's (triage, on Foundry) and the child's
// (refunds, on OpenAI sessions) models.
var (
	killParentScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund_agent", Arguments: json.RawMessage(`{"input": "Refund order 7."}`)}}},
		{Text: `Triage: {{output "refund_agent"}}`},
	}}}}
	killChildScript = &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "refund", Arguments: json.RawMessage(`{"order": "7"}`)}}},
		{Text: `Refunds: {{output "refund"}}`},
	}}}}
)

// killRunners opens the parent runner over the Foundry fake, whose one
// tool is an agent tool over the child runner on the OpenAI fake, both on
// the SQLite journal of s; refund is the child's tool's handler, which
// is not idempotent (with s.Verify, its Verify hook finds the effect in
// the effects file).
func killRunners(t testing.TB, s killSetup, refund func(context.Context, killOrder) (string, error)) (parent, child *core.Runner, cleanup func()) {
	ctx := context.Background()
	j, err := sqlitejournal.Open(ctx, s.Journal, nil)
	if err != nil {
		t.Fatal(err)
	}
	var to core.ToolOptions
	if s.Verify {
		to.Verify = func(context.Context, core.Call) (any, bool, error) {
			b, err := os.ReadFile(s.Effects)
			if errors.Is(err, os.ErrNotExist) {
				return nil, false, nil
			}
			return "order 7 refunded (verified)", len(b) > 0, err
		}
	}
	refundTool, err := core.NewTool("refund", "Refunds an order.", refund, &to)
	if err != nil {
		t.Fatal(err)
	}
	childTools, _ := core.NewToolbox(refundTool)
	cb, err := openai.Open(ctx, childTools, &openai.Options{APIKey: "fake", BaseURL: s.OpenAIURL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	child = core.NewRunner(cb, childTools, &core.Options{Journal: j, Lease: killLease, Logger: quiet})
	agent, err := core.NewAgentTool("refund_agent", "Hands a refund to the refund agent.", child, nil)
	if err != nil {
		t.Fatal(err)
	}
	parentTools, _ := core.NewToolbox(agent)
	pem, err := os.ReadFile(s.FoundryCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("the Foundry fake's certificate does not parse")
	}
	pb, err := foundry.Open(ctx, parentTools, &foundry.Options{
		Endpoint: s.FoundryURL, Token: killToken, Keep: true, Logger: quiet,
		Definition: &foundry.AgentDefinition{Name: "triage", Model: foundry.DefaultModel},
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent = core.NewRunner(pb, parentTools, &core.Options{Journal: j, Lease: killLease, Logger: quiet})
	return parent, child, func() {
		parent.Close()
		child.Close()
		j.Close()
	}
}

// killWorker is the worker process: it runs the parent, whose child's
// refund writes its effect (unless s.Before), says on stdout that it is
// in the call and waits to be killed.
func killWorker(t *testing.T, setup string) {
	var s killSetup
	if err := json.Unmarshal([]byte(setup), &s); err != nil {
		t.Fatal(err)
	}
	parent, _, _ := killRunners(t, s, func(context.Context, killOrder) (string, error) {
		if !s.Before {
			if err := effect(s.Effects, "refunded in the worker"); err != nil {
				return "", err
			}
		}
		fmt.Println("IN CALL")
		select {} // killed here, the child's call in progress
	})
	res, err := parent.Run(context.Background(), "I want my money back for order 7.", nil)
	t.Fatalf("the worker's run returned (%+v, %v); it should have been killed", res, err)
}

// effect appends line to the effects file.
func effect(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, line)
	return f.Close()
}

// TestAgentToolKilled: a worker process runs a parent agent (Foundry)
// whose tool is a child agent (OpenAI sessions), both on one SQLite
// journal, against fakes this process serves; it is killed (SIGKILL)
// during the parent's call of the child. This process takes over the
// runs of both runners (TakeOver, as a worker of a fleet does): the
// parent answers, the child's fake saw one turn (one session, one input:
// the agent call run again resumed the child's turn, or started it if
// the killed worker's child had no thread yet), and the child's refund
// (not idempotent) took effect once. Killed after the refund's effect,
// the refund is in doubt (no Verify hook) or found done by its Verify
// hook, and not run again; killed before it, the hook finds nothing and
// it runs here.
func TestAgentToolKilled(t *testing.T) {
	if setup := os.Getenv(killRoleEnv); setup != "" {
		killWorker(t, setup)
		return
	}
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	const (
		beforeThread = iota // the child's session being created
		beforeEffect        // in the child's refund call, before its effect
		afterEffect         // in the child's refund call, after its effect
	)
	tests := []struct {
		name       string
		when       int
		verify     bool
		wantText   string // the parent's answer
		wantEffect string // the line of the effects file
	}{
		{"before the child's thread", beforeThread, false, "Triage: Refunds: refunded in the takeover", "refunded in the takeover"},
		{"after the effect", afterEffect, false,
			`Triage: Refunds: the outcome of this call of "refund" is unknown: it may or may not have taken effect, and it was not run again`, "refunded in the worker"},
		{"after the effect, verified", afterEffect, true, "Triage: Refunds: order 7 refunded (verified)", "refunded in the worker"},
		{"before the effect, verified", beforeEffect, true, "Triage: Refunds: refunded in the takeover", "refunded in the takeover"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Before the child's thread: the fake holds the worker's
			// request that creates the child's session, which the kill
			// cancels (nothing is created), and says so.
			held := make(chan struct{})
			var holding sync.Once
			childFake := openaitest.NewServer(killChildScript, &openaitest.Options{Fault: func(r *openaitest.Request) *openaitest.Fault {
				first := false
				if tt.when == beforeThread && r.Method == http.MethodPost && r.Path == "agents/sessions" {
					holding.Do(func() { first = true })
				}
				if !first {
					return nil
				}
				close(held)
				return &openaitest.Fault{Delay: time.Hour}
			}})
			t.Cleanup(childFake.Close)
			parentFake := foundrytest.NewServer(killParentScript, &foundrytest.Options{Token: killToken})
			t.Cleanup(parentFake.Close)
			dir := t.TempDir()
			s := killSetup{
				Journal: filepath.Join(dir, "journal.db"), Effects: filepath.Join(dir, "effects"),
				OpenAIURL: childFake.URL, FoundryURL: parentFake.ProjectEndpoint(), FoundryCA: filepath.Join(dir, "ca.pem"),
				Before: tt.when == beforeEffect, Verify: tt.verify,
			}
			if err := os.WriteFile(s.FoundryCA, parentFake.CertificatePEM(), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.when == beforeThread {
				killAt(t, s, held)
			} else {
				killAt(t, s, nil)
			}
			waitLeases(t, s.Journal)

			parent, child, cleanup := killRunners(t, s, func(context.Context, killOrder) (string, error) {
				if tt.when == afterEffect {
					t.Error("the child's refund ran again after the takeover")
				}
				return "refunded in the takeover", effect(s.Effects, "refunded in the takeover")
			})
			defer cleanup()
			// A worker of the fleet takes over every runner's runs, the
			// child runner's first: a child run taken over on its own must
			// not be a second child turn.
			if res, err := child.TakeOver(t.Context()); err != nil || len(res) > 0 {
				t.Logf("the child runner's TakeOver: %d runs, %v", len(res), err)
			}
			got, err := parent.TakeOver(t.Context())
			if err != nil {
				t.Fatalf("TakeOver: %v", err)
			}
			if res, err := child.TakeOver(t.Context()); err != nil || len(res) > 0 {
				t.Logf("the child runner's TakeOver after the parent's: %d runs, %v", len(res), err)
			}
			if len(got) != 1 {
				t.Fatalf("TakeOver = %d results, want 1", len(got))
			}
			if got[0].Text != tt.wantText {
				t.Errorf("the parent answered %q, want %q", got[0].Text, tt.wantText)
			}
			var inputs int
			for _, r := range childFake.Received() {
				if r.Kind == "input" {
					inputs++
				}
			}
			if n := len(childFake.Sessions()); n != 1 || inputs != 1 {
				t.Errorf("the child's fake has %d sessions and %d inputs, want one child turn (1 and 1)", n, inputs)
			}
			b, err := os.ReadFile(s.Effects)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), tt.wantEffect+"\n"; got != want {
				t.Errorf("the effects file holds %q, want %q: the refund took effect once", got, want)
			}
		})
	}
}

// waitLeases waits until every lease of a run recorded in the journal at
// path has passed, as a worker taking over a killed one's runs does.
func waitLeases(t *testing.T, path string) {
	t.Helper()
	j, err := sqlitejournal.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, err := j.ListRuns(t.Context(), "", journaldriver.RunRunning, 100)
		if err != nil {
			t.Fatal(err)
		}
		var until time.Time
		for _, r := range runs {
			if r.LeaseUntil.After(until) {
				until = r.LeaseUntil
			}
		}
		if time.Now().After(until) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed worker's leases did not pass in 30s: %+v", runs)
		}
		time.Sleep(time.Until(until) + 10*time.Millisecond)
	}
}

// killAt starts the worker of s and kills it (SIGKILL) once ready is
// closed, or, if ready is nil, once the worker says it is in the child's
// refund call.
func killAt(t *testing.T, s killSetup, ready <-chan struct{}) {
	t.Helper()
	setup, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentToolKilled$")
	cmd.Env = append(os.Environ(), killRoleEnv+"="+string(setup))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var output syncBuilder
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	inCall := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&output, sc.Text()) // the worker's test output, for a failure
			if sc.Text() == "IN CALL" {
				inCall <- true
			}
		}
		inCall <- false
	}()
	select {
	case ok := <-inCall:
		if !ok || ready != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the worker ended, or reached the refund call, before it was to be killed:\n%s", output.String())
		}
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not reach the point to kill it at in 30s:\n%s", output.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the worker ended with %v, want killed by SIGKILL", err)
	}
}

// syncBuilder is a strings.Builder safe for concurrent use.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
