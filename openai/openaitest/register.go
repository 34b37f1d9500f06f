package openaitest

import (
	"context"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/openai"
)

func init() { adapter.Register("fake-openai", openFake) }

// openFake opens the fake-openai backend: a fake Agents API server on
// loopback playing the script of the configuration (coretest.FakeSettings),
// and the real openai backend against it, so that a program runs the whole
// wire path without credentials or network. The openai settings that name
// things on the real service (API key, base URL, agent, session) are
// ignored.
func openFake(ctx context.Context, req *adapter.OpenRequest) (driver.Backend, error) {
	var fs coretest.FakeSettings
	if err := req.BackendSettings("fake", &fs); err != nil {
		return nil, err
	}
	script, err := fs.Load("fake-openai")
	if err != nil {
		return nil, err
	}
	o, err := openai.OptionsFor(req)
	if err != nil {
		return nil, err
	}
	srv := NewServer(script, nil)
	o.APIKey, o.BaseURL, o.Agent, o.SessionID = "fake-openai", srv.URL, "", ""
	b, err := openai.Open(ctx, req.Tools, o)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeBackend{Backend: b, srv: srv}, nil
}

// fakeBackend is the openai backend on an embedded fake server, which it
// closes with itself.
type fakeBackend struct {
	*openai.Backend
	srv *Server
}

// Server returns the fake server, for tests.
func (f *fakeBackend) Server() *Server { return f.srv }

func (f *fakeBackend) Close() error {
	err := f.Backend.Close()
	f.srv.Close()
	return err
}
