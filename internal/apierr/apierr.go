// Package apierr reads what a service said in an error of openai-go, whose
// Error method leaves the response body out.
package apierr

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
)

// maxMessage bounds the service's message an error repeats.
const maxMessage = 300

// Refusal returns the message of a request the service refused as
// malformed or about something that is not there (status 400, 404, 409 or
// 422), cut to 300 bytes, or "" for any other error. Such a message says
// what to fix (a fake's, that its model script has no more steps), and
// holds nothing of the caller's credentials.
func Refusal(err error) string {
	var api *openai.Error
	if !errors.As(err, &api) {
		return ""
	}
	switch api.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
		if len(api.Message) > maxMessage {
			return api.Message[:maxMessage] + "…"
		}
		return api.Message
	}
	return ""
}

// WithRefusal returns err with the service's message of a refused request
// (see [Refusal]) before it, or err itself; the SDK's error stays
// reachable with errors.As.
func WithRefusal(err error) error {
	if msg := Refusal(err); msg != "" {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return err
}
