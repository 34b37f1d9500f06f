package openai

import "time"

// SetUnknownCallDelays replaces the pauses before a result refused as
// "Unknown pending tool call" is sent again, for the duration of a test.
func SetUnknownCallDelays(d []time.Duration) (restore func()) {
	old := unknownCallDelays
	unknownCallDelays = d
	return func() { unknownCallDelays = old }
}

// SeenEvents returns how many event ids the backend remembers for a session.
func (b *Backend) SeenEvents(session string) int {
	b.mu.Lock()
	st := b.threads[session]
	b.mu.Unlock()
	if st == nil {
		return 0
	}
	return len(st.order)
}

// MayPass is mayPass: whether a webhook handler tries a resume's error
// again.
var MayPass = mayPass

// SetMaxUnapplied replaces how long a polling run waits for results the
// service accepted and does not apply, for the duration of a test.
func SetMaxUnapplied(d time.Duration) (restore func()) {
	old := maxUnapplied
	maxUnapplied = d
	return func() { maxUnapplied = old }
}
