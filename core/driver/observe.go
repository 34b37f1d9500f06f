package driver

import "context"

// DeltaKind names what a [Delta] carries.
type DeltaKind uint8

// The kinds of delta.
const (
	// TextDelta: Text is the next piece of the text of message Item.
	TextDelta DeltaKind = iota + 1
	// TextDone: Text is the whole text of message Item, which is complete.
	TextDone
	// ReasoningDelta: Text is the next piece of a reasoning summary of
	// item Item.
	ReasoningDelta
	// AgentActivity: another agent of the run acted, such as a subagent
	// the service's agent delegated to: Agent names it, Activity says
	// what it did, Text holds what it said or was sent, if anything, and
	// Item names the item (or the subagent, for a change of its state).
	// None of it is part of the step's answer.
	AgentActivity
)

// A Delta is a piece of what the model produces while a step is being
// made, as the service streams it.
type Delta struct {
	Kind DeltaKind
	// Item names the output item (a message) the text belongs to. It is
	// unique within a run and the same for every piece of one item, also
	// after a reconnect.
	Item string
	// Text is the piece of text (TextDelta, ReasoningDelta) or the item's
	// whole text (TextDone, AgentActivity).
	Text string
	// Agent names the agent that acted (AgentActivity only): its id, or
	// its name, as the service gives it.
	Agent string
	// Activity says what the agent did (AgentActivity only), in the
	// service's words: an item's type (such as "message",
	// "agent_message" or "create_subagent_call") or an event's (such as
	// "subagent.created").
	Activity string
	// Commentary marks the text of a message the model wrote as
	// commentary (TextDelta, TextDone): a preamble to its calls or its
	// answer (on the Responses API and Foundry, an assistant message of
	// phase "commentary"), which is not part of the step's answer
	// ([Step.Text]). Every delta of a message carries the same mark.
	Commentary bool
}

// An Observer receives the deltas of a step as the service streams them.
// A backend calls it from the goroutine that called Start, Submit or
// Resume, in the order the service sent them, and reads no further until it
// returns: a slow observer slows the read of the stream, and nothing is
// buffered. When it returns an error, the backend stops and returns that
// error (it may wrap it).
//
// The TextDelta pieces of an item, concatenated, must be a prefix of its
// text: a backend whose stream was interrupted, and that cannot tell where
// the service's pieces resume, sends no more pieces of that item but its
// TextDone, with the item's whole text; the observer works out what was
// not yet seen. A backend that does not stream, or reads a step by polling,
// may send only a TextDone per item, or nothing (the runner then takes the
// final step's Text as one item).
type Observer func(Delta) error

type observerKey struct{}

// WithObserver returns ctx carrying o for the backend calls made with it,
// as net/http/httptrace carries a ClientTrace. A nil o removes an observer
// ctx carries.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// ObserverFrom returns the observer ctx carries, or nil. Backends that
// stream call it once per Start, Submit or Resume; with nil they may skip
// the work of decoding deltas.
func ObserverFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}
