package leaktest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
	"github.com/toolrelay/toolrelay/openai"
	trresponses "github.com/toolrelay/toolrelay/responses"
)

// wire is an http.RoundTripper that records the requests it is given and
// answers each 401: the requests a client would have sent.
type wire struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.reqs = append(w.reqs, r)
	w.mu.Unlock()
	return &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

func (w *wire) sent() []*http.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*http.Request(nil), w.reqs...)
}

// openaiClientBackends are the backends whose requests openai-go makes
// with an API key, opened with a base URL and key (either may be empty:
// then the environment's) and extra request options.
var openaiClientBackends = []struct {
	name string
	open func(ctx context.Context, baseURL, key string, ro []option.RequestOption) (driver.Backend, error)
}{
	{"openai", func(ctx context.Context, baseURL, key string, ro []option.RequestOption) (driver.Backend, error) {
		tools, _ := core.NewToolbox()
		return openai.Open(ctx, tools, &openai.Options{BaseURL: baseURL, APIKey: key, RequestOptions: ro, Logger: discard})
	}},
	{"responses", func(ctx context.Context, baseURL, key string, ro []option.RequestOption) (driver.Backend, error) {
		return trresponses.Open(ctx, nil, &trresponses.Options{BaseURL: baseURL, APIKey: key, Model: "m", RequestOptions: ro, Logger: discard})
	}},
}

// TestPlainHTTP checks that an API key is never sent over plain http to a
// host that is not loopback: a base URL in the options or in
// OPENAI_BASE_URL is refused at Open (InvalidArgument, naming the URL
// without its secrets), and one that request options set is refused
// before the request is sent. Plain http to loopback is allowed (the
// embedded fakes run there).
func TestPlainHTTP(t *testing.T) {
	for _, b := range openaiClientBackends {
		for _, tc := range []struct {
			name             string
			baseURL, key     string
			envURL, envKey   string
			optionURL        string // set by option.WithBaseURL
			openErr, sendErr string // "" for none
			sent             bool
		}{
			{name: "http in options", baseURL: "http://api.example.com/v1?token=SECRET-q", key: "SECRET-key", openErr: "plain http"},
			{name: "http in the environment", envURL: "http://api.example.com/v1", envKey: "SECRET-key", openErr: "plain http"},
			{name: "http in the environment, key in options", envURL: "http://api.example.com/v1", key: "SECRET-key", openErr: "plain http"},
			{name: "http set by request options", key: "SECRET-key", optionURL: "http://api.example.com/v1", sendErr: "plain http only to a loopback host"},
			{name: "userinfo", baseURL: "https://u:SECRET-pw@api.example.com/v1", key: "SECRET-key", openErr: "user information"},
			{name: "not a URL", baseURL: "api.example.com:SECRET-port/v1", key: "SECRET-key", openErr: "not an http or https URL"},
			{name: "http loopback", baseURL: "http://127.0.0.1:9/v1", key: "SECRET-key", sent: true},
			{name: "http localhost", baseURL: "http://localhost:9/v1", key: "SECRET-key", sent: true},
			{name: "http without a key", baseURL: "http://api.example.com/v1", envKey: "", sent: true},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				t.Setenv("OPENAI_BASE_URL", tc.envURL)
				t.Setenv("OPENAI_API_KEY", tc.envKey)
				w := &wire{}
				ro := []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: w}), option.WithMaxRetries(0)}
				if tc.optionURL != "" {
					ro = append(ro, option.WithBaseURL(tc.optionURL))
				}
				be, err := b.open(t.Context(), tc.baseURL, tc.key, ro)
				if tc.openErr != "" {
					if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.openErr) {
						t.Fatalf("Open = %v, want InvalidArgument saying %q", err, tc.openErr)
					}
					if strings.Contains(err.Error(), "SECRET") {
						t.Errorf("Open = %v shows a secret", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer be.Close()
				err = run(t.Context(), be, nil)
				if err == nil {
					t.Fatal("the run succeeded against a wire that answers 401")
				}
				if tc.sendErr != "" && (!errors.Is(err, origin.ErrPlainHTTP) || !strings.Contains(err.Error(), tc.sendErr)) {
					t.Errorf("run = %v, want the request refused saying %q", err, tc.sendErr)
				}
				if got := len(w.sent()) > 0; got != tc.sent {
					t.Errorf("requests sent: %v, want %v", got, tc.sent)
				}
				for _, r := range w.sent() {
					if r.URL.Scheme == "http" && !origin.Loopback(r.URL.Hostname()) && r.Header.Get("Authorization") != "" {
						t.Errorf("sent %s %s with Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
					}
				}
			})
		}
	}
}
