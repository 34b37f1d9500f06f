package openai

import (
	"time"

	"github.com/toolrelay/toolrelay/adapter"
	"github.com/toolrelay/toolrelay/internal/backendcfg"
)

// Settings are the configuration settings of the openai backend: section
// "openai" of the configuration file, and the environment variables of the
// package doc's table. A program may also set them in code, as a Settings
// value (or a pointer to one) in adapter.Options.BackendSettings, whose
// non-zero fields win over the file and the environment.
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
	// Delivery is how a turn is followed (file key and variable say
	// "transport"): "streaming" (the default) or
	// "polling" (GET requests instead of the event stream).
	Delivery string `json:"transport,omitempty" env:"TOOLRELAY_OPENAI_TRANSPORT"`
	// PollInterval is the pause between reads when polling (default 1s).
	PollInterval adapter.Duration `json:"poll_interval,omitempty" env:"TOOLRELAY_OPENAI_POLL_INTERVAL"`
	// MaxReconnects bounds how often a dropped event stream is resumed
	// within one step (default 3; negative: never).
	MaxReconnects int `json:"max_reconnects,omitempty" env:"TOOLRELAY_OPENAI_MAX_RECONNECTS" min:"none"`
}

func init() { backendcfg.Register("openai", OptionsFor, Open) }

// OptionsFor returns the options the configuration of req gives the
// backend: the shared settings, and the [Settings] of section "openai".
func OptionsFor(req *adapter.OpenRequest) (*Options, error) {
	var s Settings
	if err := req.BackendSettings("openai", &s); err != nil {
		return nil, err
	}
	o := &Options{
		APIKey:        s.APIKey,
		BaseURL:       s.BaseURL,
		Agent:         s.Agent,
		Model:         s.Model,
		Instructions:  req.Settings.Instructions,
		SessionID:     s.SessionID,
		Keep:          s.Keep,
		Delivery:      Delivery(s.Delivery),
		PollInterval:  time.Duration(s.PollInterval),
		MaxReconnects: s.MaxReconnects,
		Logger:        req.Logger,
		HTTPClient:    req.Client(nil),
	}
	o.MaxResponseBytes, o.MaxEventBytes, o.IdleTimeout, o.MaxSilence = backendcfg.Limits(req.Settings)
	return o, nil
}
