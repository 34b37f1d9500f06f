package leaktest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	"github.com/toolrelay/toolrelay/journal"
	"github.com/toolrelay/toolrelay/journal/pgjournal"
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal" // sqlite: journals
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// The planted secrets, one per setting, each distinct so that a leak
// names its source.
const (
	secOpenAIKey       = "PLANTED-openai-api-key"       // openai.Options.APIKey
	secOpenAIEnvKey    = "PLANTED-openai-env-key"       // OPENAI_API_KEY
	secOpenAIBaseURL   = "PLANTED-openai-base-url"      // a secret in the base URL
	secFoundryToken    = "PLANTED-foundry-token"        // foundry.Options.Token
	secFoundryEnvToken = "PLANTED-agent-token-env"      // AGENT_TOKEN
	secFoundryKey      = "PLANTED-foundry-api-key"      // foundry.Options.APIKey
	secFoundryEnvKey   = "PLANTED-foundry-api-key-env"  // TOOLRELAY_FOUNDRY_API_KEY
	secCredential      = "PLANTED-credential-token"     // tokens of foundry.Options.Credential
	secEndpoint        = "PLANTED-endpoint"             // a secret in the project endpoint
	secResponsesKey    = "PLANTED-responses-api-key"    // trresponses.Options.APIKey
	secJournalUser     = "PLANTED-journal-userinfo"     // postgres://u:secret@…
	secJournalQuery    = "PLANTED-journal-query"        // postgres://…?password=secret
	secJournalSSL      = "PLANTED-journal-sslpassword"  // postgres://…?sslpassword=secret
	secJournalKV       = "PLANTED-journal-keyvalue"     // host=… password=secret
	secJournalKVSpaced = "PLANTED-journal-kv-spaced"    // host=… password = secret
	secJournalQuoted   = "PLANTED-journal-kv-quoted"    // host=… password='… secret'
	secJournalSQLite   = "PLANTED-journal-sqlite-param" // sqlite:…?password=secret
	secJournalBadPort  = "PLANTED-journal-bad-port"     // postgres://…:abc/…?password=secret
	secJournalEnv      = "PLANTED-journal-env"          // TOOLRELAY_JOURNAL
	secJournalAfter    = "PLANTED-journal-after-empty"  // host= password=secret: pgx reads host "password=secret"
)

var planted = []string{
	secOpenAIKey, secOpenAIEnvKey, secOpenAIBaseURL, secFoundryToken, secFoundryEnvToken,
	secFoundryKey, secFoundryEnvKey, secCredential, secEndpoint, secResponsesKey,
	secJournalUser, secJournalQuery, secJournalSSL, secJournalKV, secJournalKVSpaced,
	secJournalQuoted, secJournalSQLite, secJournalBadPort, secJournalEnv, secJournalAfter,
}

// capture collects everything a program could print: the JSON lines of a
// Debug-level slog logger (given to the backends and the runner, and made
// the default logger), the events, printed with %+v, and the errors,
// printed with %v and %+v at every link of their chains.
type capture struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	logger *slog.Logger
}

func newCapture(t *testing.T) *capture {
	t.Helper()
	c := &capture{}
	c.logger = slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(c.logger)
	t.Cleanup(func() { slog.SetDefault(prev) })
	return c
}

// Write implements io.Writer for the logger.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capture) printf(format string, args ...any) { fmt.Fprintf(c, format, args...) }

// event records an event as a program printing it would.
func (c *capture) event(e core.Event) {
	c.printf("event %+v\n", e)
	c.err(e.Err)
}

// err records err, and every error of its chain, with %v and %+v.
func (c *capture) err(err error) {
	if err == nil {
		return
	}
	c.printf("error %T: %v | %+v\n", err, err, err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		c.err(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			c.err(e)
		}
	}
}

// runnerOptions are the options of a runner whose logger and events go to
// c.
func (c *capture) runnerOptions() *core.Options {
	return &core.Options{Logger: c.logger, OnEvent: c.event}
}

