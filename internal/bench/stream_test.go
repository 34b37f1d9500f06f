package bench

import (
	"context"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
)

// streamPiece is one delta of BenchmarkStream's answer.
const streamPiece = "abcdefg "

// A streamReader reads one turn's answer on thread as it streams and
// returns the text its pieces make.
type streamReader func(ctx context.Context, thread, input string) (string, error)

// BenchmarkStream (P6) measures the cost of one delta of a streamed
// answer: one op is one piece of 8 runes of a turn whose answer has b.N
// of them, read on an existing thread through openai-go's own stream
// ("raw": each event decoded into the SDK's event type, the text of the
// deltas appended) or toolrelay's (Runner.Stream, the text of each
// EventTextDelta appended).
func BenchmarkStream(b *testing.B) {
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			for _, name := range []string{"raw", "toolrelay"} {
				b.Run(name, func(b *testing.B) {
					text := strings.Repeat(streamPiece, b.N)
					s := &coretest.Script{DeltaSize: len(streamPiece), Turns: append(Script(1, 1, 1).Turns, coretest.Turn{Steps: []coretest.Step{{Text: text}}})}
					f := startChildFake(b, backend, s)
					tools, fns := Lookup(nil, nil)
					agent := f.agent(b, tools)
					thread, _, err := f.raw(agent, fns).turn(context.Background(), "", "start")
					if err != nil {
						b.Fatal(err)
					}
					read := f.rawStream(agent)
					if name == "toolrelay" {
						read = f.toolrelayStream(b, agent, tools)
					}
					b.ReportAllocs()
					b.ResetTimer()
					got, err := read(context.Background(), thread, "go")
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if got != text {
						b.Fatalf("the pieces make %d bytes (%q…), want %d", len(got), truncate(got), len(text))
					}
				})
			}
		})
	}
}

// rawStream reads a turn's answer with openai-go alone: a session's events
// (subscribed to before the input is posted), or a streamed response in
// the Foundry conversation.
func (f *fake) rawStream(agent string) streamReader {
	c := f.rawClient()
	if f.backend == "foundry" {
		return func(ctx context.Context, conversation, input string) (string, error) {
			p := responses.ResponseNewParams{
				Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(input, responses.EasyInputMessageRoleUser)}},
				Conversation: responses.ResponseNewParamsConversationUnion{OfString: oai.String(conversation)},
			}
			p.SetExtraFields(map[string]any{"agent_reference": map[string]any{"type": "agent_reference", "name": agent}})
			stream := c.Responses.NewStreaming(ctx, p)
			defer stream.Close()
			var text strings.Builder
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.output_text.delta" {
					text.WriteString(ev.Delta)
				}
			}
			return text.String(), stream.Err()
		}
	}
	return func(ctx context.Context, session, input string) (string, error) {
		stream := c.Beta.Agents.Sessions.Events.StreamStreaming(ctx, session)
		defer stream.Close()
		msg := oai.AgentSessionInputParamOfParamAgentSessionInputMessage([]oai.AgentSessionInputMessageParam{{
			Content: []oai.InputContentParamUnion{oai.InputContentParamOfParamInputText(input)},
		}})
		if err := c.Beta.Agents.Sessions.Events.New(ctx, session, oai.BetaAgentSessionEventNewParams{Events: []oai.AgentSessionInputParamUnion{msg}}); err != nil {
			return "", err
		}
		var text strings.Builder
		completed := false
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "agent.session.turn.output_text.delta":
				text.WriteString(ev.Delta)
			case "agent.session.turn.completed":
				completed = true
			case "agent.session.idle":
				if completed {
					return text.String(), nil
				}
			}
		}
		return text.String(), stream.Err()
	}
}

// toolrelayStream reads a turn's answer with Runner.Stream, on the
// streaming transport of each backend.
func (f *fake) toolrelayStream(tb testing.TB, agent string, tools *core.Toolbox) streamReader {
	tb.Helper()
	r := core.NewRunner(f.backendOf(tb, agent, tools, foundry.Streaming), tools, &core.Options{Logger: quiet})
	tb.Cleanup(func() { r.Close() })
	return func(ctx context.Context, thread, input string) (string, error) {
		var text strings.Builder
		st := r.Stream(ctx, input, &core.RunOptions{Thread: thread})
		for ev, err := range st.Events() {
			if err != nil {
				return "", err
			}
			if ev.Kind == core.EventTextDelta {
				text.WriteString(ev.Text)
			}
		}
		return text.String(), nil
	}
}
