package foundrytest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry/foundrytest"
)

// horoscope is the seed's script: the model asks for the horoscope of
// Aquarius and answers with it.
func horoscope() *coretest.Script {
	return coretest.Simple("get_horoscope", `{"sign": "Aquarius"}`,
		`Your horoscope for Aquarius: {{output "get_horoscope"}}`)
}

// newServer starts a fake with an agent "my-agent" and returns it with an
// unmodified openai-go client pointed at it with a bearer token.
func newServer(t *testing.T, script *coretest.Script, opts *foundrytest.Options) (*foundrytest.Server, openai.Client) {
	t.Helper()
	srv := foundrytest.NewServer(script, opts)
	t.Cleanup(srv.Close)
	srv.AddAgent("my-agent", "gpt-4.1-mini")
	client := openai.NewClient(
		option.WithBaseURL(srv.OpenAIBaseURL()),
		option.WithAPIKey("test-token"),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
	return srv, client
}

func agentRef() option.RequestOption {
	return option.WithJSONSet("agent_reference", map[string]any{"type": "agent_reference", "name": "my-agent"})
}

func functionCalls(r *responses.Response) []responses.ResponseFunctionToolCall {
	var calls []responses.ResponseFunctionToolCall
	for _, o := range r.Output {
		if o.Type == "function_call" {
			calls = append(calls, o.AsFunctionCall())
		}
	}
	return calls
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}

func inputItems(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: items}
}

// TestOpenAIClientsRoundTrip runs the seed's function-calling flow with the
// unmodified openai-go responses and conversations clients: in a
// conversation (created with the user's message, answered with input: [])
// and in a chain of responses, streaming and not.
func TestOpenAIClientsRoundTrip(t *testing.T) {
	const want = "Your horoscope for Aquarius: Aquarius: Next Tuesday you will befriend a baby otter."
	const otter = "Aquarius: Next Tuesday you will befriend a baby otter."
	for _, tc := range []struct {
		name         string
		conversation bool
		stream       bool
	}{
		{"conversation", true, false},
		{"conversation-stream", true, true},
		{"chain", false, false},
		{"chain-stream", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, client := newServer(t, horoscope(), nil)
			ctx := context.Background()
			create := func(p responses.ResponseNewParams) *responses.Response {
				t.Helper()
				if !tc.stream {
					r, err := client.Responses.New(ctx, p, agentRef())
					if err != nil {
						t.Fatalf("Responses.New: %v", err)
					}
					return r
				}
				stream := client.Responses.NewStreaming(ctx, p, agentRef())
				defer stream.Close()
				var final *responses.Response
				var deltas strings.Builder
				for stream.Next() {
					ev := stream.Current()
					switch ev.Type {
					case "response.completed":
						r := ev.Response
						final = &r
					case "response.function_call_arguments.delta", "response.output_text.delta":
						deltas.WriteString(ev.Delta)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				if final == nil {
					t.Fatal("stream ended without response.completed")
				}
				if got, want := deltas.String(), final.OutputText()+functionArgs(final); got != want {
					t.Errorf("deltas = %q, want %q", got, want)
				}
				return final
			}

			var p responses.ResponseNewParams
			var thread string
			if tc.conversation {
				conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
					Items: []responses.ResponseInputItemUnionParam{
						responses.ResponseInputItemParamOfMessage("What is my horoscope? I am an Aquarius.", responses.EasyInputMessageRoleUser),
					},
				})
				if err != nil {
					t.Fatalf("Conversations.New: %v", err)
				}
				thread = conv.ID
				p = responses.ResponseNewParams{
					Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
					Input:        inputItems(),
				}
			} else {
				p = responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my horoscope? I am an Aquarius.")}}
			}
			r := create(p)
			calls := functionCalls(r)
			if len(calls) != 1 || calls[0].Name != "get_horoscope" {
				t.Fatalf("output = %s, want one call of get_horoscope", r.RawJSON())
			}
			var args struct{ Sign string }
			if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil || args.Sign != "Aquarius" {
				t.Fatalf("arguments = %q (%v), want sign Aquarius", calls[0].Arguments, err)
			}
			if got := r.JSON.ExtraFields["agent_reference"].Raw(); !strings.Contains(got, `"my-agent"`) {
				t.Errorf("agent_reference = %s, want my-agent", got)
			}
			if !tc.conversation {
				thread = r.ID
				p = responses.ResponseNewParams{PreviousResponseID: openai.String(r.ID)}
			}
			p.Input = inputItems(outputItem(calls[0].CallID, otter))
			r = create(p)
			if got := r.OutputText(); got != want {
				t.Errorf("answer = %q, want %q", got, want)
			}
			if r.Usage.TotalTokens != foundrytest.DefaultUsage.InputTokens+foundrytest.DefaultUsage.OutputTokens {
				t.Errorf("usage = %+v", r.Usage)
			}

			wantReceived := []coretest.Received{
				{Kind: "input", Thread: thread, Input: "What is my horoscope? I am an Aquarius."},
				{Kind: "results", Thread: thread, Results: []coretest.Delivered{{CallID: calls[0].CallID, Name: "get_horoscope", Output: otter}}},
			}
			if !tc.conversation {
				wantReceived[0].Thread = thread // the chain's first response
			}
			if diff := cmp.Diff(wantReceived, srv.Received()); diff != "" {
				t.Errorf("Received() mismatch (-want +got):\n%s", diff)
			}

			if tc.conversation {
				page, err := client.Conversations.Items.List(ctx, thread, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
				if err != nil {
					t.Fatalf("Items.List: %v", err)
				}
				var types []string
				for _, it := range page.Data {
					types = append(types, it.Type)
				}
				if diff := cmp.Diff([]string{"message", "function_call", "function_call_output", "message"}, types); diff != "" {
					t.Errorf("conversation items mismatch (-want +got):\n%s", diff)
				}
				if _, err := client.Conversations.Delete(ctx, thread); err != nil {
					t.Fatalf("Conversations.Delete: %v", err)
				}
				if got := srv.Conversations(); len(got) != 0 {
					t.Errorf("Conversations() = %v after delete", got)
				}
			} else {
				got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
				if err != nil || got.PreviousResponseID != thread {
					t.Errorf("Responses.Get = %v, %v; want previous_response_id %s", got, err, thread)
				}
			}
		})
	}
}

