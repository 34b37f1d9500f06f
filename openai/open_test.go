package openai_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
	"github.com/toolrelay/toolrelay/responses"
)

// roundTrips counts the requests that reach the network.
type roundTrips struct{ n atomic.Int32 }

func (r *roundTrips) RoundTrip(*http.Request) (*http.Response, error) {
	r.n.Add(1)
	return nil, errors.New("dialed")
}

// TestNoKey: with no API key (neither in the options nor in
// OPENAI_API_KEY) and no base URL, the openai and responses backends
// fail at Open (FailedPrecondition, naming OPENAI_API_KEY), through the
// adapter too, instead of dialing the OpenAI API; request options that
// hide the key from Open leave the check to the first request, which
// is refused before it is sent.
func TestNoKey(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TOOLRELAY_RESPONSES_MODEL", "")
	// Unset, not empty: openai-go takes an empty OPENAI_BASE_URL as the
	// base URL.
	os.Unsetenv("OPENAI_BASE_URL")
	os.Unsetenv("OPENAI_API_KEY")
	check := func(t *testing.T, err error) {
		t.Helper()
		if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
			t.Errorf("error %v, want FailedPrecondition naming OPENAI_API_KEY", err)
		}
	}
	t.Run("openai.Open", func(t *testing.T) {
		_, err := openai.Open(t.Context(), nil, nil)
		check(t, err)
	})
	t.Run("responses.Open", func(t *testing.T) {
		_, err := responses.Open(t.Context(), nil, &responses.Options{Model: "gpt-4.1"})
		check(t, err)
	})
	for _, backend := range []string{"openai", "responses"} {
		t.Run("adapter, "+backend, func(t *testing.T) {
			t.Setenv("TOOLRELAY_BACKEND", backend)
			_, err := adapter.Open(t.Context(), nil, nil)
			check(t, err)
		})
	}
	t.Run("request options", func(t *testing.T) {
		var rt roundTrips
		b, err := openai.Open(t.Context(), nil, &openai.Options{RequestOptions: []option.RequestOption{
			option.WithHTTPClient(&http.Client{Transport: &rt}), option.WithMaxRetries(0)}})
		if err != nil {
			t.Fatal(err)
		}
		r := core.NewRunner(b, nil, &core.Options{Logger: discard()})
		defer r.Close()
		_, err = r.Run(t.Context(), "hi", nil)
		check(t, err)
		if rt.n.Load() != 0 {
			t.Errorf("%d requests reached the network", rt.n.Load())
		}
	})
}

// TestErrorsNameTheSession: an error before the session's id arrived (an
// event of the creation stream past MaxEventBytes) says so, rather than
// naming a session with an empty id.
func TestErrorsNameTheSession(t *testing.T) {
	srv := openaitest.NewServer(coretest.Simple("get_weather", `{"location":"Paris"}`, "done"), nil)
	t.Cleanup(srv.Close)
	b, err := openai.Open(t.Context(), nil, &openai.Options{APIKey: "k", BaseURL: srv.URL, MaxEventBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	r := core.NewRunner(b, nil, &core.Options{Logger: discard()})
	defer r.Close()
	_, err = r.Run(t.Context(), "hi", nil)
	if errcode.Of(err) != errcode.ResourceExhausted || strings.Contains(err.Error(), "session :") || !strings.Contains(err.Error(), "being created") {
		t.Errorf("Run = %v, want ResourceExhausted naming the session being created", err)
	}
}
