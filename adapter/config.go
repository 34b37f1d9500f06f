package adapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// Settings holds the settings every backend shares: which backend to open,
// the runner's limits and the journal. [Load] fills it from a JSON file, the
// environment and code; the package doc lists each setting with its
// environment variable and file key. Each backend reads settings of its own
// from a section of the file and from the environment (see
// [OpenRequest.BackendSettings]).
//
// Its fields are the table of the shared settings, a setting a field: the
// tags of each say where it is read (env, its environment variable; json,
// its file key), its range (min, see the package doc), its row of the
// package doc's table (doc, what it is; doc_default, its default: the
// package's tests make the table from them) and, for a setting of core's,
// the field of core.Options it sets (runner: [Open] copies a setting that
// is set, above zero, true or a table, over Options.Runner's value). A new
// setting is one field.
type Settings struct {
	// Backend names the backend to open (see [Backends]).
	Backend string `json:"backend,omitempty" env:"TOOLRELAY_BACKEND" doc:"backend to open"`
	// Instructions are the model's instructions, for backends that make
	// an agent (or send instructions) themselves.
	Instructions string `json:"instructions,omitempty" env:"TOOLRELAY_INSTRUCTIONS" doc:"model instructions"`
	// MaxSteps bounds the steps of one run (core.Options.MaxSteps).
	MaxSteps int `json:"max_steps,omitempty" env:"TOOLRELAY_MAX_STEPS" doc:"step limit per run" doc_default:"10" runner:"MaxSteps"`
	// Concurrency bounds the calls of one step run at once
	// (core.Options.Concurrency).
	Concurrency int `json:"concurrency,omitempty" env:"TOOLRELAY_CONCURRENCY" doc:"calls run at once" doc_default:"16" runner:"Concurrency"`
	// ToolTimeout bounds each handler without a timeout of its own
	// (core.Options.ToolTimeout), as a Go duration ("30s").
	ToolTimeout Duration `json:"tool_timeout,omitempty" env:"TOOLRELAY_TOOL_TIMEOUT" doc:"default tool timeout" doc_default:"5m" runner:"ToolTimeout"`
	// RunTimeout bounds each run, from its start to its answer
	// (core.Options.RunTimeout), as a Go duration ("30m").
	RunTimeout Duration `json:"run_timeout,omitempty" env:"TOOLRELAY_RUN_TIMEOUT" doc:"run time limit" doc_default:"30m" runner:"RunTimeout"`
	// MaxArgumentBytes bounds the arguments of one call, in bytes
	// (core.Options.MaxArgumentBytes).
	MaxArgumentBytes int `json:"max_argument_bytes,omitempty" env:"TOOLRELAY_MAX_ARGUMENT_BYTES" doc:"arguments per call" doc_default:"1048576 (1 MiB)" runner:"MaxArgumentBytes"`
	// MaxOutputBytes bounds the output of one call, in bytes
	// (core.Options.MaxOutputBytes).
	MaxOutputBytes int `json:"max_output_bytes,omitempty" env:"TOOLRELAY_MAX_OUTPUT_BYTES" doc:"output per call" doc_default:"4194304 (4 MiB)" runner:"MaxOutputBytes"`
	// TruncateOutput cuts a text output past MaxOutputBytes instead of
	// failing the call (core.Options.TruncateOutput).
	TruncateOutput bool `json:"truncate_output,omitempty" env:"TOOLRELAY_TRUNCATE_OUTPUT" doc:"cut text past the limit" doc_default:"false" runner:"TruncateOutput"`
	// MaxResponseBytes bounds a response body of the service, and
	// MaxEventBytes one event of its streams, in bytes; negative means no
	// limit (the backends' MaxResponseBytes and MaxEventBytes).
	MaxResponseBytes int `json:"max_response_bytes,omitempty" env:"TOOLRELAY_MAX_RESPONSE_BYTES" min:"none" doc:"service's response size" doc_default:"67108864 (64 MiB)"`
	MaxEventBytes    int `json:"max_event_bytes,omitempty" env:"TOOLRELAY_MAX_EVENT_BYTES" min:"none" doc:"service's event size" doc_default:"16777216 (16 MiB)"`
	// IdleTimeout bounds the wait for an answer of the service (its
	// headers, then the whole of a body that is not a stream, or the next
	// bytes of a stream), and MaxSilence each wait for the next complete
	// event of a stream (keep-alives, fields without data and an event's
	// partial bytes do not count), as Go durations; negative means no
	// limit (the backends' IdleTimeout and MaxSilence).
	IdleTimeout Duration `json:"idle_timeout,omitempty" env:"TOOLRELAY_IDLE_TIMEOUT" min:"none" doc:"wait for an answer" doc_default:"10m"`
	MaxSilence  Duration `json:"max_silence,omitempty" env:"TOOLRELAY_MAX_SILENCE" min:"none" doc:"wait for the next event" doc_default:"10m"`
	// Journal names the results journal (core.Options.Journal) by URL:
	// "memory", "sqlite:///path/file.db" or "postgres://…"; package
	// journal lists the forms. Empty means a memory journal.
	Journal string `json:"journal,omitempty" env:"TOOLRELAY_JOURNAL" doc:"results journal (URL)" doc_default:"memory"`
	// JournalLease is how long a claim on a call lasts before another
	// worker may take the call over (core.Options.Lease), as a Go
	// duration; at least 1s.
	JournalLease Duration `json:"journal_lease,omitempty" env:"TOOLRELAY_JOURNAL_LEASE" min:"1s" doc:"journal lease" doc_default:"1m (at least 1s)" runner:"Lease"`
	// JournalRetention, if set, is how long the journal keeps finished
	// entries before pruning them (journal.StartPruning), as a Go
	// duration ("720h"); at least the run time limit, so that no result
	// is pruned before its run has sent it.
	JournalRetention Duration `json:"journal_retention,omitempty" env:"TOOLRELAY_JOURNAL_RETENTION" doc:"journal retention" doc_default:"keep all"`
	// MaxInputTokens, MaxOutputTokens and MaxTotalTokens bound the tokens
	// of a run, MaxToolCalls its calls, and MaxCost the cost of its tokens
	// at Prices (core.Options.Budget; see core.Budget). Zero sets no limit.
	MaxInputTokens  int     `json:"max_input_tokens,omitempty" env:"TOOLRELAY_MAX_INPUT_TOKENS" doc:"input tokens per run" doc_default:"no limit" runner:"Budget.MaxInputTokens"`
	MaxOutputTokens int     `json:"max_output_tokens,omitempty" env:"TOOLRELAY_MAX_OUTPUT_TOKENS" doc:"output tokens per run" doc_default:"no limit" runner:"Budget.MaxOutputTokens"`
	MaxTotalTokens  int     `json:"max_total_tokens,omitempty" env:"TOOLRELAY_MAX_TOTAL_TOKENS" doc:"tokens per run" doc_default:"no limit" runner:"Budget.MaxTotalTokens"`
	MaxToolCalls    int     `json:"max_tool_calls,omitempty" env:"TOOLRELAY_MAX_TOOL_CALLS" doc:"tool calls per run" doc_default:"no limit" runner:"Budget.MaxToolCalls"`
	MaxCost         float64 `json:"max_cost,omitempty" env:"TOOLRELAY_MAX_COST" doc:"cost per run" doc_default:"no limit" runner:"Budget.MaxCost"`
	// Prices are the prices of a million tokens by model (core.Budget's
	// Prices): in the file an object {"model": {"input": 1.75, "output":
	// 14}, "*": …}, in the environment the same object as JSON.
	Prices Prices `json:"prices,omitempty" env:"TOOLRELAY_PRICES" doc:"prices per model (JSON)" doc_default:"none" runner:"Budget.Prices"`
	// Replay records the backend's HTTP traffic into a cassette, or
	// replays it from one, with no change to the program (package
	// replay): "record:FILE", "replay:FILE" or "auto:FILE" (replay when
	// FILE exists, else record). Every backend's requests go through it,
	// Entra ID token requests included; the runner's Close writes a
	// recording.
	Replay string `json:"replay,omitempty" env:"TOOLRELAY_REPLAY" doc:"record, replay traffic" doc_default:"off"`
}

