package bench

import (
	"context"
	"encoding/json"

	oai "github.com/openai/openai-go/v3"
)

// HelperTurn runs one turn on an idle session with openai-go's own helper,
// Sessions.Stream with ToolHandlers (which runs each function call in
// turn, as its event arrives) and FinalResult, and returns the answer.
func HelperTurn(ctx context.Context, c *oai.Client, session, input string, fns map[string]Func) (string, error) {
	handlers := make(map[string]oai.AgentToolHandler, len(fns))
	for name, fn := range fns {
		handlers[name] = func(ctx context.Context, args map[string]any) (any, error) {
			b, err := json.Marshal(args)
			if err != nil {
				return nil, err
			}
			return fn(ctx, b)
		}
	}
	s := c.Beta.Agents.Sessions.Stream(ctx, session, oai.AgentSessionStreamParams{Input: input, ToolHandlers: handlers})
	defer s.Close()
	r, err := s.FinalResult()
	if err != nil {
		return "", err
	}
	return r.OutputText(), nil
}
