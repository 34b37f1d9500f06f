package adapter

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Config holds every setting, for the runner and for each built-in backend.
// [Load] fills it from a JSON file, the environment and code; the package
// doc lists each setting with its environment variable and file key.
type Config struct {
	// Backend names the backend to open (see [Backends]).
	Backend string `json:"backend,omitempty" env:"TOOLRELAY_BACKEND"`
	// MaxSteps bounds the steps of one run (core.Options.MaxSteps).
	MaxSteps int `json:"max_steps,omitempty" env:"TOOLRELAY_MAX_STEPS"`
	// Concurrency bounds the calls of one step run at once
	// (core.Options.Concurrency).
	Concurrency int `json:"concurrency,omitempty" env:"TOOLRELAY_CONCURRENCY"`
	// ToolTimeout bounds each handler without a timeout of its own
	// (core.Options.ToolTimeout), as a Go duration ("30s").
	ToolTimeout Duration `json:"tool_timeout,omitempty" env:"TOOLRELAY_TOOL_TIMEOUT"`
	// Script is the path of a JSON model script (package coretest) that the
	// fake backends play instead of the program's own.
	Script string `json:"script,omitempty" env:"TOOLRELAY_SCRIPT"`
	// Journal names the results journal (core.Options.Journal) by URL:
	// "memory", "sqlite:///path/file.db" or "postgres://…"; package
	// journal lists the forms. Empty means a memory journal.
	Journal string `json:"journal,omitempty" env:"TOOLRELAY_JOURNAL"`
	// JournalLease is how long a claim on a call lasts before another
	// worker may take the call over (core.Options.Lease), as a Go duration.
	JournalLease Duration `json:"journal_lease,omitempty" env:"TOOLRELAY_JOURNAL_LEASE"`
	// JournalRetention, if set, is how long the journal keeps finished
	// entries before pruning them (journal.Options.Retention), as a Go
	// duration ("720h").
	JournalRetention Duration `json:"journal_retention,omitempty" env:"TOOLRELAY_JOURNAL_RETENTION"`
	// OpenAI holds the settings of the openai and fake-openai backends.
	OpenAI OpenAIConfig `json:"openai,omitzero"`
	// Foundry holds the settings of the foundry, responses and fake-foundry
	// backends.
	Foundry FoundryConfig `json:"foundry,omitzero"`
	// Settings holds settings for third-party backends, by name. In the
	// environment, TOOLRELAY_SETTING_<NAME>=value sets Settings["<name>"]
	// (the name lower-cased).
	Settings map[string]string `json:"settings,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1m30s").
type Duration time.Duration

// MarshalText returns the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// ConfigFileEnv names the environment variable that names the JSON
// configuration file.
const ConfigFileEnv = "TOOLRELAY_CONFIG"

const settingEnvPrefix = "TOOLRELAY_SETTING_"

// Load returns the configuration in effect: the JSON file named by
// TOOLRELAY_CONFIG (if set), overlaid by the environment, overlaid by the
// fields of code that are not zero. Values set in code win over the
// environment, which wins over the file. code may be nil.
func Load(code *Config) (*Config, error) {
	cfg := new(Config)
	if path := os.Getenv(ConfigFileEnv); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("adapter: config file: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("adapter: config file %s: %w", path, err)
		}
	}
	if err := fromEnv(reflect.ValueOf(cfg).Elem()); err != nil {
		return nil, err
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, settingEnvPrefix); ok && name != "" {
			if cfg.Settings == nil {
				cfg.Settings = map[string]string{}
			}
			cfg.Settings[strings.ToLower(name)] = v
		}
	}
	if code != nil {
		overlay(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(code).Elem())
	}
	return cfg, nil
}

// fromEnv sets the fields of v (a struct) whose env tag names a variable
// that is set.
func fromEnv(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			if err := fromEnv(fv); err != nil {
				return err
			}
			continue
		}
		name := f.Tag.Get("env")
		s, ok := os.LookupEnv(name)
		if name == "" || !ok || s == "" {
			continue
		}
		if err := setString(fv, s); err != nil {
			return fmt.Errorf("adapter: %s=%q: %w", name, s, err)
		}
	}
	return nil
}

func setString(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(interface{ UnmarshalText([]byte) error }); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	default:
		return fmt.Errorf("unsupported setting type %v", v.Type())
	}
	return nil
}

// overlay copies the non-zero fields of src over dst (structs of the same
// type), recursing into nested structs and merging maps.
func overlay(dst, src reflect.Value) {
	for i := range src.NumField() {
		d, s := dst.Field(i), src.Field(i)
		switch {
		case s.Kind() == reflect.Struct:
			overlay(d, s)
		case s.Kind() == reflect.Map && !s.IsNil():
			if d.IsNil() {
				d.Set(reflect.MakeMap(s.Type()))
			}
			for _, k := range s.MapKeys() {
				d.SetMapIndex(k, s.MapIndex(k))
			}
		case !s.IsZero():
			d.Set(s)
		}
	}
}