// Prices are the prices of tokens by model, as core.Budget.Prices; its
// text form (an environment variable) is the JSON object. A table is one
// setting: the table of the place that wins is taken whole, not laid
// over the others model by model.
type Prices map[string]core.Price

// errPrices is the error of a price table that does not parse; it does
// not repeat the text.
var errPrices = errors.New(`not a JSON object of prices ({"model": {"input": 1.75, "output": 14}})`)

// UnmarshalText parses the JSON object of a price table.
func (p *Prices) UnmarshalText(b []byte) error { return p.UnmarshalJSON(b) }

// UnmarshalJSON decodes a price table, a JSON object (in the file).
func (p *Prices) UnmarshalJSON(b []byte) error {
	var m map[string]core.Price
	if err := json.Unmarshal(b, &m); err != nil {
		return errPrices
	}
	*p = m
	return nil
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1m30s").
type Duration time.Duration

// MarshalText returns the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// errDuration is the error of a duration that does not parse; it does not
// repeat the text, which may be anything, nor holds sample durations, which
// a text may hold (FuzzLoadEnv found " 30s" in "such as 30s, …").
var errDuration = errors.New("not a Go duration (a number and a unit: h, m, s or ms)")

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errDuration
	}
	*d = Duration(v)
	return nil
}

// SettingsFileEnv names the environment variable that names the JSON
// configuration file.
const SettingsFileEnv = "TOOLRELAY_CONFIG"

