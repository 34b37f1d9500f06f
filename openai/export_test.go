package openai

import "time"

// SetUnknownCallDelays replaces the pauses before a result refused as
// "Unknown pending tool call" is sent again, for the duration of a test.
func SetUnknownCallDelays(d []time.Duration) (restore func()) {
	old := unknownCallDelays
	unknownCallDelays = d
	return func() { unknownCallDelays = old }
}