// run runs one turn on b (opened with err) and closes it, recording every
// error.
func (c *capture) run(ctx context.Context, tools *core.Toolbox, b driver.Backend, err error) error {
	if err != nil {
		return err
	}
	r := core.NewRunner(b, tools, c.runnerOptions())
	res, err := r.Run(ctx, "what is the weather?", nil)
	if res != nil {
		c.printf("result %+v\n", *res)
	}
	c.err(r.Close())
	return err
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *capture) has(s string) bool { return strings.Contains(c.text(), s) }

// leaks reports every planted secret in what c holds, with the line.
func (c *capture) leaks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, line := range strings.Split(c.buf.String(), "\n") {
		for _, s := range planted {
			if strings.Contains(line, s) {
				out = append(out, fmt.Sprintf("%s in: %s", s, line))
			}
		}
	}
	return out
}

// weather is the toolbox of the runs: one tool, which the scripts call.
func weather(t *testing.T) *core.Toolbox {
	t.Helper()
	tool, err := core.NewTool("get_weather", "Gets the weather of a city.",
		func(_ context.Context, in struct {
			City string `json:"city"`
		}) (string, error) {
			return "sunny in " + in.City, nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := core.NewToolbox(tool)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// weatherScript calls the tool once, then answers.
func weatherScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}},
		{Text: `{{output "get_weather"}}`},
	}}}}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silent starts a server (https if tls) that never answers: each request
// waits until its client gives up, or the test ends.
func silent(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	var s *httptest.Server
	if tls {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(stop) })
	return s
}

// redirecting starts a proxy (https if tls) that redirects every request
// to another origin, whose recorder it returns too.
func redirecting(t *testing.T, tls bool) *proxy {
	t.Helper()
	other := newRecorder(t, false)
	u, _ := url.Parse(other.URL)
	p := newProxy(t, tls, other.URL, http.DefaultTransport, func(string) bool { return true })
	p.redirect = "http://localhost:" + u.Port()
	return p
}

// secretCredential is a program's credential whose tokens are secret.
type secretCredential struct{}

func (secretCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: secCredential, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// clearEnv empties every variable a backend, adapter or SDK reads, so
// that only what an attempt sets is in effect.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TOOLRELAY_") && k != "TOOLRELAY_TEST_POSTGRES" || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "AZURE_") {
			t.Setenv(k, "")
		}
	}
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_AI_PROJECT_ENDPOINT", "FOUNDRY_PROJECT_ENDPOINT", "AGENT_TOKEN", "TOOLRELAY_CONFIG", "TOOLRELAY_BACKEND", "TOOLRELAY_JOURNAL"} {
		t.Setenv(k, "")
	}
}

// attempt is one way to make a backend or journal fail (or succeed) with
// a secret planted; it returns the error the program would see.
type attempt struct {
	name string
	// code is the code the error must have; -1 means the attempt must
	// succeed.
	code errcode.Code
	run  func(ctx context.Context, t *testing.T, c *capture) error
}

// noRetries keeps openai-go from retrying what fails.
var noRetries = []option.RequestOption{option.WithMaxRetries(0)}

