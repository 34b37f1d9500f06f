package apierr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/toolrelay/toolrelay/internal/apierr"
)

func TestWithRefusal(t *testing.T) {
	long := strings.Repeat("x", 400)
	tests := []struct {
		name string
		err  error
		want string // WithRefusal(err).Error()
	}{
		{"400 with a message", &openai.Error{StatusCode: 400, Message: "the model script has no more steps"}, "the model script has no more steps: OpenAI API error: 400 Bad Request"},
		{"404, wrapped", fmt.Errorf("get: %w", &openai.Error{StatusCode: 404, Message: "No response found."}), "No response found.: get: OpenAI API error: 404 Not Found"},
		{"a long message is cut", &openai.Error{StatusCode: 422, Message: long}, long[:300] + "…: OpenAI API error: 422 Unprocessable Entity"},
		{"401: nothing added", &openai.Error{StatusCode: 401, Message: "Incorrect API key provided: sk-…"}, "OpenAI API error: 401 Unauthorized"},
		{"500: nothing added", &openai.Error{StatusCode: 500, Message: "boom"}, "OpenAI API error: 500 Internal Server Error"},
		{"400 without a message", &openai.Error{StatusCode: 400}, "OpenAI API error: 400 Bad Request"},
		{"not the SDK's", errors.New("dial tcp: refused"), "dial tcp: refused"},
	}
	for _, tt := range tests {
		err := apierr.WithRefusal(tt.err)
		if err.Error() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, err.Error(), tt.want)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: the original error is not reachable", tt.name)
		}
	}
}
