// Package usertext says what went wrong with a run in a sentence a
// person who uses an agent may read: by the error's code, never its
// text, which may hold what only the program should see. The servers
// of runs (package web, package a2atools) show it by default.
package usertext

import (
	"errors"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
)

// Of returns a sentence by err's code, the code named after it.
func Of(err error) string {
	code := errcode.Of(err)
	var msg string
	switch code {
	case errcode.DeadlineExceeded:
		msg = "The answer took too long."
	case errcode.ResourceExhausted:
		msg = "The agent reached a limit before it could answer."
	case errcode.Unavailable:
		msg = "The agent's service is unavailable. Try again later."
	case errcode.Canceled:
		msg = "The answer was stopped."
	case errcode.PermissionDenied:
		msg = "The agent's service refused the request."
	case errcode.InvalidArgument:
		msg = "The agent's service could not take the message."
	case errcode.FailedPrecondition:
		if errors.Is(err, core.ErrThreadBusy) {
			msg = "The agent is busy with this conversation. Try again later."
			break
		}
		msg = "The agent could not answer."
	default:
		msg = "The agent could not answer."
	}
	return msg + " (" + code.String() + ")"
}