// Load returns the configuration in effect: the JSON file named by
// TOOLRELAY_CONFIG (if set), overlaid by the environment, overlaid by the
// fields of code that are not zero. Values set in code win over the
// environment, which wins over the file. code may be nil.
//
// A file that cannot be read or decoded (bad JSON, an unknown key, a value
// of the wrong type), an environment variable that does not parse, or a
// setting out of range (see the package doc) gives an error whose code is
// InvalidArgument; it names the variable or key, never its value.
func Load(code *Settings) (*Settings, error) {
	cfg, _, err := load(code)
	return cfg, err
}

// file is a configuration file: its path and its backend sections, which
// the backends decode (see [OpenRequest.BackendSettings]).
type file struct {
	path     string
	sections map[string]json.RawMessage
}

// section returns the file's section named name; f may be nil.
func (f *file) section(name string) (json.RawMessage, bool) {
	if f == nil {
		return nil, false
	}
	b, ok := f.sections[name]
	return b, ok
}

// load is Load, also returning the file's sections.
func load(code *Settings) (*Settings, *file, error) {
	cfg, f := new(Settings), new(file)
	if path := os.Getenv(SettingsFileEnv); path != "" {
		var err error
		if f, err = readFile(path, cfg); err != nil {
			return nil, nil, err
		}
	}
	if err := fromEnv(reflect.ValueOf(cfg).Elem()); err != nil {
		return nil, nil, err
	}
	if code != nil {
		overlay(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(code).Elem())
	}
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	return cfg, f, nil
}

// readFile reads the JSON configuration file at path: its shared settings
// into cfg, and its sections (the keys that are not shared settings and
// hold objects) into the file it returns.
func readFile(path string, cfg *Settings) (*file, error) {
	op := "adapter: config file " + path
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, decodeError(op, b, reflect.TypeFor[Settings](), err)
	}
	f := &file{path: path, sections: map[string]json.RawMessage{}}
	shared := map[string]json.RawMessage{}
	keys := jsonKeys(reflect.TypeFor[Settings]())
	for k, v := range doc {
		switch {
		case keys[k]:
			shared[k] = v
		case bytes.HasPrefix(bytes.TrimLeft(v, " \t\r\n"), []byte("{")):
			f.sections[k] = v
		default:
			return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("unknown setting %q (a backend's settings go in an object named after its section)", k)}
		}
	}
	b, _ = json.Marshal(shared)
	return f, decodeStrict(op, b, cfg)
}

// decodeStrict decodes the JSON object b into v (a pointer to a struct),
// refusing unknown keys.
func decodeStrict(op string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(op, b, reflect.TypeOf(v).Elem(), err)
	}
	return nil
}

// decodeError returns the InvalidArgument error of a JSON document b that
// does not decode into a value of type t; it quotes no value.
func decodeError(op string, b []byte, t reflect.Type, err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, errDuration):
		// encoding/json does not say which key a TextUnmarshaler refused.
		return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("%s: %w", badDurationKey(b, t), err)}
	case errors.As(err, &syntax):
		return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: fmt.Errorf("not valid JSON at byte %d: %w", syntax.Offset, err)}
	}
	return &errcode.Error{Code: errcode.InvalidArgument, Op: op, Err: err}
}

// jsonKeys returns the file keys of the fields of t, a struct.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// badDurationKey returns the key (as in "openai.poll_interval") of the
// first duration setting of the JSON document b that does not parse.
func badDurationKey(b []byte, t reflect.Type) string {
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
	if key := find(t, doc, ""); key != "" {
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
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("not a number")
		}
		v.SetFloat(f)
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
// type), recursing into nested structs: a setting comes whole from the
// place that wins, a price table too.
func overlay(dst, src reflect.Value) {
	for i := range src.NumField() {
		d, s := dst.Field(i), src.Field(i)
		switch {
		case s.Kind() == reflect.Struct:
			overlay(d, s)
		case !s.IsZero():
			d.Set(s)
		}
	}
}
