package temporal

import (
	"bytes"
	"encoding/json"

	"github.com/toolrelay/toolrelay/core/driver"
)

// A call's arguments are carried as the service sent them, which may not
// be JSON (empty, or broken on purpose: core answers such a call with a
// failed result). The history's payloads are JSON, where a
// json.RawMessage must be valid: arguments that are not are wrapped in an
// object of one key, and unwrapped wherever a call leaves the history.
const rawKey = "toolrelay.raw_arguments"

var rawPrefix = []byte(`{"` + rawKey + `":`)

// wrapArgs returns args as they can go into the history.
func wrapArgs(args json.RawMessage) json.RawMessage {
	if len(args) > 0 && json.Valid(args) && !bytes.HasPrefix(args, rawPrefix) {
		return args
	}
	b, _ := json.Marshal(map[string]string{rawKey: string(args)})
	return b
}

// unwrapArgs returns the arguments wrapArgs wrapped.
func unwrapArgs(args json.RawMessage) json.RawMessage {
	if !bytes.HasPrefix(args, rawPrefix) {
		return args
	}
	var m map[string]string
	if json.Unmarshal(args, &m) != nil || len(m) != 1 {
		return args
	}
	return json.RawMessage(m[rawKey])
}

// wrapCalls wraps the arguments of every call of step.
func wrapCalls(step *driver.Step) {
	if step == nil {
		return
	}
	for i := range step.Calls {
		step.Calls[i].Arguments = wrapArgs(step.Calls[i].Arguments)
	}
}

// unwrapCalls unwraps the arguments of every call of step.
func unwrapCalls(step *driver.Step) {
	if step == nil {
		return
	}
	for i := range step.Calls {
		step.Calls[i].Arguments = unwrapArgs(step.Calls[i].Arguments)
	}
}

// unwrapResults unwraps the arguments of the calls results answer.
func unwrapResults(results []driver.ToolResult) {
	for i := range results {
		results[i].Call.Arguments = unwrapArgs(results[i].Call.Arguments)
	}
}
