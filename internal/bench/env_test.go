package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// backends are the services every measure runs on.
var backends = []string{"openai", "foundry"}

// A fake is a fake service the benchmarks talk to, served by a child
// process (so that its memory and CPU are not the client's).
type fake struct {
	backend string
	url     string // openai: the base URL; foundry: the project endpoint
	client  *http.Client
}

// token is the bearer token (API key) the benchmarks send.
const token = "bench-token"

// transport returns the HTTP transport both the baselines and toolrelay
// use: it keeps as many idle connections as runs in flight, as a program
// with many concurrent runs would configure.
func transport(roots *x509.CertPool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 4096
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	return t
}

func certPool(tb testing.TB, pem []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		tb.Fatal("the fake's certificate does not parse")
	}
	return pool
}

// childFake is the environment variable that makes the test binary serve
// a fake instead of running tests: its value is the backend, and
// childScript names the file that holds the script.
const (
	childFake   = "TOOLRELAY_BENCH_FAKE"
	childScript = "TOOLRELAY_BENCH_SCRIPT"
	// childProfile, if set in the benchmarks' environment, makes every
	// child fake write a CPU profile of itself to <value>.<backend>.cpu.
	childProfile = "TOOLRELAY_BENCH_PROF"
)

func TestMain(m *testing.M) {
	if backend := os.Getenv(childFake); backend != "" {
		if err := serveChild(backend, os.Getenv(childScript)); err != nil {
			fmt.Fprintln(os.Stderr, "bench fake:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild serves a fake until its standard input closes, after
// printing its URL (and, for foundry, its certificate) on one JSON line.
func serveChild(backend, scriptPath string) error {
	script, err := coretest.LoadScript(scriptPath)
	if err != nil {
		return err
	}
	var hello struct{ URL, Cert string }
	switch backend {
	case "openai":
		srv := openaitest.NewServer(script, &openaitest.Options{APIKey: token})
		defer srv.Close()
		hello.URL = srv.URL
	case "foundry":
		srv := foundrytest.NewServer(script, &foundrytest.Options{Token: token})
		defer srv.Close()
		hello.URL, hello.Cert = srv.ProjectEndpoint(), string(srv.CertificatePEM())
	default:
		return fmt.Errorf("no backend %q", backend)
	}
	if err := json.NewEncoder(os.Stdout).Encode(hello); err != nil {
		return err
	}
	if prefix := os.Getenv(childProfile); prefix != "" {
		f, err := os.Create(prefix + "." + backend + ".cpu")
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// startChildFake starts a fake of backend playing script in a child
// process, and stops it at the end of the benchmark.
func startChildFake(tb testing.TB, backend string, script *coretest.Script) *fake {
	tb.Helper()
	js, err := json.Marshal(script)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "script.json")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childFake+"="+backend, childScript+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		tb.Fatalf("the fake did not start: %v", err)
	}
	var hello struct{ URL, Cert string }
	if err := json.Unmarshal(line, &hello); err != nil {
		tb.Fatalf("the fake said %q: %v", line, err)
	}
	f := &fake{backend: backend, url: hello.URL, client: &http.Client{Transport: transport(nil)}}
	if hello.Cert != "" {
		f.client = &http.Client{Transport: transport(certPool(tb, []byte(hello.Cert)))}
	}
	return f
}

// quiet discards the backends' own log messages.
var quiet = slog.New(slog.DiscardHandler)

// A flow runs turns on one fake, through one of the clients compared.
type flow struct {
	// turn runs one turn on thread ("" for a new one) and returns the
	// thread and the answer.
	turn  func(ctx context.Context, thread, input string) (string, string, error)
	close func()
	// stats, if set, returns the counts of toolrelay's journal.
	stats func() journaldriver.Stats
}

// agentName is the name of the Foundry agent the benchmarks create.
const agentName = "bench-agent"

// rawClient returns an openai-go client for the fake: the sessions API,
// or the Foundry project's OpenAI-compatible routes.
func (f *fake) rawClient() oai.Client {
	base := f.url
	if f.backend == "foundry" {
		base += "/openai/v1/"
	}
	return oai.NewClient(option.WithBaseURL(base), option.WithAPIKey(token), option.WithHTTPClient(f.client))
}

// agent creates the agent every flow on f uses, with the tools of tools,
// and returns its id (openai) or name (foundry).
func (f *fake) agent(tb testing.TB, tools *core.Toolbox) string {
	tb.Helper()
	ctx := context.Background()
	if f.backend == "foundry" {
		b, err := foundry.Open(ctx, tools, &foundry.Options{
			Endpoint: f.url, Token: token, HTTPClient: f.client, Keep: true, Logger: quiet,
			Definition: &foundry.AgentDefinition{Name: agentName, Model: "gpt-4.1-mini"},
		})
		if err != nil {
			tb.Fatal(err)
		}
		b.Close()
		return agentName
	}
	c := f.rawClient()
	p := oai.BetaAgentNewParams{Model: "gpt-4.1-mini", Name: oai.String("bench")}
	for _, t := range tools.Tools() {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters(), &schema); err != nil {
			tb.Fatal(err)
		}
		p.Tools = append(p.Tools, oai.PersistedAgentToolParamUnion{OfParamFunction: &oai.PersistedAgentToolParamFunction{
			Name: t.Name(), Description: t.Description(), Parameters: schema,
		}})
	}
	a, err := c.Beta.Agents.New(ctx, p)
	if err != nil {
		tb.Fatal(err)
	}
	return a.ID
}

// raw returns the raw loop's flow on f.
func (f *fake) raw(agent string, fns map[string]Func) *flow {
	c := f.rawClient()
	run := RawSession
	if f.backend == "foundry" {
		run = RawFoundry
	}
	return &flow{
		turn: func(ctx context.Context, thread, input string) (string, string, error) {
			return run(ctx, &c, agent, thread, input, fns)
		},
		close: func() {},
	}
}

// helper returns the official helper's flow on f (sessions only): a new
// thread is made by the raw loop, later turns by the helper.
func (f *fake) helper(agent string, fns map[string]Func) *flow {
	c := f.rawClient()
	return &flow{
		turn: func(ctx context.Context, thread, input string) (string, string, error) {
			if thread == "" {
				return RawSession(ctx, &c, agent, thread, input, fns)
			}
			text, err := HelperTurn(ctx, &c, thread, input, fns)
			return thread, text, err
		},
		close: func() {},
	}
}

// floor returns the floor's flow on f (see FloorSession): a new thread is
// made by the raw loop, later turns by the floor.
func (f *fake) floor(agent string, fns map[string]Func) *flow {
	c := f.rawClient()
	return &flow{
		turn: func(ctx context.Context, thread, input string) (string, string, error) {
			switch {
			case thread == "" && f.backend == "foundry":
				return RawFoundry(ctx, &c, agent, thread, input, fns)
			case thread == "":
				return RawSession(ctx, &c, agent, thread, input, fns)
			case f.backend == "foundry":
				text, err := FloorFoundry(ctx, f.client, f.url, token, agent, thread, input, fns)
				return thread, text, err
			}
			text, err := FloorSession(ctx, f.client, f.url, token, thread, input, fns)
			return thread, text, err
		},
		close: func() {},
	}
}

// backendOf opens toolrelay's backend on f for agent, with the Foundry
// transport transport.
func (f *fake) backendOf(tb testing.TB, agent string, tools *core.Toolbox, transport foundry.Delivery) driver.Backend {
	tb.Helper()
	ctx := context.Background()
	var b driver.Backend
	var err error
	switch f.backend {
	case "openai":
		b, err = openai.Open(ctx, tools, &openai.Options{
			BaseURL: f.url, APIKey: token, Agent: agent, HTTPClient: f.client, Keep: true, Logger: quiet,
		})
	case "foundry":
		b, err = foundry.Open(ctx, tools, &foundry.Options{
			Endpoint: f.url, Token: token, Agent: agent, HTTPClient: f.client, Keep: true, Logger: quiet, Delivery: transport,
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// toolrelay returns toolrelay's flow on f, with the runner options opts
// (nil: the defaults).
func (f *fake) toolrelay(tb testing.TB, agent string, tools *core.Toolbox, opts *core.Options) *flow {
	tb.Helper()
	r := core.NewRunner(f.backendOf(tb, agent, tools, foundry.Blocking), tools, opts)
	return &flow{
		turn: func(ctx context.Context, thread, input string) (string, string, error) {
			res, err := r.Run(ctx, input, &core.RunOptions{Thread: thread})
			if err != nil {
				return thread, "", err
			}
			return res.Thread, res.Text, nil
		},
		close: func() { r.Close() },
	}
}
