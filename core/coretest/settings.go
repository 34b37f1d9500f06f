package coretest

import (
	"fmt"

	"github.com/toolrelay/toolrelay/errcode"
)

// FakeSettings are the configuration settings of the fake backends
// (fake-openai, fake-foundry, fake-responses): section "fake" of the
// configuration file and TOOLRELAY_SCRIPT in the environment. A program
// passes its script in code as adapter.Options.BackendSettings:
//
//	&adapter.Options{DefaultBackend: "fake-openai", BackendSettings: []any{coretest.FakeSettings{Script: script}}}
type FakeSettings struct {
	// ScriptFile is the path of a JSON model script (see [LoadScript]).
	ScriptFile string `json:"script,omitempty" env:"TOOLRELAY_SCRIPT"`
	// Script is the script itself, set in code; it wins over ScriptFile.
	Script *Script `json:"-"`
}

// Load returns the script the settings name, or an InvalidArgument error
// naming backend when they name none or the file does not load.
func (s *FakeSettings) Load(backend string) (*Script, error) {
	switch {
	case s.Script != nil:
		return s.Script, nil
	case s.ScriptFile == "":
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: " + backend,
			Err: fmt.Errorf("the fake backend needs a model script: pass coretest.FakeSettings in adapter.Options.BackendSettings, or set TOOLRELAY_SCRIPT to a JSON script file")}
	}
	sc, err := LoadScript(s.ScriptFile)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "adapter: " + backend + ": script " + s.ScriptFile, Err: err}
	}
	return sc, nil
}
