package foundrytest

import (
	"context"
	"sync"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/responses"
)

func init() {
	adapter.Register("fake-foundry", openFake)
	adapter.Register("fake-responses", openFakeResponses)
}

// fakeToken is the static bearer token of the fake-foundry backend.
const fakeToken = "fake-foundry-token"

// openFake opens the fake-foundry backend: a fake Foundry project on
// loopback playing the script of the configuration
// (coretest.FakeSettings), and the real foundry backend against it with a
// static token, so that a program runs the whole wire path with no service
// and no credentials. The agent version is always created from the
// toolbox; the foundry settings that name things on the real service
// (endpoint, credentials, an existing agent's version) are ignored.
func openFake(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
	var fs coretest.FakeSettings
	if err := req.BackendSettings("fake", &fs); err != nil {
		return nil, err
	}
	script, err := fs.Load("fake-foundry")
	if err != nil {
		return nil, err
	}
	o, err := foundry.OptionsFor(req)
	if err != nil {
		return nil, err
	}
	srv := NewServer(script, &Options{Token: fakeToken})
	if o.Definition == nil {
		o.Definition = &foundry.AgentDefinition{Name: o.Agent, Model: foundry.DefaultModel, Instructions: req.Settings.Instructions}
	}
	o.Endpoint, o.Token, o.APIKey, o.Credential, o.Agent, o.AgentVersion = srv.ProjectEndpoint(), fakeToken, "", nil, "", ""
	o.HTTPClient = req.Client(srv.Client())
	o.RequestOptions = append(o.RequestOptions, option.WithMaxRetryDelay(10*time.Millisecond))
	b, err := foundry.Open(ctx, req.Tools, o)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeBackend{Backend: b, srv: srv}, nil
}

// openFakeResponses opens the fake-responses backend: a fake serving the
// plain Responses API on loopback, playing the script of the configuration,
// and the real responses backend against it; the responses settings that
// name the real service (base URL, key) are ignored.
func openFakeResponses(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
	var fs coretest.FakeSettings
	if err := req.BackendSettings("fake", &fs); err != nil {
		return nil, err
	}
	script, err := fs.Load("fake-responses")
	if err != nil {
		return nil, err
	}
	o, err := responses.OptionsFor(req)
	if err != nil {
		return nil, err
	}
	srv := NewServer(script, &Options{Token: fakeToken, Plain: true})
	o.BaseURL, o.APIKey, o.HTTPClient = srv.OpenAIBaseURL(), fakeToken, req.Client(srv.Client())
	o.RequestOptions = append(o.RequestOptions, option.WithMaxRetryDelay(10*time.Millisecond))
	b, err := responses.Open(ctx, req.Tools, o)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeResponses{Backend: b, srv: srv}, nil
}

// fakeResponses is the responses backend on an embedded fake, which it
// closes with itself.
type fakeResponses struct {
	*responses.Backend
	srv  *Server
	once sync.Once
}

// Server returns the fake, for tests.
func (f *fakeResponses) Server() *Server { return f.srv }

// Close closes the backend, then the fake. Later calls do nothing.
func (f *fakeResponses) Close() error {
	var err error
	f.once.Do(func() {
		err = f.Backend.Close()
		f.srv.Close()
	})
	return err
}

// fakeBackend is the foundry backend on an embedded fake project, which
// it closes with itself.
type fakeBackend struct {
	*foundry.Backend
	srv   *Server
	once  sync.Once
	close error
}

// Server returns the fake project, for tests.
func (f *fakeBackend) Server() *Server { return f.srv }

// Close closes the backend, then the fake project. Later calls do nothing.
func (f *fakeBackend) Close() error {
	f.once.Do(func() {
		f.close = f.Backend.Close()
		f.srv.Close()
	})
	return f.close
}
