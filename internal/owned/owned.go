// Package owned holds the marks the backends leave on what they create on
// a service, so that another process (or a later run) can tell what a
// toolrelay backend made, and for what: the threads it deletes once their
// run is over, and the agents (or agent versions) it made from a
// definition, found again by the definition's digest instead of made
// anew.
package owned

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// The metadata marks.
const (
	// ThreadKey, with the value Disposable, marks a thread (a session or a
	// conversation) that a backend created and deletes once its run is
	// over. A backend in another process that resumes it (a takeover, an
	// approval decided elsewhere) takes that duty over. A thread without
	// the mark (the caller's own, or one made with Keep) is never deleted
	// by a backend that did not create it.
	ThreadKey  = "toolrelay"
	Disposable = "disposable"
	// DefinitionKey holds the digest ([Digest]) of the definition an agent
	// (or agent version) was made from. A backend that needs an agent of
	// the same definition uses it rather than make another.
	DefinitionKey = "toolrelay_definition"
)

// Digest returns the digest of a definition: the SHA-256 of its JSON, in
// hex (64 characters, within the 512 a metadata value may hold).
func Digest(def any) (string, error) {
	b, err := json.Marshal(def)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Thread returns the metadata of a thread a backend creates: the mark of a
// disposable thread, or nil when the backend keeps what it creates.
func Thread(keep bool) map[string]string {
	if keep {
		return nil
	}
	return map[string]string{ThreadKey: Disposable}
}

// IsDisposable reports whether a thread's metadata marks it disposable.
func IsDisposable(metadata map[string]string) bool { return metadata[ThreadKey] == Disposable }
