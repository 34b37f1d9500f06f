package openai

import (
	"context"
	"time"

	"github.com/toolrelay/toolrelay/config"
	"github.com/toolrelay/toolrelay/core/driver"
)

// Settings are the configuration settings of the openai backend: section
// "openai" of the configuration file, and the environment variables of the
// package doc's table. A program may also set them in code, in
// config.Options.Settings.
type Settings struct {
	// APIKey authenticates the requests (Options.APIKey).
	APIKey string `json:"api_key,omitempty" env:"OPENAI_API_KEY"`
	// BaseURL is the API's base URL (Options.BaseURL).
	BaseURL string `json:"base_url,omitempty" env:"OPENAI_BASE_URL"`
	// Agent names an existing agent; empty makes one from the toolbox.
	Agent string `json:"agent,omitempty" env:"TOOLRELAY_OPENAI_AGENT"`
	// Model is the model of an agent made from the toolbox (default
	// DefaultModel).
	Model string `json:"model,omitempty" env:"TOOLRELAY_OPENAI_MODEL"`
	// SessionID is a session to reuse for runs that name no thread.
	SessionID string `json:"session_id,omitempty" env:"TOOLRELAY_OPENAI_SESSION_ID"`
	// Keep keeps the agent and sessions the backend created when it is
	// closed; by default they are deleted.
	Keep bool `json:"keep,omitempty" env:"TOOLRELAY_OPENAI_KEEP"`
	// Transport is how a turn is followed: "streaming" (the default) or
	// "polling" (GET requests instead of the event stream).
	Transport string `json:"transport,omitempty" env:"TOOLRELAY_OPENAI_TRANSPORT"`
	// PollInterval is the pause between reads when polling (default 1s).
	PollInterval config.Duration `json:"poll_interval,omitempty" env:"TOOLRELAY_OPENAI_POLL_INTERVAL"`
	// MaxReconnects bounds how often a dropped event stream is resumed
	// within one step (default 3; negative: never).
	MaxReconnects int `json:"max_reconnects,omitempty" env:"TOOLRELAY_OPENAI_MAX_RECONNECTS" min:"none"`
}

func init() {
	config.Register("openai", func(ctx context.Context, req *config.OpenRequest) (driver.Backend, error) {
		o, err := OptionsFor(req)
		if err != nil {
			return nil, err
		}
		return Open(ctx, req.Tools, o)
	})
}

// OptionsFor returns the options the configuration of req gives the
// backend: the shared settings, and the [Settings] of section "openai".
func OptionsFor(req *config.OpenRequest) (*Options, error) {
	var s Settings
	if err := req.Settings("openai", &s); err != nil {
		return nil, err
	}
	return &Options{
		APIKey:        s.APIKey,
		BaseURL:       s.BaseURL,
		Agent:         s.Agent,
		Model:         s.Model,
		Instructions:  req.Config.Instructions,
		SessionID:     s.SessionID,
		Keep:          s.Keep,
		Transport:     Transport(s.Transport),
		PollInterval:  time.Duration(s.PollInterval),
		MaxReconnects: s.MaxReconnects,
		Logger:        req.Logger,
		HTTPClient:    req.Client(nil),

		MaxResponseBytes: req.Config.MaxResponseBytes,
		MaxEventBytes:    req.Config.MaxEventBytes,
		IdleTimeout:      time.Duration(req.Config.IdleTimeout),
		MaxSilence:       time.Duration(req.Config.MaxSilence),
	}, nil
}
