package foundry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// countingCredential is a static test credential that counts GetToken
// calls and records the scopes asked for.
type countingCredential struct {
	n      atomic.Int32
	mu     sync.Mutex
	scopes []string
}

func (c *countingCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.n.Add(1)
	c.mu.Lock()
	c.scopes = o.Scopes
	c.mu.Unlock()
	return azcore.AccessToken{Token: "test-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// fast makes openai-go retry at once.
var fast = []option.RequestOption{option.WithMaxRetryDelay(time.Millisecond)}

// noRetries makes openai-go give up at the first failure.
var noRetries = []option.RequestOption{option.WithMaxRetries(0)}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// newFake starts a fake project playing script.
func newFake(t *testing.T, script *coretest.Script, opts *foundrytest.Options) *foundrytest.Server {
	t.Helper()
	srv := foundrytest.NewServer(script, opts)
	t.Cleanup(srv.Close)
	return srv
}

// options returns backend options for srv: a counting credential, an
// agent definition made from the toolbox, fast retries.
func options(srv *foundrytest.Server, mode foundry.Mode, stream bool) *foundry.Options {
	return &foundry.Options{
		Endpoint:       srv.ProjectEndpoint(),
		Credential:     &countingCredential{},
		Definition:     &foundry.AgentDefinition{Name: "test-agent", Model: "gpt-4.1-mini", Instructions: "You are a helpful agent."},
		Mode:           mode,
		Delivery:       map[bool]foundry.Delivery{true: foundry.Streaming}[stream],
		HTTPClient:     srv.Client(),
		RequestOptions: fast,
		Logger:         discard,
	}
}

// open opens a backend and closes it at the end of the test.
func open(t *testing.T, tools *core.Toolbox, opts *foundry.Options) *foundry.Backend {
	t.Helper()
	b, err := foundry.Open(context.Background(), tools, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newRunner(b driver.Backend, tools *core.Toolbox, j journaldriver.Journal) *core.Runner {
	return core.NewRunner(b, tools, &core.Options{Logger: discard, Journal: j})
}

// counter counts handler runs by tool name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type signArgs struct {
	Sign string `json:"sign" jsonschema:"An astrological sign like Taurus or Aquarius"`
}

type locationArgs struct {
	Location string `json:"location"`
}

type weatherArgs struct {
	Location string `json:"location"`
	Unit     string `json:"unit,omitempty"`
}

// toolbox returns the seed's tools (horoscope and weather), a failing
// tool, and a tool returning a content array, counting their runs.
func toolbox(t testing.TB, c *counter) *core.Toolbox {
	t.Helper()
	loc := map[string]core.Field{"location": {Description: "The city and state, e.g. San Francisco, CA"}}
	must := func(tool *core.Tool, err error) *core.Tool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	tb, err := core.NewToolbox(
		must(core.NewTool("get_horoscope", "Get today's horoscope for an astrological sign.", func(_ context.Context, in signArgs) (string, error) {
			c.add("get_horoscope")
			return in.Sign + ": Next Tuesday you will befriend a baby otter.", nil
		}, &core.ToolOptions{Strict: true})),
		must(core.NewTool("getUserFavoriteCity", "Gets the user's favorite city.", func(context.Context, struct{}) (string, error) {
			c.add("getUserFavoriteCity")
			return "Seattle, WA", nil
		}, nil)),
		must(core.NewTool("getCityNickname", "Gets the nickname of a city, e.g. 'LA' for 'Los Angeles, CA'.", func(_ context.Context, in locationArgs) (string, error) {
			c.add("getCityNickname")
			if in.Location == "Seattle, WA" {
				return "The Emerald City", nil
			}
			return "", core.ModelErrorf("no nickname is known for %s", in.Location)
		}, &core.ToolOptions{Fields: loc})),
		must(core.NewTool("getCurrentWeatherAtLocation", "Gets the current weather at a provided location.", func(_ context.Context, in weatherArgs) (string, error) {
			c.add("getCurrentWeatherAtLocation")
			if in.Location != "Seattle, WA" {
				return "", core.ModelErrorf("no weather is known for %s", in.Location)
			}
			if in.Unit == "c" {
				return "21c", nil
			}
			return "70f", nil
		}, &core.ToolOptions{Fields: map[string]core.Field{
			"location": loc["location"],
			"unit":     {Enum: []any{"c", "f"}, Default: "f"},
		}})),
		must(core.NewTool("getStockPrice", "Gets a stock price.", func(context.Context, struct{}) (string, error) {
			c.add("getStockPrice")
			return "", errors.New("quote service unreachable: dial tcp 10.0.0.7:443")
		}, nil)),
		must(core.NewTool("getChart", "Gets a chart.", func(context.Context, struct{}) (core.Content, error) {
			c.add("getChart")
			return core.Content{core.TextPart("a chart"), core.ImagePart("https://example.com/chart.png")}, nil
		}, nil)),
	)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// weatherScript is the seed's weather chain for city: the favorite city,
// its nickname, its weather, then the answer built from the outputs.
func weatherScript() *coretest.Script {
	return &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "getUserFavoriteCity"}}},
		{Calls: []coretest.Call{{Name: "getCityNickname", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}"}`)}}},
		{Calls: []coretest.Call{{Name: "getCurrentWeatherAtLocation", Arguments: []byte(`{"location": "{{output \"getUserFavoriteCity\"}}", "unit": "f"}`)}}},
		{Text: `Your favorite city, {{output "getUserFavoriteCity"}}, is also known as {{output "getCityNickname"}}. The current weather there is {{output "getCurrentWeatherAtLocation"}}.`},
	}}}}
}

// statuses returns the statuses the fake answered, by operation.
func statuses(srv *foundrytest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, fmt.Sprintf("%s %d", r.Op, r.Status))
	}
	return out
}

// checkNoRefusals fails the test if the fake answered any request with an
// error: the backend must never trigger one of the service's refusals.
func checkNoRefusals(t *testing.T, srv *foundrytest.Server) {
	t.Helper()
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Errorf("%s %s answered %d: %s", r.Method, r.Path, r.Status, r.Error)
		}
	}
}

// results returns the results the fake received, as "name: output" lines.
func results(srv *foundrytest.Server) []string {
	var out []string
	for _, r := range srv.Received() {
		for _, d := range r.Results {
			out = append(out, d.Name+": "+d.Output)
		}
	}
	return out
}
