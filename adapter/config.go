package adapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/errcode"
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
	// RunTimeout bounds each run, from its start to its answer
	// (core.Options.RunTimeout), as a Go duration ("30m").
	RunTimeout Duration `json:"run_timeout,omitempty" env:"TOOLRELAY_RUN_TIMEOUT"`
	// MaxArgumentBytes bounds the arguments of one call, in bytes
	// (core.Options.MaxArgumentBytes).
	MaxArgumentBytes int `json:"max_argument_bytes,omitempty" env:"TOOLRELAY_MAX_ARGUMENT_BYTES"`
	// MaxOutputBytes bounds the output of one call, in bytes
	// (core.Options.MaxOutputBytes).
	MaxOutputBytes int `json:"max_output_bytes,omitempty" env:"TOOLRELAY_MAX_OUTPUT_BYTES"`
	// TruncateOutput cuts a text output past MaxOutputBytes instead of
	// failing the call (core.Options.TruncateOutput).
	TruncateOutput bool `json:"truncate_output,omitempty" env:"TOOLRELAY_TRUNCATE_OUTPUT"`
	// Script is the path of a JSON model script (package coretest) that the
	// fake backends play instead of the program's own.
	Script string `json:"script,omitempty" env:"TOOLRELAY_SCRIPT"`
	// Journal names the results journal (core.Options.Journal) by URL:
	// "memory", "sqlite:///path/file.db" or "postgres://…"; package
	// journal lists the forms. Empty means a memory journal.
	Journal string `json:"journal,omitempty" env:"TOOLRELAY_JOURNAL"`
	// JournalLease is how long a claim on a call lasts before another
	// worker may take the call over (core.Options.Lease), as a Go
	// duration; at least 1s.
	JournalLease Duration `json:"journal_lease,omitempty" env:"TOOLRELAY_JOURNAL_LEASE" min:"1s"`
	// JournalRetention, if set, is how long the journal keeps finished
	// entries before pruning them (journal.StartPruning), as a Go
	// duration ("720h"); at least the run time limit, so that no result
	// is pruned before its run has sent it.
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

// errDuration is the error of a duration that does not parse; it does not
// repeat the text, which may be anything.
var errDuration = errors.New("not a Go duration (such as 30s, 5m or 720h)")

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errDuration
	}
	*d = Duration(v)
	return nil
}

// ConfigFileEnv names the environment variable that names the JSON
// configuration file.
const ConfigFileEnv = "TOOLRELAY_CONFIG"

const settingEnvPrefix = "TOOLRELAY_SETTING_"

// Load returns the configuration in effect: the JSON file named by
// TOOLRELAY_CONFIG (if set), overlaid by the environment, overlaid by the
// fields of code that are not zero. Values set in code win over the
// environment, which wins over the file. code may be nil.
//
// A file that cannot be read or decoded (bad JSON, an unknown key, a value
// of the wrong type), an environment variable that does not parse, or a
// setting out of range (see the package doc) gives an error whose code is
// InvalidArgument; it names the variable or key, never its value.
func Load(code *Config) (*Config, error) {
	cfg := new(Config)
	if path := os.Getenv(ConfigFileEnv); path != "" {
		if err := readFile(path, cfg); err != nil {
			return nil, err
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
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readFile decodes the JSON configuration file at path into cfg.
func readFile(path string, cfg *Config) error {
	op := "adapter: config file " + path
	b, err := os.ReadFile(path)
	if err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(cfg)
	var syntax *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errDuration):
		// encoding/json does not say which key a TextUnmarshaler refused.
		return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("%s: %w", badDurationKey(b), err)}
	case errors.As(err, &syntax):
		return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("not valid JSON at byte %d: %w", syntax.Offset, err)}
	}
	return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
}

// badDurationKey returns the key (as in "openai.poll_interval") of the
// first duration setting of the JSON document b that does not parse.
func badDurationKey(b []byte) string {
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return "a duration"
	}
	var find func(t reflect.Type, doc map[string]any, prefix string) string
	find = func(t reflect.Type, doc map[string]any, prefix string) string {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Type == reflect.TypeFor[Duration]():
				if s, ok := doc[name].(string); ok {
					if _, err := time.ParseDuration(s); err != nil {
						return prefix + name
					}
				}
			case f.Type.Kind() == reflect.Struct:
				if sub, ok := doc[name].(map[string]any); ok {
					if key := find(f.Type, sub, prefix+name+"."); key != "" {
						return key
					}
				}
			}
		}
		return ""
	}
	if key := find(reflect.TypeFor[Config](), doc, ""); key != "" {
		return key
	}
	return "a duration"
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
			return &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: " + name, Err: err}
		}
	}
	return nil
}

// setString sets v from the text of an environment variable. Its errors
// do not repeat the text, which may be a secret set in the wrong variable.
func setString(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(interface{ UnmarshalText([]byte) error }); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) || (err == nil && v.OverflowInt(n)):
			return errors.New("out of range")
		case err != nil:
			return errors.New("not an integer")
		}
		v.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("not true or false")
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
