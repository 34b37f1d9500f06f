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
// the SQLite journal of s; refund is the child's tool's handler.
func killRunners(t testing.TB, s killSetup, refund func(context.Context, killOrder) (string, error)) (parent *core.Runner, cleanup func()) {
	ctx := context.Background()
	j, err := sqlitejournal.Open(ctx, s.Journal, nil)
	if err != nil {
		t.Fatal(err)
	}
	refundTool, err := core.NewTool("refund", "Refunds an order.", refund, nil) // not idempotent
	if err != nil {
		t.Fatal(err)
	}
	childTools, _ := core.NewToolbox(refundTool)
	cb, err := openai.Open(ctx, childTools, &openai.Options{APIKey: "fake", BaseURL: s.OpenAIURL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	child := core.NewRunner(cb, childTools, &core.Options{Journal: j, Lease: killLease, Logger: quiet})
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
	return parent, func() {
		parent.Close()
		child.Close()
		j.Close()
	}
}

// killWorker is the worker process: it runs the parent, whose child's
// refund writes its effect, says so on stdout and waits to be killed.
func killWorker(t *testing.T, setup string) {
	var s killSetup
	if err := json.Unmarshal([]byte(setup), &s); err != nil {
		t.Fatal(err)
	}
	parent, _ := killRunners(t, s, func(context.Context, killOrder) (string, error) {
		f, err := os.OpenFile(s.Effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(f, "refunded in the worker")
		if err := f.Close(); err != nil {
			return "", err
		}
		fmt.Println("EFFECT")
		select {} // killed here, the child's call in progress
	})
	res, err := parent.Run(context.Background(), "I want my money back for order 7.", nil)
	t.Fatalf("the worker's run returned (%+v, %v); it should have been killed", res, err)
}

// TestAgentToolKilled: a worker process runs a parent agent (Foundry)
// whose tool is a child agent (OpenAI sessions), both on one SQLite
// journal, against fakes this process serves; it is killed (SIGKILL)
// while the child's call of its own tool is in progress, after that
// tool's effect. This process takes the run over: the parent answers,
// the child's fake saw one turn (one session, one input) and the effect
// happened once (the child's call, not idempotent, is in doubt, not run
// again).
func TestAgentToolKilled(t *testing.T) {
	if setup := os.Getenv(killRoleEnv); setup != "" {
		killWorker(t, setup)
		return
	}
	if testing.Short() {
		t.Skip("spawns a worker process")
	}
	childFake := openaitest.NewServer(killChildScript, nil)
	t.Cleanup(childFake.Close)
	parentFake := foundrytest.NewServer(killParentScript, &foundrytest.Options{Token: killToken})
	t.Cleanup(parentFake.Close)
	dir := t.TempDir()
	s := killSetup{
		Journal: filepath.Join(dir, "journal.db"), Effects: filepath.Join(dir, "effects"),
		OpenAIURL: childFake.URL, FoundryURL: parentFake.ProjectEndpoint(), FoundryCA: filepath.Join(dir, "ca.pem"),
	}
	if err := os.WriteFile(s.FoundryCA, parentFake.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	setup, _ := json.Marshal(s)

	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentToolKilled$")
	cmd.Env = append(os.Environ(), killRoleEnv+"="+string(setup))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	effect := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&stderr, sc.Text()) // the worker's test output, for a failure
			if sc.Text() == "EFFECT" {
				effect <- true
				return
			}
		}
		effect <- false
	}()
	select {
	case ok := <-effect:
		if !ok {
			cmd.Wait()
			t.Fatalf("the worker ended before the child's call took effect:\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker's child call took no effect in 30s:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the worker ended with %v, want killed by SIGKILL", err)
	}

	parent, cleanup := killRunners(t, s, func(context.Context, killOrder) (string, error) {
		t.Error("the child's refund ran again after the takeover")
		return "refunded again", nil
	})
	defer cleanup()
	var got []*core.Result
	deadline := time.Now().Add(30 * time.Second)
	for len(got) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no run to take over 30s after the worker was killed")
		}
		time.Sleep(killLease / 5) // until the dead worker's lease has passed
		got, err = parent.TakeOver(t.Context())
		if err != nil {
			t.Fatalf("TakeOver: %v", err)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0].Text, "Triage: Refunds: ") {
		t.Fatalf("TakeOver = %d results (%+v), want the parent's answer", len(got), got[0])
	}
	t.Logf("the parent's answer: %s", got[0].Text)
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
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Errorf("the refund took effect %d times, want once:\n%s", n, b)
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