// TestSecretsNeverShown plants a distinct secret in every credential
// setting (the openai API key, in options and in OPENAI_API_KEY; the
// Foundry token, in options and in AGENT_TOKEN; the Foundry API key, in
// options and in TOOLRELAY_FOUNDRY_API_KEY; a credential whose tokens are
// secret; the responses API key; secrets in a base URL and a project
// endpoint) and in every journal URL form (URL user info, ?password=,
// ?sslpassword=, libpq key/value plain, spaced and quoted, an SQLite
// parameter, a URL that does not parse, TOOLRELAY_JOURNAL), then drives
// the real backends against the fakes and small servers into every error
// path it can: 401, connection refused, a redirect to another origin, a
// bad URL, a deadline, a TLS failure, an unknown database, and a run that
// succeeds. No error (at any link of its chain, with %v and %+v), no log
// line (slog at Debug, as JSON) and no event (%+v) may show any secret.
func TestSecretsNeverShown(t *testing.T) {
	for _, a := range attempts(t) {
		t.Run(a.name, func(t *testing.T) {
			clearEnv(t)
			c := newCapture(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := a.run(ctx, t, c)
			c.err(err)
			switch {
			case a.code < 0 && err != nil:
				t.Errorf("the attempt failed: %v", err)
			case a.code >= 0 && err == nil:
				t.Errorf("the attempt succeeded, want an error of code %v", a.code)
			case a.code >= 0 && errcode.Of(err) != a.code:
				t.Errorf("error %v has code %v, want %v", err, errcode.Of(err), a.code)
			}
			if a.code < 0 && !c.has(`"msg":"toolrelay: run_finished"`) || !c.has("error ") && err != nil {
				t.Errorf("the capture misses the run's log lines or its error:\n%s", c.text())
			}
			for _, l := range c.leaks() {
				t.Errorf("a secret is shown: %s", l)
			}
		})
	}
}

func attempts(t *testing.T) []attempt {
	list := []attempt{
		// The openai backend.
		{"openai/success", -1, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := openaitest.NewServer(weatherScript(), &openaitest.Options{APIKey: secOpenAIKey})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: srv.URL, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"openai/401", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := openaitest.NewServer(weatherScript(), &openaitest.Options{APIKey: "another-key"})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: srv.URL, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"openai/401 at open, existing agent", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := openaitest.NewServer(weatherScript(), &openaitest.Options{APIKey: "another-key"})
			t.Cleanup(srv.Close)
			_, err := openai.Open(ctx, weather(t), &openai.Options{APIKey: secOpenAIKey, BaseURL: srv.URL, Agent: "agent_1", Logger: c.logger})
			return err
		}},
		{"openai/401 from OPENAI_API_KEY, through adapter", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := openaitest.NewServer(weatherScript(), &openaitest.Options{APIKey: "another-key"})
			t.Cleanup(srv.Close)
			t.Setenv("TOOLRELAY_BACKEND", "openai")
			t.Setenv("OPENAI_API_KEY", secOpenAIEnvKey)
			t.Setenv("OPENAI_BASE_URL", srv.URL)
			tools := weather(t)
			r, err := adapter.Open(ctx, tools, &adapter.Options{Runner: *c.runnerOptions()})
			if err != nil {
				return err
			}
			defer func() { c.err(r.Close()) }()
			_, err = r.Run(ctx, "weather?", nil)
			return err
		}},
		{"openai/connection refused", errcode.Unknown, func(ctx context.Context, t *testing.T, c *capture) error {
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: "http://" + closedPort(t) + "/v1", RequestOptions: noRetries, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"openai/redirect", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			p := redirecting(t, false)
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: p.URL + "/v1", RequestOptions: noRetries, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"openai/deadline", errcode.DeadlineExceeded, func(ctx context.Context, t *testing.T, c *capture) error {
			s := silent(t, false)
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: s.URL + "/v1", RequestOptions: noRetries, Logger: c.logger})
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			return c.run(ctx, tools, b, err)
		}},
		{"openai/idle timeout", errcode.DeadlineExceeded, func(ctx context.Context, t *testing.T, c *capture) error {
			s := silent(t, false)
			tools := weather(t)
			b, err := openai.Open(ctx, tools, &openai.Options{APIKey: secOpenAIKey, BaseURL: s.URL + "/v1", IdleTimeout: 100 * time.Millisecond, RequestOptions: noRetries, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"openai/bad base URL, port", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := openai.Open(ctx, nil, &openai.Options{APIKey: secOpenAIKey, BaseURL: "http://127.0.0.1:" + secOpenAIBaseURL + "/v1", Logger: c.logger})
			return err
		}},
		{"openai/bad base URL, user info", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := openai.Open(ctx, nil, &openai.Options{APIKey: secOpenAIKey, BaseURL: "https://me:" + secOpenAIBaseURL + "@127.0.0.1/v1", Logger: c.logger})
			return err
		}},
		{"openai/plain http elsewhere, key in the query", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("OPENAI_BASE_URL", "http://api.example.com/v1?api-key="+secOpenAIBaseURL)
			t.Setenv("OPENAI_API_KEY", secOpenAIEnvKey)
			_, err := openai.Open(ctx, nil, &openai.Options{Logger: c.logger})
			return err
		}},

		// The foundry backend.
		{"foundry/success, credential", -1, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{Token: secCredential})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := foundry.Open(ctx, tools, &foundry.Options{Endpoint: srv.ProjectEndpoint(), Credential: secretCredential{},
				Definition: &foundry.AgentDefinition{Model: "gpt-4.1-mini"}, HTTPClient: srv.Client(), Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"foundry/success, api key, streaming", -1, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{APIKey: secFoundryKey})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := foundry.Open(ctx, tools, &foundry.Options{Endpoint: srv.ProjectEndpoint(), APIKey: secFoundryKey, Delivery: foundry.Streaming,
				Definition: &foundry.AgentDefinition{Model: "gpt-4.1-mini"}, HTTPClient: srv.Client(), Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"foundry/401, token", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{Token: "another-token"})
			t.Cleanup(srv.Close)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: srv.ProjectEndpoint(), Token: secFoundryToken, Agent: "a", HTTPClient: srv.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/401, api key", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{APIKey: "another-key"})
			t.Cleanup(srv.Close)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: srv.ProjectEndpoint(), APIKey: secFoundryKey, Agent: "a", HTTPClient: srv.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/401, credential", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{Token: "another-token"})
			t.Cleanup(srv.Close)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: srv.ProjectEndpoint(), Credential: secretCredential{}, Agent: "a", HTTPClient: srv.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/401 on responses", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), nil)
			t.Cleanup(srv.Close)
			srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Status: http.StatusUnauthorized})
			tools := weather(t)
			b, err := foundry.Open(ctx, tools, &foundry.Options{Endpoint: srv.ProjectEndpoint(), Token: secFoundryToken, Mode: foundry.Chain,
				Definition: &foundry.AgentDefinition{Model: "gpt-4.1-mini"}, HTTPClient: srv.Client(), RequestOptions: noRetries, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		// azcore retries a refused connection three times, backing off:
		// this one takes seconds.
		{"foundry/connection refused", errcode.Unknown, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: "https://" + closedPort(t) + project, APIKey: secFoundryKey, Agent: "a", Logger: c.logger})
			return err
		}},
		{"foundry/redirect, api key", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			p := redirecting(t, true)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: p.URL + project, APIKey: secFoundryKey, Agent: "a", HTTPClient: p.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/redirect, token", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			p := redirecting(t, true)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: p.URL + project, Token: secFoundryToken, Agent: "a", HTTPClient: p.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/deadline", errcode.DeadlineExceeded, func(ctx context.Context, t *testing.T, c *capture) error {
			s := silent(t, true)
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: s.URL + project, APIKey: secFoundryKey, Agent: "a", HTTPClient: s.Client(), Logger: c.logger})
			return err
		}},
		{"foundry/idle timeout", errcode.DeadlineExceeded, func(ctx context.Context, t *testing.T, c *capture) error {
			s := silent(t, true)
			_, err := foundry.Open(ctx, weather(t), &foundry.Options{Endpoint: s.URL + project, APIKey: secFoundryKey, Agent: "a", HTTPClient: s.Client(), IdleTimeout: 100 * time.Millisecond, Logger: c.logger})
			return err
		}},
		{"foundry/bad endpoint, port", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := foundry.Open(ctx, nil, &foundry.Options{Endpoint: "https://127.0.0.1:" + secEndpoint + project, APIKey: secFoundryKey, Agent: "a", Logger: c.logger})
			return err
		}},
		{"foundry/bad endpoint, user info", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := foundry.Open(ctx, nil, &foundry.Options{Endpoint: "https://me:" + secEndpoint + "@127.0.0.1" + project, APIKey: secFoundryKey, Agent: "a", Logger: c.logger})
			return err
		}},
		{"foundry/bad endpoint, query", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := foundry.Open(ctx, nil, &foundry.Options{Endpoint: "https://127.0.0.1" + project + "?sig=" + secEndpoint, Token: secFoundryToken, Agent: "a", Logger: c.logger})
			return err
		}},
		{"foundry/bad endpoint, plain http", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := foundry.Open(ctx, nil, &foundry.Options{Endpoint: "http://me:" + secEndpoint + "@127.0.0.1" + project, APIKey: secFoundryKey, Agent: "a", Logger: c.logger})
			return err
		}},
		{"foundry/AGENT_TOKEN through adapter, endpoint with a query", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("TOOLRELAY_BACKEND", "foundry")
			t.Setenv("AZURE_AI_PROJECT_ENDPOINT", "https://127.0.0.1"+project+"?sig="+secEndpoint)
			t.Setenv("AGENT_TOKEN", secFoundryEnvToken)
			_, err := adapter.Open(ctx, weather(t), &adapter.Options{Runner: *c.runnerOptions()})
			return err
		}},
		{"foundry/TOOLRELAY_FOUNDRY_API_KEY through adapter, plain http", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("TOOLRELAY_BACKEND", "foundry")
			t.Setenv("FOUNDRY_PROJECT_ENDPOINT", "http://me:"+secEndpoint+"@"+closedPort(t)+project)
			t.Setenv("TOOLRELAY_FOUNDRY_API_KEY", secFoundryEnvKey)
			_, err := adapter.Open(ctx, weather(t), &adapter.Options{Runner: *c.runnerOptions()})
			return err
		}},
		{"foundry/two credentials through adapter", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("TOOLRELAY_BACKEND", "foundry")
			t.Setenv("AZURE_AI_PROJECT_ENDPOINT", "https://127.0.0.1"+project)
			t.Setenv("AGENT_TOKEN", secFoundryEnvToken)
			t.Setenv("TOOLRELAY_FOUNDRY_API_KEY", secFoundryEnvKey)
			_, err := adapter.Open(ctx, weather(t), &adapter.Options{Runner: *c.runnerOptions()})
			return err
		}},

		// The responses backend.
		{"responses/success", -1, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{Plain: true, Token: secResponsesKey})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := trresponses.Open(ctx, tools, &trresponses.Options{BaseURL: srv.OpenAIBaseURL(), APIKey: secResponsesKey, Model: "gpt-4.1-mini", HTTPClient: srv.Client(), Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"responses/401", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			srv := foundrytest.NewServer(weatherScript(), &foundrytest.Options{Plain: true, Token: "another-key"})
			t.Cleanup(srv.Close)
			tools := weather(t)
			b, err := trresponses.Open(ctx, tools, &trresponses.Options{BaseURL: srv.OpenAIBaseURL(), APIKey: secResponsesKey, Model: "gpt-4.1-mini", HTTPClient: srv.Client(), Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"responses/401 from OPENAI_API_KEY, through adapter", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
			}))
			t.Cleanup(s.Close)
			t.Setenv("TOOLRELAY_BACKEND", "responses")
			t.Setenv("OPENAI_API_KEY", secOpenAIEnvKey)
			t.Setenv("OPENAI_BASE_URL", s.URL+"/v1")
			tools := weather(t)
			r, err := adapter.Open(ctx, tools, &adapter.Options{Runner: *c.runnerOptions()})
			if err != nil {
				return err
			}
			defer func() { c.err(r.Close()) }()
			_, err = r.Run(ctx, "weather?", nil)
			return err
		}},
		{"responses/redirect", errcode.PermissionDenied, func(ctx context.Context, t *testing.T, c *capture) error {
			p := redirecting(t, true)
			tools := weather(t)
			b, err := trresponses.Open(ctx, tools, &trresponses.Options{BaseURL: p.URL + "/v1", APIKey: secResponsesKey, Model: "m", HTTPClient: p.Client(), RequestOptions: noRetries, Logger: c.logger})
			return c.run(ctx, tools, b, err)
		}},
		{"responses/deadline", errcode.DeadlineExceeded, func(ctx context.Context, t *testing.T, c *capture) error {
			s := silent(t, true)
			tools := weather(t)
			b, err := trresponses.Open(ctx, tools, &trresponses.Options{BaseURL: s.URL + "/v1", APIKey: secResponsesKey, Model: "m", HTTPClient: s.Client(), RequestOptions: noRetries, Logger: c.logger})
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			return c.run(ctx, tools, b, err)
		}},
		{"responses/plain http elsewhere", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			_, err := trresponses.Open(ctx, nil, &trresponses.Options{BaseURL: "http://api.example.com/v1?key=" + secOpenAIBaseURL, APIKey: secResponsesKey, Model: "m", Logger: c.logger})
			return err
		}},

		// Journals.
		{"journal/adapter, TOOLRELAY_JOURNAL refused", errcode.Unknown, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("TOOLRELAY_BACKEND", "fake-openai")
			t.Setenv("TOOLRELAY_JOURNAL", "postgres://toolrelay:"+secJournalEnv+"@"+closedPort(t)+"/db?sslmode=disable&connect_timeout=5")
			_, err := adapter.Open(ctx, weather(t), &adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: weatherScript()}}, Runner: *c.runnerOptions()})
			return err
		}},
		{"journal/adapter, TOOLRELAY_JOURNAL key/value", errcode.InvalidArgument, func(ctx context.Context, t *testing.T, c *capture) error {
			t.Setenv("TOOLRELAY_BACKEND", "fake-openai")
			t.Setenv("TOOLRELAY_JOURNAL", "host=127.0.0.1 port=1 password="+secJournalEnv)
			_, err := adapter.Open(ctx, weather(t), &adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: weatherScript()}}, Runner: *c.runnerOptions()})
			return err
		}},
	}
	refused := closedPort(t)
	for _, j := range []struct {
		name, url string
		code      errcode.Code
	}{
		{"user info, refused", "postgres://toolrelay:" + secJournalUser + "@" + refused + "/db?sslmode=disable", errcode.Unknown},
		{"password parameter, refused", "postgres://toolrelay@" + refused + "/db?sslmode=disable&password=" + secJournalQuery, errcode.Unknown},
		{"sslpassword parameter, bad key file", "postgres://toolrelay@" + refused + "/db?sslmode=verify-full&sslcert=/nonexistent.crt&sslkey=/nonexistent.key&sslpassword=" + secJournalSSL, errcode.InvalidArgument},
		{"user info, bad port", "postgres://toolrelay:" + secJournalUser + "@127.0.0.1:abc/db", errcode.InvalidArgument},
		{"password parameter, bad port", "postgres://toolrelay@127.0.0.1:abc/test?password=" + secJournalBadPort, errcode.InvalidArgument},
		{"user info, bad escape", "postgresql://toolrelay:%zz" + secJournalUser + "@127.0.0.1/db", errcode.InvalidArgument},
		{"key/value", "host=127.0.0.1 port=1 password=" + secJournalKV, errcode.InvalidArgument},
		{"key/value, spaced", "host=127.0.0.1 password = " + secJournalKVSpaced + " port=1", errcode.InvalidArgument},
		{"key/value, quoted", "host=127.0.0.1 password='a " + secJournalQuoted + "' port=1", errcode.InvalidArgument},
		{"key/value, empty host before the password", "host= password=" + secJournalAfter + " port=1", errcode.InvalidArgument},
		{"key/value, empty user before the password", "host=127.0.0.1 user= password=" + secJournalAfter, errcode.InvalidArgument},
		{"key/value, empty dbname before the password", "dbname= password=" + secJournalAfter + " host=127.0.0.1", errcode.InvalidArgument},
		{"sqlite parameter", "sqlite:///nonexistent/j.db?password=" + secJournalSQLite, errcode.InvalidArgument},
		{"sqlite fragment", "sqlite:" + t.TempDir() + "/j.db?check=maybe#" + secJournalSQLite, errcode.InvalidArgument},
	} {
		list = append(list, attempt{"journal/journal.Open, " + j.name, j.code, func(ctx context.Context, t *testing.T, c *capture) error {
			s, err := journal.Open(ctx, j.url)
			if err == nil {
				s.Close()
			}
			return err
		}})
	}
	for _, j := range []struct {
		name, conn string
		code       errcode.Code
	}{
		{"key/value, refused", "host=127.0.0.1 port=" + strings.Split(refused, ":")[1] + " sslmode=disable password=" + secJournalKV, errcode.Unknown},
		{"key/value spaced, bad port", "host=127.0.0.1 password = " + secJournalKVSpaced + " port=abc", errcode.InvalidArgument},
		{"key/value quoted, bad port", "host=127.0.0.1 password='a " + secJournalQuoted + "' port=abc", errcode.InvalidArgument},
		{"key/value, unterminated quote", "host=127.0.0.1 password='" + secJournalQuoted, errcode.InvalidArgument},
		{"key/value, stray word", "host=127.0.0.1 " + secJournalKV, errcode.InvalidArgument},
		// A template with an unset variable: pgx reads the next setting as
		// the empty one's value.
		{"key/value, empty host before the password", "host= password=" + secJournalAfter + " port=" + strings.Split(refused, ":")[1] + " sslmode=disable", errcode.InvalidArgument},
		{"key/value, empty user before the password", "host=127.0.0.1 port=" + strings.Split(refused, ":")[1] + " sslmode=disable user= password=" + secJournalAfter, errcode.InvalidArgument},
		{"key/value, empty dbname before the password", "host=127.0.0.1 port=" + strings.Split(refused, ":")[1] + " sslmode=disable dbname= password=" + secJournalAfter, errcode.InvalidArgument},
	} {
		list = append(list, attempt{"journal/pgjournal.Open, " + j.name, j.code, func(ctx context.Context, t *testing.T, c *capture) error {
			s, err := pgjournal.Open(ctx, j.conn, nil)
			if err == nil {
				s.Close()
			}
			return err
		}})
	}
	if pg := os.Getenv("TOOLRELAY_TEST_POSTGRES"); pg != "" {
		// The real server, asked for a database that does not exist, with
		// a password in each form it reads.
		u, err := url.Parse(pg)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/toolrelay_no_such_database"
		q := u.Query()
		q.Set("password", secJournalQuery)
		u.RawQuery = q.Encode()
		byQuery := u.String()
		u.RawQuery = ""
		u.User = url.UserPassword(u.User.Username(), secJournalUser)
		byUser := u.String() + "?sslmode=disable"
		kv := fmt.Sprintf("host=%s port=%s user=%s dbname=toolrelay_no_such_database sslmode=disable password = '%s'", u.Hostname(), u.Port(), u.User.Username(), secJournalKVSpaced)
		for _, conn := range []string{byQuery, byUser, kv} {
			list = append(list, attempt{"journal/pgjournal.Open, no such database, " + redactedName(conn), errcode.NotFound, func(ctx context.Context, t *testing.T, c *capture) error {
				s, err := pgjournal.Open(ctx, conn, nil)
				if err == nil {
					s.Close()
				}
				return err
			}})
		}
	}
	return list
}

// redactedName names a subtest without the secret it plants.
func redactedName(conn string) string {
	for _, s := range planted {
		conn = strings.ReplaceAll(conn, s, "secret")
	}
	return conn
}
