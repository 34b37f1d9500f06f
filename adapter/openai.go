package adapter

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// OpenAIConfig holds the settings of the openai and fake-openai backends.
// The fake ignores APIKey, BaseURL, AgentID and SessionID, which name
// things on the real service.
type OpenAIConfig struct {
	// APIKey authenticates the requests (openai.Options.APIKey).
	APIKey string `json:"api_key,omitempty" env:"OPENAI_API_KEY"`
	// BaseURL is the API's base URL (openai.Options.BaseURL).
	BaseURL string `json:"base_url,omitempty" env:"OPENAI_BASE_URL"`
	// AgentID names an existing agent; empty makes one from the toolbox.
	AgentID string `json:"agent_id,omitempty" env:"TOOLRELAY_OPENAI_AGENT_ID"`
	// Model is the model of an agent made from the toolbox (default
	// gpt-4.1-mini).
	Model string `json:"model,omitempty" env:"TOOLRELAY_OPENAI_MODEL"`
	// Instructions are the instructions of an agent made from the toolbox.
	Instructions string `json:"instructions,omitempty" env:"TOOLRELAY_OPENAI_INSTRUCTIONS"`
	// SessionID is a session to reuse for runs that name no thread.
	SessionID string `json:"session_id,omitempty" env:"TOOLRELAY_OPENAI_SESSION_ID"`
	// Keep keeps the agent and sessions the backend created when it is
	// closed; by default they are deleted.
	Keep bool `json:"keep,omitempty" env:"TOOLRELAY_OPENAI_KEEP"`
	// Poll reads the session with GET requests instead of following its
	// event stream.
	Poll bool `json:"poll,omitempty" env:"TOOLRELAY_OPENAI_POLL"`
	// PollInterval is the pause between reads when polling (default 1s).
	PollInterval Duration `json:"poll_interval,omitempty" env:"TOOLRELAY_OPENAI_POLL_INTERVAL"`
	// MaxReconnects bounds how often a dropped event stream is resumed
	// within one step (default 3; negative: never).
	MaxReconnects int `json:"max_reconnects,omitempty" env:"TOOLRELAY_OPENAI_MAX_RECONNECTS" min:"none"`
}

func init() {
	register("openai", openOpenAI)
	register("fake-openai", openFakeOpenAI)
}

func (c *OpenAIConfig) options(logger *slog.Logger) *openai.Options {
	return &openai.Options{
		APIKey:        c.APIKey,
		BaseURL:       c.BaseURL,
		AgentID:       c.AgentID,
		Model:         c.Model,
		Instructions:  c.Instructions,
		SessionID:     c.SessionID,
		Keep:          c.Keep,
		Polling:       c.Poll,
		PollInterval:  time.Duration(c.PollInterval),
		MaxReconnects: c.MaxReconnects,
		Logger:        logger,
	}
}

// openOpenAI opens the OpenAI Agents API sessions backend.
func openOpenAI(ctx context.Context, req *OpenRequest) (driver.Backend, error) {
	b, err := openai.Open(ctx, req.Tools, req.Config.OpenAI.options(req.Logger))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// openFakeOpenAI starts a fake Agents API server on loopback playing the
// script, and opens the real openai backend against it: the program runs
// the whole wire path without credentials or network.
func openFakeOpenAI(ctx context.Context, req *OpenRequest) (driver.Backend, error) {
	script, err := fakeOpenAIScript("fake-openai", req)
	if err != nil {
		return nil, err
	}
	srv := openaitest.NewServer(script, nil)
	o := req.Config.OpenAI.options(req.Logger)
	o.APIKey, o.BaseURL, o.AgentID, o.SessionID = "fake-openai", srv.URL, "", ""
	b, err := openai.Open(ctx, req.Tools, o)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &fakeOpenAI{Backend: b, srv: srv}, nil
}

// fakeOpenAI is the openai backend on an embedded fake server, which it
// closes with itself.
type fakeOpenAI struct {
	*openai.Backend
	srv *openaitest.Server
}

func (f *fakeOpenAI) Close() error {
	err := f.Backend.Close()
	f.srv.Close()
	return err
}

// fakeOpenAIScript returns the script a fake backend plays: the program's, or
// the one the configuration names.
func fakeOpenAIScript(backend string, req *OpenRequest) (*coretest.Script, error) {
	if req.Script != nil {
		return req.Script, nil
	}
	if req.Config.Script != "" {
		s, err := coretest.LoadScript(req.Config.Script)
		if err != nil {
			return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: " + backend, Err: err}
		}
		return s, nil
	}
	return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: " + backend,
		Err: fmt.Errorf("the fake backend needs a model script: pass adapter.Options.Script, or set TOOLRELAY_SCRIPT to a JSON script file")}
}