func functionArgs(r *responses.Response) string {
	var s strings.Builder
	for _, c := range functionCalls(r) {
		s.WriteString(c.Arguments)
	}
	return s.String()
}

// apiError returns err as an *openai.Error, failing the test if it is not
// one.
func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want an *openai.Error", err)
	}
	return e
}

var _ = http.StatusOK

// TestFaultOptionAndUsage checks the vocabulary the fake shares with
// openaitest: Options.Fault is asked for each request InjectFault queued
// nothing for, and Options.Usage is what every response reports.
func TestFaultOptionAndUsage(t *testing.T) {
	var asked []foundrytest.Op
	srv, client := newServer(t, coretest.Answer("hi"), &foundrytest.Options{
		Usage: foundrytest.Usage{InputTokens: 3, OutputTokens: 4},
		Fault: func(r *foundrytest.Request) *foundrytest.Fault {
			asked = append(asked, r.Op)
			if len(asked) == 1 {
				return &foundrytest.Fault{Status: http.StatusServiceUnavailable}
			}
			return nil
		},
	})
	ctx := context.Background()
	params := responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
	_, err := client.Responses.New(ctx, params, agentRef())
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first request = %v, want the 503 the Fault option gave", err)
	}
	srv.InjectFault(foundrytest.OpCreateResponse, foundrytest.Fault{Status: http.StatusTooManyRequests})
	if _, err := client.Responses.New(ctx, params, agentRef()); !errors.As(err, &oe) || oe.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request = %v, want the queued 429", err)
	}
	r, err := client.Responses.New(ctx, params, agentRef())
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.InputTokens != 3 || r.Usage.OutputTokens != 4 || r.Usage.TotalTokens != 7 {
		t.Errorf("usage = %+v, want 3 + 4", r.Usage)
	}
	if want := []foundrytest.Op{foundrytest.OpCreateResponse, foundrytest.OpCreateResponse}; !slices.Equal(asked, want) {
		t.Errorf("Fault asked for %v, want %v (not for the request a queued fault served)", asked, want)
	}
}

// TestDeltaSize streams a response whose text and arguments arrive in
// deltas of at most Options.DeltaSize runes, read with openai-go's own
// stream: the deltas concatenate to the final text and arguments.
func TestDeltaSize(t *testing.T) {
	const text = "Héllo, wörld: 日本語のテキストです."
	for _, tc := range []struct {
		name   string
		script *coretest.Script
	}{
		{"text", coretest.Answer(text)},
		{"arguments", coretest.Simple("get_horoscope", `{"sign":"Aquarius — ♒"}`, "done")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, client := newServer(t, tc.script, &foundrytest.Options{DeltaSize: 3})
			stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, agentRef())
			defer stream.Close()
			var deltas []string
			var final *responses.Response
			for stream.Next() {
				switch ev := stream.Current(); ev.Type {
				case "response.output_text.delta", "response.function_call_arguments.delta":
					deltas = append(deltas, ev.Delta)
				case "response.completed":
					r := ev.Response
					final = &r
				}
			}
			if err := stream.Err(); err != nil || final == nil {
				t.Fatalf("stream: %v (completed: %v)", err, final != nil)
			}
			want := final.OutputText() + functionArgs(final)
			if got := strings.Join(deltas, ""); got != want || len(deltas) < 2 {
				t.Errorf("%d deltas joined = %q, want %q in several", len(deltas), got, want)
			}
			for _, d := range deltas {
				if n := utf8.RuneCountInString(d); n > 3 || !utf8.ValidString(d) {
					t.Errorf("delta %q: %d runes, want at most 3 whole ones", d, n)
				}
			}
		})
	}
}
