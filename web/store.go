package web

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolrelay/toolrelay/core/driver"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// A record is what the journal keeps of a chat, so that any process
// sharing it serves the chat's next request.
type record struct {
	// Owner is the identity that created the chat.
	Owner string `json:"owner"`
	// Thread is the runner's thread, once the service made it.
	Thread string `json:"thread,omitempty"`
	// State is "" when the chat awaits the user's next message,
	// "paused" when its answer awaits approvals, "interrupted" when its
	// answer's run stopped as its pages went away.
	State string `json:"state,omitempty"`
	// Message is the answer paused or interrupted, to continue.
	Message *message `json:"message,omitempty"`
}

const (
	statePaused      = "paused"
	stateInterrupted = "interrupted"
)

// store keeps chats' records as notes of the journal, under the runner's
// backend, a thread name of their own ("web-chat/" + id) and the name
// "web".
type store struct {
	notes   journaldriver.Notes
	backend string
}

// newStore returns the store of runner's chats: its journal's notes; or
// the runner's own, if it keeps notes (temporal.Runner keeps them in
// Temporal); or this process's memory.
func newStore(runner Runner) store {
	s := store{backend: "web"}
	if j, ok := runner.(interface{ Journal() journaldriver.Journal }); ok {
		s.notes, _ = j.Journal().(journaldriver.Notes)
	}
	if b, ok := runner.(interface{ Backend() driver.Backend }); ok && s.notes != nil {
		s.backend = b.Backend().Name()
	}
	if n, ok := runner.(journaldriver.Notes); ok && s.notes == nil {
		s.notes = n
	}
	if s.notes == nil {
		s.notes = journaldriver.NewMemory()
	}
	return s
}

func noteThread(id string) string { return "web-chat/" + id }

// load returns the record of chat id; a zero record if there is none.
func (s *store) load(ctx context.Context, id string) (record, error) {
	v, ok, err := s.notes.Note(ctx, s.backend, noteThread(id), "web")
	if err != nil || !ok {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return record{}, fmt.Errorf("web: the record of chat %s: %w", id, err)
	}
	return rec, nil
}

// save records rec for chat id.
func (s *store) save(ctx context.Context, id string, rec *record) error {
	return s.put(ctx, id, encode(rec))
}

// encode returns rec as a note's value.
func encode(rec *record) string {
	b, err := json.Marshal(rec)
	if err != nil {
		panic("web: encoding a chat's record: " + err.Error()) // it holds no value JSON cannot encode
	}
	return string(b)
}

// saveTimeout bounds a save of a chat's record, which does not end with
// the request or the run that makes it.
const saveTimeout = 30 * time.Second

// put records the encoded record of chat id.
func (s *store) put(ctx context.Context, id, rec string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	return s.notes.SetNote(ctx, s.backend, noteThread(id), "web", rec)
}
